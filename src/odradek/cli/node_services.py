"""The services `odradek serve` runs beside its node: the Schema Registry
(`schema.registry.listeners`, default http://127.0.0.1:8081), as Redpanda builds its own in,
and the web console (`console.listeners`, default http://127.0.0.1:8080).

Each runs as a child process (`odradek registry serve`, `odradek console`) over the node's own
client listener, like any client of the cluster: the broker package never imports them
(DESIGN.md's layering), and a service that fails cannot take the node down. Their ports are
bound here, before the node starts, and handed to the child, so a port in use refuses the
start as a Kafka listener's would. A child is restarted if it dies while the node serves,
and dies with the node (PR_SET_PDEATHSIG), so a kill -9 of the node leaves nothing behind.
On a node whose listeners need TLS or SASL they log in with the settings of
cli/service_clients.py (schema.registry.kafkastore.*, console.kafka.*).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

from odradek.broker.node import NodeService
from odradek.broker.startup import StartRefused
from odradek.cli.service_clients import (
    CONSOLE_PREFIX,
    REGISTRY_PREFIX,
    ServiceClient,
    service_client,
)
from odradek.metadata.config.broker_configs import BrokerConfig

log = logging.getLogger("odradek.node")

CONFIG = "schema.registry.listeners"
CONSOLE_CONFIG = "console.listeners"
# the console's lag history, a file in the node's data dir (the log manager skips files)
CONSOLE_HISTORY = "console-lag-history.sqlite3"
RESTART_BACKOFF_S = (1.0, 2.0, 5.0, 10.0, 30.0)
STOP_TIMEOUT_S = 10.0
_PR_SET_PDEATHSIG = 1


def service_listeners(config: BrokerConfig, key: str, what: str) -> list[str]:
    """The listeners `key` gives a service child of the node (empty: the service is off);
    StartRefused when it is set on a node without the broker role."""
    listeners = [item.strip() for item in config.get_list(key) if item.strip()]
    if not listeners:
        return []
    roles = config.get_list("process.roles")
    if "broker" not in roles:
        if config.is_set(key):
            raise StartRefused(f"{key} is set, but the {what} runs only on a node with the "
                               f"broker role (process.roles={','.join(roles)})")
        return []  # a controller-only node: the default service goes with the brokers
    return listeners


def node_services(config: BrokerConfig, log_file: Path | None) -> list[NodeService]:
    services: list[NodeService] = []
    try:
        registry = service_listeners(config, CONFIG, "registry")
        if registry:
            client = service_client(config, REGISTRY_PREFIX, "the Schema Registry", CONFIG)
            services.append(RegistryService(registry, log_file, client))
        console = service_listeners(config, CONSOLE_CONFIG, "console")
        if console:
            client = service_client(config, CONSOLE_PREFIX, "the console", CONSOLE_CONFIG)
            services.append(ConsoleService(console, log_file, client, registry[:1],
                                           [a.strip() for a in (config.get_str("admin.listeners")
                                                                 or "").split(",") if a.strip()][:1]))
    except StartRefused:
        for service in services:
            service.stop()
        raise
    return services


def _bind(listener: str, key: str = CONFIG, what: str = "the Schema Registry") -> socket.socket:
    from odradek.registry.server import parse_listener

    try:
        host, port = parse_listener(listener)
    except ValueError as exc:
        raise StartRefused(f"{key}: {exc}") from None
    try:
        infos = socket.getaddrinfo(host, port, socket.AF_UNSPEC, socket.SOCK_STREAM, 0,
                                   socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise StartRefused(f"{key}: host {host!r} not resolved ({exc.strerror})") from None
    family, kind, proto, _, addr = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise StartRefused(f"cannot serve {what} on {listener} ({key}): "
                           f"{exc.strerror or exc}; set {key}= (empty) to run without "
                           "it") from None
    return sock


def _die_with_parent() -> None:
    # runs in the child between fork and exec
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class RegistryService:
    KEY = CONFIG
    WHAT = "the Schema Registry"

    def __init__(self, listeners: list[str], log_file: Path | None,
                 client: ServiceClient | None = None) -> None:
        self.listeners = listeners
        self.log_file = log_file
        self.client = client or ServiceClient("PLAINTEXT")
        self.sockets: list[socket.socket] = []
        try:
            for listener in listeners:
                self.sockets.append(_bind(listener, self.KEY, self.WHAT))
        except StartRefused:
            self._close_sockets()
            raise
        self.child: subprocess.Popen[bytes] | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._watcher: threading.Thread | None = None
        self._bootstrap = ""

    def start(self, node: Any) -> None:
        listeners = node.advertised_broker_listeners()
        broker = next((lst for lst in listeners if lst.name == self.client.listener), listeners[0])
        host = broker.host if broker.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
        self._bootstrap = f"[{host}]:{broker.port}" if ":" in host else f"{host}:{broker.port}"
        self._node_started(node)
        self._spawn()
        self._watcher = threading.Thread(target=self._watch, name=f"{self.KEY}-watch",
                                         daemon=True)
        self._watcher.start()

    def _node_started(self, node: Any) -> None:
        """What the child's command needs from the running node (nothing here)."""

    def _command(self, fds: list[int]) -> list[str]:
        return [sys.executable, "-m", "odradek.cli.main", "registry", "serve",
                "-b", self._bootstrap, "--listeners", ",".join(self.listeners),
                "--inherit-fds", ",".join(str(fd) for fd in fds)]

    def _spawn(self) -> None:
        fds = [sock.fileno() for sock in self.sockets]
        cmd = self._command(fds)
        settings = self.client.open_pipe()
        if settings is not None:
            cmd += ["--command-config", f"/dev/fd/{settings}"]
        out: IO[bytes] | None = None
        if self.log_file is not None:
            out = open(self.log_file, "ab")  # noqa: SIM115 - the child's for its lifetime
        try:
            with self._lock:
                if self._stopping.is_set():
                    return
                self.child = subprocess.Popen(
                    cmd, pass_fds=fds + ([] if settings is None else [settings]),
                    stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                    preexec_fn=_die_with_parent)
        finally:
            if out is not None:
                out.close()
            if settings is not None:
                os.close(settings)
        log.info("%s on %s (pid %d) over %s", self.WHAT, ",".join(self.listeners),
                 self.child.pid, self._bootstrap)

    def _watch(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            child = self.child
            if child is None:
                return
            code = child.wait()
            if self._stopping.is_set():
                return
            delay = RESTART_BACKOFF_S[min(failures, len(RESTART_BACKOFF_S) - 1)]
            failures += 1
            log.error("%s (pid %d) exited with %s; restarting in %.0f s",
                      self.WHAT, child.pid, code, delay)
            if self._stopping.wait(delay):
                return
            self._spawn()

    def stop(self) -> None:
        with self._lock:
            self._stopping.set()
            child = self.child
        if child is not None and child.poll() is None:
            child.terminate()
            try:
                child.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop in %.0f s; killing it", self.WHAT,
                            STOP_TIMEOUT_S)
                child.kill()
                child.wait()
        self._close_sockets()

    def _close_sockets(self) -> None:
        for sock in self.sockets:
            sock.close()
        self.sockets = []


class ConsoleService(RegistryService):
    """The web console (`odradek console`) over the node's client listener, asking the node's
    own registry and admin HTTP; its lag history is a file in the node's data dir."""

    KEY = CONSOLE_CONFIG
    WHAT = "the console"

    def __init__(self, listeners: list[str], log_file: Path | None, client: ServiceClient,
                 registry: list[str], admin: list[str]) -> None:
        super().__init__(listeners, log_file, client)
        self.registry = registry
        self.admin = admin
        self._history = ""

    def _node_started(self, node: Any) -> None:
        self._history = str(Path(node.data_dir) / CONSOLE_HISTORY)

    def _command(self, fds: list[int]) -> list[str]:
        cmd = [sys.executable, "-m", "odradek.cli.main", "console", "-b", self._bootstrap,
               "--listeners", ",".join(self.listeners), "--history", self._history,
               "--inherit-fds", ",".join(str(fd) for fd in fds)]
        if self.registry:
            cmd += ["--registry", self.registry[0]]
        if self.admin:
            cmd += ["--admin", self.admin[0]]
        return cmd
