"""Proxy faults (proxy.py): chosen API keys (Produce, EndTxn, ...) delayed or black-holed,
10-30% loss emulated as stalls and resets, and connection resets."""

from __future__ import annotations

import threading
from typing import Any

from tests.system.jepsen.nemesis.base import Nemesis
from tests.system.jepsen.proxy import Rules
from tests.system.jepsen.schedule import Fault

__all__ = ["ProxyNemesis"]


class ProxyNemesis(Nemesis):
    family = "proxy"
    _resetter: threading.Thread | None = None
    _reset_stop: threading.Event | None = None

    def start(self, fault: Fault) -> dict[str, Any]:
        proxy = self.ctx.proxy
        if proxy is None:
            raise RuntimeError("the proxy family needs the proxy in front of the clients")
        apis = list(fault.params.get("apis", []))
        if fault.kind == "delay":
            proxy.set_rules(Rules(delay_ms={a: int(fault.params["delay_ms"]) for a in apis}))
        elif fault.kind == "blackhole":
            proxy.set_rules(Rules(blackhole=set(apis)))
        elif fault.kind == "loss":
            proxy.set_rules(Rules(loss_rate=float(fault.params["rate"])))
        else:  # reset: every connection now and again every second while the fault lasts
            stop = threading.Event()

            def resets() -> None:
                while True:
                    proxy.reset_all()
                    if stop.wait(1.0):
                        return

            self._reset_stop = stop
            self._resetter = threading.Thread(target=resets, name="resets", daemon=True)
            self._resetter.start()
        return {"kind": fault.kind, **fault.params, "stats": proxy.stats.snapshot()}

    def _stop_resets(self) -> None:
        if self._reset_stop is not None:
            self._reset_stop.set()
        if self._resetter is not None:
            self._resetter.join()
        self._resetter = self._reset_stop = None

    def stop(self, fault: Fault, state: dict[str, Any]) -> dict[str, Any]:
        self._stop_resets()
        self.ctx.proxy.clear()
        return {"kind": fault.kind, "stats": self.ctx.proxy.stats.snapshot()}

    def heal_all(self) -> None:
        self._stop_resets()
        if self.ctx.proxy is not None:
            self.ctx.proxy.clear()
