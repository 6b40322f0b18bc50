"""iptables partitions inside the nodes' namespaces (netns.Net): a minority cut from the
majority (clients still reach it), a node isolated from nodes and clients, a leader cut from
its followers only, a bridge (one link of three cut: non-transitive), and flapping (a
partition that comes and goes every `period_s`)."""

from __future__ import annotations

import threading
from typing import Any

from tests.system.jepsen.nemesis.base import Nemesis, resolve_target
from tests.system.jepsen.schedule import Fault

__all__ = ["PartitionNemesis"]


class PartitionNemesis(Nemesis):
    family = "partition"
    _flapper: threading.Thread | None = None
    _flap_stop: threading.Event | None = None

    def _groups(self, fault: Fault, node: int) -> list[list[int]]:
        others = [i for i in sorted(self.ctx.cluster.nodes) if i != node]
        if fault.kind == "bridge":  # node talks to both others, they cannot talk to each other
            return [[others[0]], [others[1]]]
        return [[node], others]

    def start(self, fault: Fault) -> dict[str, Any]:
        net = self.ctx.cluster.net
        node = resolve_target(self.ctx, fault)
        groups = self._groups(fault, node)
        if fault.kind == "flapping":
            stop = threading.Event()
            period = float(fault.params["period_s"])

            def flap() -> None:
                cut = False
                while not stop.wait(period):
                    if cut:
                        net.heal()
                    else:
                        net.partition(groups)
                    cut = not cut

            net.partition(groups)
            self._flap_stop = stop
            self._flapper = threading.Thread(target=flap, name="flapping", daemon=True)
            self._flapper.start()
        else:
            net.partition(groups)
            if fault.kind == "isolated":
                net.isolate_from_clients(node)
        return {"node": node, "groups": groups, "kind": fault.kind}

    def _stop_flapping(self) -> None:
        if self._flap_stop is not None:
            self._flap_stop.set()
        if self._flapper is not None:
            self._flapper.join()
        self._flapper = self._flap_stop = None

    def stop(self, fault: Fault, state: dict[str, Any]) -> dict[str, Any]:
        self._stop_flapping()
        self.ctx.cluster.net.heal()
        return {"groups": state["groups"]}

    def heal_all(self) -> None:
        self._stop_flapping()
        self.ctx.cluster.net.heal()
