"""The end of a run's heal: every node running and the cluster ready, where any node may still
be going down on its own.

The fsync and disk families make a node take its log directory offline and stop by itself
(finding 3), and that stop can take seconds (a controlled shutdown that finds no controller
waits for one). A node still stopping when the run heals is alive, so it is not started;
it exits a moment later. Failing the run then (finding 10) loses a run whose cluster did
exactly what it should. So the heal loops until its deadline: resume paused nodes, start
dead ones (again, if they exit again), and ask whether the cluster is ready; it is done only
when the cluster is ready and, after that answer, every node is still alive.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["HealFailed", "HealNode", "heal_nodes"]


class HealNode(Protocol):
    """What the heal needs of a node (odradek's LocalNode has it)."""

    node_id: int
    paused: bool

    def alive(self) -> bool: ...
    def resume(self) -> None: ...
    def start(self) -> Any: ...
    @property
    def returncode(self) -> int | None: ...


class HealFailed(RuntimeError):
    """The cluster was not ready with every node alive by the heal's deadline."""


def heal_nodes(nodes: list[HealNode], ready: Callable[[], Any], timeout: float = 180.0,
               every: float = 0.5) -> dict[str, Any]:
    """Heal until `ready()` returns something truthy with every node alive after it (its
    exceptions count as not ready). Returns {"ready": what ready() gave, "started": {node:
    times started}, "exits": {node: exit codes seen}}; raises HealFailed at the deadline
    with what it last saw."""
    deadline = time.monotonic() + timeout
    started: dict[int, int] = {}
    exits: dict[int, list[int | None]] = {}
    last: str = "not asked yet"
    while True:
        for node in nodes:
            if node.paused:
                node.resume()
            if not node.alive():
                if node.returncode is not None or node.node_id in started:
                    exits.setdefault(node.node_id, []).append(node.returncode)
                node.start()
                started[node.node_id] = started.get(node.node_id, 0) + 1
        try:
            state = ready()
            last = f"ready() gave {state!r}"[:500]
        except Exception as exc:  # a node restarting, a metadata call timing out
            state = None
            last = f"ready() raised {exc!r}"[:500]
        # a node that exited while ready() was asked is caught here and started next round
        if state and all(node.alive() for node in nodes):
            return {"ready": state, "started": started, "exits": exits}
        if time.monotonic() >= deadline:
            dead = [n.node_id for n in nodes if not n.alive()]
            raise HealFailed(f"not ready after {timeout:g} s: {last}; dead now {dead}; "
                             f"started {started}; exits {exits}")
        time.sleep(every)
