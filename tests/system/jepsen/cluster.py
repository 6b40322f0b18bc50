"""Three real `odradek serve` nodes, each in its own network namespace (netns.Net).

RF=3, min.insync.replicas=2, unclean leader election off (and the internal topics the same).
Each node listens on its namespace's address: PLAINTEXT on 9092 and CONTROLLER on 9093. With
a proxy (proxy.py) clients are sent through it: the node advertises the proxy's address for
PLAINTEXT and keeps a REPLICATION listener on 9094 for the other brokers, so the proxy sits
between clients and nodes and never in the replication path (partitions do that part).

Optional per node: a tmpfs of `tmpfs_mb` as the data directory (the disk-full family fills
it), extra environment (LD_PRELOAD libfaketime for clock skew). `JepsenCluster.close()` stops
everything and removes the namespaces; netns.py's atexit/signal cleanup backs it up.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from odradek.broker.local_cluster import LocalCluster, LocalNode, NodeSpec
from odradek.metadata.meta_properties import random_kafka_uuid, uuid_to_base64
from tests.system.cluster_support import FAST, Cluster
from tests.system.jepsen.heal import HealFailed, heal_nodes
from tests.system.jepsen.netns import Net

__all__ = ["SETTINGS", "JepsenCluster", "NsNode", "jepsen_cluster"]

CLIENT_PORT = 9092
CONTROLLER_PORT = 9093
REPLICATION_PORT = 9094

SETTINGS = {
    **FAST,
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "unclean.leader.election.enable": "false",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "auto.create.topics.enable": "false",
}


class NsNode(LocalNode):
    """A LocalNode run inside namespace `index` of `net`, listening on its address."""

    def __init__(self, cluster: LocalCluster, spec: NodeSpec, net: Net) -> None:
        super().__init__(cluster, spec)
        self.net = net
        self.advertised: str | None = None  # host:port of the proxy in front, if any
        self.env: dict[str, str] = {}

    @property
    def addr(self) -> str:
        return self.net.addr(self.node_id)

    @property
    def bootstrap(self) -> str:
        """The node's own client listener (admin calls and waits go here, not via a proxy)."""
        return f"{self.addr}:{CLIENT_PORT}"

    @property
    def client_bootstrap(self) -> str:
        return self.advertised or self.bootstrap

    def properties(self) -> dict[str, str]:
        props = super().properties()
        listeners = [f"PLAINTEXT://{self.addr}:{CLIENT_PORT}",
                     f"CONTROLLER://{self.addr}:{CONTROLLER_PORT}"]
        if self.advertised:
            listeners.append(f"REPLICATION://{self.addr}:{REPLICATION_PORT}")
            props["advertised.listeners"] = (f"PLAINTEXT://{self.advertised},"
                                             f"REPLICATION://{self.addr}:{REPLICATION_PORT}")
            props["inter.broker.listener.name"] = "REPLICATION"
            props["listener.security.protocol.map"] = (
                "PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT,CONTROLLER:PLAINTEXT")
        props["listeners"] = ",".join(listeners)
        return props

    def command(self) -> list[str]:
        return [*self.net.exec_prefix(self.node_id), *super().command()]

    def start(self) -> LocalNode:
        if self.alive():
            return self
        self.write_config()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env},
                start_new_session=True)
        self.paused = False
        return self


class NsLocalCluster(LocalCluster):
    def __init__(self, root: Path, net: Net, settings: dict[str, str]) -> None:
        specs = [NodeSpec(i, ["broker", "controller"], CLIENT_PORT, CONTROLLER_PORT)
                 for i in range(1, net.size + 1)]
        super().__init__(root, uuid_to_base64(random_kafka_uuid()), specs, settings)
        self.net = net
        self.nodes = {s.node_id: NsNode(self, s, net) for s in specs}

    @property
    def voters(self) -> str:
        return ",".join(f"{i}@{self.net.addr(i)}:{CONTROLLER_PORT}" for i in self.nodes)


class JepsenCluster(Cluster):
    """cluster_support.Cluster's waits over the namespaced nodes, plus the Net for faults."""

    def __init__(self, root: Path, size: int = 3, settings: dict[str, str] | None = None,
                 tmpfs_mb: int | None = None) -> None:
        self.net = Net(size)
        self.root = root
        try:
            local = NsLocalCluster(root, self.net, {**SETTINGS, **(settings or {})})
            super().__init__(local)
            self.tmpfs_mb = tmpfs_mb
            if tmpfs_mb:
                for node in local.nodes.values():
                    self.net.mount_tmpfs(node.data_dir, tmpfs_mb)
        except BaseException:
            self.net.close()
            raise

    def ns_node(self, node_id: int) -> NsNode:
        node = self.node(node_id)
        assert isinstance(node, NsNode)
        return node

    @property
    def client_bootstrap(self) -> str:
        return ",".join(self.ns_node(i).client_bootstrap for i in sorted(self.nodes))

    def set_proxy(self, addresses: dict[int, str]) -> None:
        """Advertise `addresses[node_id]` (the proxy's) to clients; before `start()`."""
        for node_id, address in addresses.items():
            self.ns_node(node_id).advertised = address

    def start(self, timeout: float = 120.0) -> JepsenCluster:
        self.local.start()
        self.wait_ready(timeout)
        return self

    def heal_processes(self) -> None:
        """Every node running again: stopped ones resumed, dead ones started."""
        for node in self.nodes.values():
            if node.paused:
                self.resume(node.node_id)
            if not node.alive():
                self.restart(node.node_id)
            self.expected_down.discard(node.node_id)

    def heal(self, timeout: float = 180.0) -> dict[str, Any]:
        """The end of a run: every node running and unfenced with a quorum leader, where any
        node may still go down on its own meanwhile (heal.py, finding 10): it is started
        again until the deadline. Raises heal.HealFailed then, after writing every live
        node's thread stacks to `stacks-at-heal-failure.txt` (finding 13: a node that never
        finishes stopping says in its log only which step it began)."""
        self.expected_down.clear()
        want = set(self.nodes)

        def ready() -> dict[str, Any] | None:
            state = self.state()
            unfenced = {b["id"] for b in state["brokers"] if not b["fenced"]}
            if state["quorum"].get("leader_id", -1) < 0 or not want <= unfenced:
                return None
            return state

        try:
            done = heal_nodes(list(self.nodes.values()), ready, timeout)
        except HealFailed:
            self.dump_stacks(self.root / "stacks-at-heal-failure.txt")
            raise
        return {"started": done["started"], "exits": done["exits"]}

    def dump_stacks(self, path: Path) -> None:
        """Every live node's Python thread stacks (py-spy, a pinned dependency, beside this
        interpreter) appended to `path`. Asyncio tasks waiting on each other do not show,
        threads (log closing, checkpoints, fsyncs) do. Never raises: it only adds evidence."""
        spy = Path(sys.executable).parent / "py-spy"
        with path.open("a", encoding="utf-8") as out:
            for node in self.nodes.values():
                proc = node.proc
                if proc is None or proc.poll() is not None:
                    continue
                out.write(f"== node {node.node_id} (pid {proc.pid})\n")
                try:
                    done = subprocess.run([str(spy), "dump", "--pid", str(proc.pid)],
                                          capture_output=True, text=True, timeout=60)
                    out.write(done.stdout + done.stderr + "\n")
                except (OSError, subprocess.SubprocessError) as exc:
                    out.write(f"py-spy failed: {exc!r}\n")

    def create_topic(self, name: str, partitions: int, timeout: float = 60.0,
                     config: dict[str, str] | None = None) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        futures = admin.create_topics([NewTopic(name, partitions, 3, config=config or {})],
                                      request_timeout=timeout)
        futures[name].result(timeout)
        self.wait_isr(name, 3, timeout)

    def node_dirs(self) -> dict[int, Path]:
        return {i: n.data_dir for i, n in self.nodes.items()}

    def close(self) -> None:
        for node in self.nodes.values():
            if node.paused:
                with contextlib.suppress(Exception):
                    node.resume()
        with contextlib.suppress(Exception):
            self.local.stop(timeout=30)
        self.local.kill_all()
        self.net.close()

    def describe(self) -> dict[str, Any]:
        return {"subnet": self.net.subnet, "nodes": {i: self.ns_node(i).addr
                                                     for i in self.nodes}}


@contextlib.contextmanager
def jepsen_cluster(root: Path, size: int = 3, settings: dict[str, str] | None = None,
                   tmpfs_mb: int | None = None, proxy: Any = None,
                   env: dict[int, dict[str, str]] | None = None) -> Iterator[JepsenCluster]:
    """A started cluster (with `proxy`, a proxy.Proxy, in front of the clients if given)."""
    cluster = JepsenCluster(root, size, settings, tmpfs_mb)
    try:
        if proxy is not None:
            cluster.set_proxy(proxy.listen({i: f"{cluster.ns_node(i).addr}:{CLIENT_PORT}"
                                            for i in cluster.nodes}, cluster.net.gateway))
        for node_id, extra in (env or {}).items():
            cluster.ns_node(node_id).env.update(extra)
        cluster.start()
        yield cluster
    finally:
        cluster.close()
