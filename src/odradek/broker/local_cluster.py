"""A cluster of real `odradek serve` processes on loopback, in one directory.

`odradek cluster up` and the system tests (tests/system/cluster_support.py) both use it. The
layout of DIR: `cluster.json` (cluster id, the nodes, their roles and ports), and per node
`node-<id>/` (its data directory, formatted with `odradek storage format`),
`node-<id>.properties` (its server.properties) and `node-<id>.log` (its output). A second
`up` on the same DIR starts the same cluster again, on the same ports.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from odradek.metadata.bootstrap import format_data_dir
from odradek.metadata.meta_properties import random_kafka_uuid, uuid_to_base64

__all__ = ["LocalCluster", "LocalNode", "NodeSpec", "free_port"]

ODRADEK = [sys.executable, "-m", "odradek.cli.main"]
STATE_FILE = "cluster.json"
HOST = "127.0.0.1"


# Listening ports are drawn from below the kernel's ephemeral range: a port the kernel picked
# for bind(0) is one it may hand to any outgoing connection next (a client of another node took
# a node's port between the pick and the node's bind, in CI). Above this floor, under the range.
LISTEN_PORT_FLOOR = 10_000
_pick = random.Random()  # its own: a seeded module `random` must not make two processes agree


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((HOST, port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A port nobody listens on now, outside the ephemeral range so no outgoing connection
    takes it before the node binds it; the kernel's pick if that range leaves no room."""
    low = _ephemeral_low()
    if low - LISTEN_PORT_FLOOR >= 1000:
        for _ in range(1000):
            port = _pick.randrange(LISTEN_PORT_FLOOR, low)
            if _bindable(port):
                return port
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


@dataclass
class NodeSpec:
    node_id: int
    roles: list[str]  # "broker", "controller"
    port: int | None  # the PLAINTEXT (client) listener: brokers only
    controller_port: int | None  # the CONTROLLER listener: controllers only
    rack: str | None = None
    settings: dict[str, str] = field(default_factory=dict)
    # the admin HTTP (admin.listeners); None: none (its default port would be shared)
    admin_port: int | None = None


class LocalNode:
    def __init__(self, cluster: LocalCluster, spec: NodeSpec) -> None:
        self.cluster = cluster
        self.spec = spec
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False

    @property
    def node_id(self) -> int:
        return self.spec.node_id

    @property
    def is_broker(self) -> bool:
        return "broker" in self.spec.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.spec.roles

    @property
    def data_dir(self) -> Path:
        return self.cluster.root / f"node-{self.node_id}"

    @property
    def config_path(self) -> Path:
        return self.cluster.root / f"node-{self.node_id}.properties"

    @property
    def log_path(self) -> Path:
        return self.cluster.root / f"node-{self.node_id}.log"

    @property
    def admin_url(self) -> str | None:
        port = self.spec.admin_port
        return None if port is None else f"http://{HOST}:{port}"

    @property
    def bootstrap(self) -> str:
        assert self.spec.port is not None, f"node {self.node_id} is not a broker"
        return f"{HOST}:{self.spec.port}"

    def properties(self) -> dict[str, str]:
        spec = self.spec
        listeners = []
        if spec.port is not None:
            listeners.append(f"PLAINTEXT://{HOST}:{spec.port}")
        if spec.controller_port is not None:
            listeners.append(f"CONTROLLER://{HOST}:{spec.controller_port}")
        props = {
            "node.id": str(spec.node_id),
            "process.roles": ",".join(spec.roles),
            "listeners": ",".join(listeners),
            "controller.listener.names": "CONTROLLER",
            "controller.quorum.voters": self.cluster.voters,
            # several nodes on one machine: the default registry port would be taken twice
            "schema.registry.listeners": "",
            "console.listeners": "",
        }
        if spec.rack:
            props["broker.rack"] = spec.rack
        props["admin.listeners"] = (f"http://{HOST}:{spec.admin_port}"
                                    if spec.admin_port is not None else "")
        props.update(self.cluster.settings)
        props.update(spec.settings)
        return props

    def write_config(self) -> None:
        text = "".join(f"{k}={v}\n" for k, v in self.properties().items())
        self.config_path.write_text(text)

    def command(self) -> list[str]:
        return [*ODRADEK, "serve", "--data-dir", str(self.data_dir),
                "--config", str(self.config_path)]

    def start(self) -> LocalNode:
        """Start the process (not waiting for anything: see the callers' waits)."""
        if self.alive():
            return self
        self.write_config()
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child process
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"},
                                     start_new_session=True)
        log.close()
        self.paused = False
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def signal(self, sig: int) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(sig)

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM (a broker moves its leaderships away first) and wait."""
        if self.proc is None:
            return None
        if self.paused:
            self.resume()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise
        return self.proc.returncode

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.paused = False

    def pause(self) -> None:
        """SIGSTOP: the process is frozen, its sockets stay open (an isolated node)."""
        self.signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        self.signal(signal.SIGCONT)
        self.paused = False

    def log(self, tail: int = 20000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-tail:]
        except OSError:
            return ""


class LocalCluster:
    def __init__(self, root: Path, cluster_id: str, specs: list[NodeSpec],
                 settings: dict[str, str] | None = None) -> None:
        self.root = Path(root)
        self.cluster_id = cluster_id
        self.settings = dict(settings or {})
        self.nodes = {s.node_id: LocalNode(self, s) for s in specs}

    # ---------------------------------------------------------------- layout

    @classmethod
    def plan(cls, root: Path, nodes: int = 3, *, controllers: int | None = None,
             settings: dict[str, str] | None = None,
             racks: list[str] | None = None) -> LocalCluster:
        """`nodes` combined nodes (broker and controller), or with `controllers`, that many
        controller-only nodes (ids 1..) and `nodes` broker-only nodes after them."""
        specs: list[NodeSpec] = []
        if controllers is None:
            for i in range(1, nodes + 1):
                specs.append(NodeSpec(i, ["broker", "controller"], free_port(), free_port()))
        else:
            for i in range(1, controllers + 1):
                specs.append(NodeSpec(i, ["controller"], None, free_port()))
            for i in range(controllers + 1, controllers + nodes + 1):
                specs.append(NodeSpec(i, ["broker"], free_port(), None))
        for spec in specs:
            spec.admin_port = free_port()
        if racks:
            for n, spec in enumerate(s for s in specs if "broker" in s.roles):
                spec.rack = racks[n % len(racks)]
        return cls(root, uuid_to_base64(random_kafka_uuid()), specs, settings)

    @classmethod
    def load(cls, root: Path) -> LocalCluster | None:
        path = Path(root) / STATE_FILE
        if not path.exists():
            return None
        state = json.loads(path.read_text())
        return cls(root, state["cluster_id"], [NodeSpec(**n) for n in state["nodes"]],
                   state.get("settings"))

    def save(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        state = {"cluster_id": self.cluster_id, "settings": self.settings,
                 "nodes": [asdict(n.spec) for n in self.nodes.values()]}
        (self.root / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n")

    def format(self) -> None:
        """Format every node's directory not formatted yet (kafka-storage.sh format)."""
        self.save()
        for node in self.nodes.values():
            format_data_dir(node.data_dir, self.cluster_id, node.node_id, ignore_formatted=True)

    @property
    def voters(self) -> str:
        return ",".join(f"{n.node_id}@{HOST}:{n.spec.controller_port}"
                        for n in self.nodes.values() if n.is_controller)

    @property
    def brokers(self) -> list[LocalNode]:
        return [n for n in self.nodes.values() if n.is_broker]

    @property
    def controllers(self) -> list[LocalNode]:
        return [n for n in self.nodes.values() if n.is_controller]

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.brokers)

    def bootstrap_without(self, *node_ids: int) -> str:
        return ",".join(n.bootstrap for n in self.brokers if n.node_id not in node_ids)

    # ---------------------------------------------------------------- processes

    def start(self) -> LocalCluster:
        self.format()
        for node in self.controllers:  # the quorum first, then brokers that register with it
            node.start()
        for node in self.brokers:
            node.start()
        return self

    def stop(self, timeout: float = 60.0) -> dict[int, int | None]:
        """SIGTERM brokers first (they move leadership while the controllers are up), then
        controllers; wait for each."""
        codes: dict[int, int | None] = {}
        order = ([n for n in self.brokers if not n.is_controller]
                 + [n for n in self.nodes.values() if n.is_controller])
        for node in order:
            if node.paused:
                node.resume()
            node.signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for node in order:
            if node.proc is None:
                continue
            try:
                node.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                node.kill9()
            codes[node.node_id] = node.returncode
        return codes

    def kill_all(self) -> None:
        for node in self.nodes.values():
            with contextlib.suppress(Exception):
                node.kill9()

    def dead(self) -> list[LocalNode]:
        """Nodes started and since exited."""
        return [n for n in self.nodes.values() if n.proc is not None and not n.alive()]
