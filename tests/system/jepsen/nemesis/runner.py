"""Plays a schedule: each fault started at its time, healed after its duration, both written
to the history (`nemesis` ops: f = the family on start, "heal" on the heal, with what was
done as the value). A fault that cannot be made (no node to hit, a tool failing) is written
with its error and the schedule goes on. `heal_all` runs at the end whatever happened."""

from __future__ import annotations

import threading
import time
import traceback
from typing import Any

from tests.system.jepsen.nemesis import NEMESES, Context, Nemesis
from tests.system.jepsen.schedule import Fault

__all__ = ["NemesisRunner"]


def _public(state: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in state.items() if not k.startswith("_")}


class NemesisRunner:
    def __init__(self, ctx: Context, faults: list[Fault]) -> None:
        self.ctx = ctx
        self.faults = faults
        self.nemeses: dict[str, Nemesis] = {f: cls(ctx) for f, cls in NEMESES.items()
                                            if any(x.family == f for x in faults)}
        self.errors: list[str] = []
        self.done: list[dict[str, Any]] = []
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)
        self._t0 = 0.0

    def _note(self, f: str, value: dict[str, Any]) -> None:
        if self.ctx.history is not None:
            self.ctx.history.nemesis(f, value)

    def _wait_until(self, t: float) -> bool:
        """False when the run is being stopped."""
        return not self.ctx.stop.wait(max(0.0, self._t0 + t - time.monotonic()))

    def _run(self) -> None:
        for fault in self.faults:
            if not self._wait_until(fault.at):
                return
            nemesis = self.nemeses[fault.family]
            base = {"kind": fault.kind, "target": fault.target, "at": fault.at}
            try:
                state = nemesis.start(fault)
            except Exception as exc:  # written down, the schedule goes on
                self.errors.append(f"{fault.family}/{fault.kind} at {fault.at}: {exc!r}")
                self._note(fault.family, {**base, "error": repr(exc),
                                          "trace": traceback.format_exc()[-800:]})
                continue
            self._note(fault.family, {**base, **_public(state)})
            self.ctx.stop.wait(fault.duration)  # a stop cuts the fault short, the heal runs
            try:
                healed = nemesis.stop(fault, state)
            except Exception as exc:
                self.errors.append(f"heal {fault.family}/{fault.kind} at {fault.at}: {exc!r}")
                healed = {"error": repr(exc)}
            self._note("heal", {"family": fault.family, **base, **_public(healed)})
            self.done.append({"fault": fault.describe(), "state": _public(state)})
            if self.ctx.stop.is_set():
                return

    def start(self) -> NemesisRunner:
        self._t0 = time.monotonic()
        self._thread.start()
        return self

    def finish(self, timeout: float = 300.0) -> None:
        """Stop the schedule (the fault in progress is healed) and heal everything."""
        self.ctx.stop.set()
        self._thread.join(timeout)
        for nemesis in self.nemeses.values():
            try:
                nemesis.heal_all()
            except Exception as exc:
                self.errors.append(f"heal_all {nemesis.family}: {exc!r}")
        self.ctx.cluster.net.heal()
        self._note("heal", {"family": "all"})
