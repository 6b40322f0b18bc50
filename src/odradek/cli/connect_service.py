"""`connect.listeners` on `odradek serve`: a Kafka Connect worker beside the node (off by
default), run as the registry and the console are (node_services): its ports bound before
the node starts (a port in use refuses the start in one line), a child process
`odradek connect serve` over the node's own client listener, restarted if it dies, gone with
the node. Its worker settings come from `connect.config.file` (a
connect-distributed.properties), its Spark master from `connect.spark.master`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from odradek.broker.node import NodeService
from odradek.broker.startup import StartRefused
from odradek.cli.node_services import RegistryService, node_services, service_listeners
from odradek.metadata.config.broker_configs import BrokerConfig

CONNECT_CONFIG = "connect.listeners"


class ConnectService(RegistryService):
    KEY = CONNECT_CONFIG
    WHAT = "the Connect worker"

    def __init__(self, listeners: list[str], log_file: Path | None, properties: str,
                 master: str) -> None:
        super().__init__(listeners, log_file)
        self.properties = properties
        self.master = master

    def _command(self, fds: list[int]) -> list[str]:
        cmd = [sys.executable, "-m", "odradek.cli.main", "connect", "serve",
               "-b", self._bootstrap, "--listeners", ",".join(self.listeners),
               "--master", self.master, "--inherit-fds", ",".join(str(fd) for fd in fds)]
        if self.properties:
            cmd += ["--config", self.properties]
        return cmd


def serve_services(config: BrokerConfig, log_file: Path | None) -> list[NodeService]:
    """`odradek serve`'s child services: node_services' (registry, console), then the
    Connect worker when connect.listeners asks for one."""
    services = node_services(config, log_file)
    try:
        connect = connect_service(config, log_file)
    except StartRefused:
        for service in services:
            service.stop()
        raise
    return [*services, connect] if connect is not None else services


def connect_service(config: BrokerConfig, log_file: Path | None) -> ConnectService | None:
    """The worker `connect.listeners` asks for (None when empty); its properties file is
    read and checked here, so a bad one refuses the node's start rather than failing the
    child over and over."""
    listeners = service_listeners(config, CONNECT_CONFIG, "Connect worker")
    if not listeners:
        return None
    from odradek.connect.server import read_properties, worker_config

    properties = (config.get_str("connect.config.file") or "").strip()
    if properties:
        try:
            worker_config(read_properties(Path(properties)))
        except (OSError, ValueError) as exc:
            raise StartRefused(f"connect.config.file {properties}: "
                               f"{getattr(exc, 'strerror', None) or exc}") from None
    master = (config.get_str("connect.spark.master") or "").strip() or "local[2]"
    return ConnectService(listeners, log_file, properties, master)
