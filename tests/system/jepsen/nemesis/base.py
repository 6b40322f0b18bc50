"""What every fault family shares: the context it acts on and how it picks its node."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.system.jepsen.cluster import JepsenCluster
from tests.system.jepsen.schedule import Fault

__all__ = ["Context", "Nemesis", "resolve_target"]


@dataclass
class Context:
    cluster: JepsenCluster
    topic: str  # the first workload topic: "leader"/"follower" are of its partitions
    workdir: Path
    proxy: Any = None  # proxy.Proxy when the proxy family runs
    history: Any = None  # the run's History (the producer family writes its crashed txn)
    stop: threading.Event = field(default_factory=threading.Event)


def _alive(ctx: Context) -> list[int]:
    return sorted(i for i, n in ctx.cluster.nodes.items() if n.alive() and not n.paused)


def resolve_target(ctx: Context, fault: Fault) -> int:
    """The node `fault.target` names now; any running node (by `pick`) when the cluster
    cannot say (no leader at the moment, a metadata call timing out)."""
    alive = _alive(ctx) or sorted(ctx.cluster.nodes)
    try:
        if fault.target == "controller":
            leader = ctx.cluster.quorum_leader()
            if leader in alive:
                return leader
        elif fault.target in ("leader", "follower"):
            parts = ctx.cluster.partitions(ctx.topic)
            p = parts[fault.partition % len(parts)]
            if fault.target == "leader" and p["leader"] in alive:
                return int(p["leader"])
            followers = [r for r in p["replicas"] if r != p["leader"] and r in alive]
            if fault.target == "follower" and followers:
                return followers[fault.pick % len(followers)]
    except Exception:  # no answer now: fall back to a node by pick
        pass
    return alive[fault.pick % len(alive)]


class Nemesis:
    """One fault family: `start` makes the fault and says what it did (written to the
    history), `stop` heals that one fault, `heal_all` undoes anything of this family."""

    family = ""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def start(self, fault: Fault) -> dict[str, Any]:
        raise NotImplementedError

    def stop(self, fault: Fault, state: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def heal_all(self) -> None:
        """Called once after the schedule, whatever happened: must be safe to repeat."""
