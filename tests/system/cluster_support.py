"""Real multi-process clusters for the system tests (issue 14).

`running_cluster(root, nodes=3)` formats and starts N combined nodes (or, with
`controllers=K`, K controller-only and N broker-only nodes) of real `odradek serve` processes
on free loopback ports, waits until the quorum has a leader and every broker is unfenced, and
stops them all at the end. Each node can be killed (-9), paused (SIGSTOP) and resumed,
stopped with SIGTERM and started again (`odradek.broker.local_cluster.LocalNode`). Waits are
conditions polled until a deadline, which fail the test with the nodes' logs: no sleep and
then assert, no assertion on how long something took.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from odradek.broker.admin_calls import call, cluster_state
from odradek.broker.local_cluster import LocalCluster, LocalNode

__all__ = ["Cluster", "running_cluster", "wait_until"]

# settings that keep failover quick on a loaded 2-core machine without being Kafka-unlike
FAST = {
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "4000",
    "replica.lag.time.max.ms": "10000",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
    "log.level": "INFO",
}


def wait_until(cond: Callable[[], Any], what: str, timeout: float = 60.0,
               cluster: Cluster | None = None, every: float = 0.1) -> Any:
    """Poll `cond` until it returns something truthy; fail with `what` (and the nodes' logs)
    at the deadline. Exceptions from `cond` count as not yet."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            value = cond()
        except Exception as exc:  # a node restarting, a leader moving
            last = exc
            value = None
        if value:
            return value
        if cluster is not None:
            cluster.check_alive()
        time.sleep(every)
    logs = cluster.logs() if cluster is not None else ""
    pytest.fail(f"gave up waiting for {what} after {timeout:g} s"
                f"{f' (last error: {last})' if last else ''}\n{logs}")


class Cluster:
    """A LocalCluster with the waits the tests need."""

    def __init__(self, local: LocalCluster) -> None:
        self.local = local
        self.expected_down: set[int] = set()

    @property
    def nodes(self) -> dict[int, LocalNode]:
        return self.local.nodes

    def node(self, node_id: int) -> LocalNode:
        return self.local.nodes[node_id]

    @property
    def bootstrap(self) -> str:
        return self.local.bootstrap

    def bootstrap_of(self, node_ids: list[int] | None = None) -> str:
        ids = node_ids or [n.node_id for n in self.local.brokers
                           if n.node_id not in self.expected_down]
        return ",".join(self.node(i).bootstrap for i in ids)

    def logs(self, tail: int = 6000) -> str:
        return "\n".join(f"--- node {n.node_id} ({n.log_path}):\n{n.log(tail)}"
                         for n in self.nodes.values())

    def check_alive(self) -> None:
        """A node that exited without the test asking for it fails the test at once."""
        for node in self.nodes.values():
            if node.node_id in self.expected_down or node.proc is None:
                continue
            if not node.alive():
                pytest.fail(f"node {node.node_id} exited with {node.returncode}:\n"
                            f"{node.log()}")

    # ---------------------------------------------------------------- faults

    def kill9(self, node_id: int) -> None:
        self.expected_down.add(node_id)
        self.node(node_id).kill9()

    def sigterm(self, node_id: int, timeout: float = 60.0) -> int | None:
        self.expected_down.add(node_id)
        return self.node(node_id).stop(timeout)

    def pause(self, node_id: int) -> None:
        self.expected_down.add(node_id)
        self.node(node_id).pause()

    def resume(self, node_id: int) -> None:
        self.node(node_id).resume()
        self.expected_down.discard(node_id)

    def restart(self, node_id: int) -> None:
        node = self.node(node_id)
        if node.alive():
            node.stop()
        node.start()
        self.expected_down.discard(node_id)

    # ---------------------------------------------------------------- state

    def state(self, timeout: float = 5.0) -> dict[str, Any]:
        return cluster_state(self.bootstrap_of(), timeout)

    def wait_ready(self, timeout: float = 90.0, brokers: list[int] | None = None) -> dict[str, Any]:
        """The quorum has a leader and the given (default: all running) brokers are unfenced."""
        want = set(brokers if brokers is not None else
                   [n.node_id for n in self.local.brokers if n.node_id not in self.expected_down])

        def ready() -> dict[str, Any] | None:
            state = self.state()
            unfenced = {b["id"] for b in state["brokers"] if not b["fenced"]}
            quorum = state["quorum"]
            if "leader_id" not in quorum or quorum["leader_id"] < 0:
                return None
            return state if want <= unfenced else None

        return wait_until(ready, f"brokers {sorted(want)} unfenced with a quorum leader",
                          timeout, self)  # type: ignore[no-any-return]

    def quorum_leader(self) -> int:
        return int(self.state()["quorum"]["leader_id"])

    def partitions(self, topic: str) -> dict[int, dict[str, Any]]:
        """partition -> {leader, leader_epoch, replicas, isr} from a broker's Metadata."""
        response = call(self.bootstrap_of(), 3, 12, {
            "topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False}, 5.0)
        out = {}
        for t in response.topics:
            if int(t.error_code) != 0:
                raise RuntimeError(f"{topic}: error {int(t.error_code)}")
            for p in t.partitions:
                out[int(p.partition_index)] = {
                    "leader": int(p.leader_id), "leader_epoch": int(p.leader_epoch),
                    "replicas": [int(r) for r in p.replica_nodes],
                    "isr": [int(r) for r in p.isr_nodes], "error": int(p.error_code)}
        return out

    def wait_isr(self, topic: str, size: int, timeout: float = 60.0) -> dict[int, dict[str, Any]]:
        def full() -> dict[int, dict[str, Any]] | None:
            parts = self.partitions(topic)
            ok = parts and all(len(p["isr"]) >= size and p["leader"] >= 0 for p in parts.values())
            return parts if ok else None

        return wait_until(full, f"every partition of {topic} with an ISR of {size}", timeout,
                          self)  # type: ignore[no-any-return]


@contextlib.contextmanager
def running_cluster(root: Path, nodes: int = 3, *, controllers: int | None = None,
                    settings: dict[str, str] | None = None,
                    racks: list[str] | None = None) -> Iterator[Cluster]:
    local = LocalCluster.plan(root, nodes, controllers=controllers,
                              settings={**FAST, **(settings or {})}, racks=racks)
    cluster = Cluster(local)
    local.start()
    try:
        cluster.wait_ready()
        yield cluster
    finally:
        local.stop(timeout=60)
        local.kill_all()
