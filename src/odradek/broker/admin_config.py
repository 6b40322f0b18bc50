"""`admin.listeners`: where the admin HTTP (metrics, health, JSON views) listens.

`http://host:port[,http://host:port]`; empty: no admin HTTP. Only plain HTTP is served, so
an `https://` (or any other scheme) is refused at start with a message instead of being
served as HTTP. Listener names are ADMIN (the bind errors name them so).
"""

from __future__ import annotations

from odradek.broker.config import ConfigError, Listener, parse_listeners
from odradek.metadata.config.broker_configs import BrokerConfig

KEY = "admin.listeners"


def admin_listeners_of(config: BrokerConfig) -> list[Listener]:
    """The checked admin listeners; [] when admin.listeners is empty."""
    spec = (config.get_str(KEY) or "").strip()
    if not spec:
        return []
    out: list[Listener] = []
    for lst in parse_listeners(spec, KEY):
        if lst.name != "HTTP":
            raise ConfigError(
                f"{KEY}: {lst.name.lower()}://{lst.host}:{lst.port} cannot be served: the "
                "admin listener speaks plain HTTP only (http://host:port; TLS is not served)")
        out.append(Listener("ADMIN", lst.host, lst.port))
    ports = [lst.port for lst in out if lst.port != 0]
    if len(ports) != len(set(ports)):
        raise ConfigError(f"{KEY}: each admin listener must have a different port")
    return out


def check_admin_config(config: BrokerConfig, broker_ports: set[int]) -> None:
    """Refuse admin listeners that collide with the Kafka listeners' ports."""
    for lst in admin_listeners_of(config):
        if lst.port != 0 and lst.port in broker_ports:
            raise ConfigError(f"{KEY}: port {lst.port} is also a Kafka listener's port "
                              "(listeners)")
