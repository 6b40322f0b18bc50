"""The node's start checks on its configuration, and its listeners.

`check_config` is everything the node checks before it touches the data directory: every
key's type and range (the config table), the listeners and their security protocols, the
log levels and the event loop. A node that would have to refuse later never writes first.
Where the values come from (Kafka defaults < --config file < --set) is `server_properties`.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.metadata.config.broker_configs import BrokerConfig
from odradek.metadata.config.log_config import log_config

# Kafka's SecurityProtocol names; only PLAINTEXT is served by this node so far
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SERVED_PROTOCOLS = frozenset({"PLAINTEXT"})
EVENT_LOOPS = ("auto", "asyncio", "uvloop")


class ConfigError(ValueError):
    """A config the node cannot start with (the message names the key)."""


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    host: str
    port: int


def parse_listeners(spec: str, key: str = "listeners") -> list[Listener]:
    """`PLAINTEXT://host:port,NAME://[::1]:port` -> listeners (empty host = all interfaces)."""
    result: list[Listener] = []
    for raw in spec.split(","):
        raw = raw.strip()
        if not raw:
            continue
        name, sep, rest = raw.partition("://")
        if not sep or not name:
            raise ConfigError(f"{key}: {raw!r} is not NAME://host:port")
        if rest.startswith("["):
            host, _, port_s = rest[1:].partition("]:")
        else:
            host, _, port_s = rest.rpartition(":")
        try:
            port = int(port_s)
        except ValueError as exc:
            raise ConfigError(f"{key}: {raw!r} has no valid port") from exc
        if not 0 <= port <= 65535:
            raise ConfigError(f"{key}: {raw!r} port out of range")
        result.append(Listener(name.upper(), host, port))
    if not result:
        raise ConfigError(f"no {key} configured")
    return result


def security_protocol_map(config: BrokerConfig) -> dict[str, str]:
    """listener.security.protocol.map: listener name -> security protocol, checked as Kafka does."""
    raw = config.get_str("listener.security.protocol.map") or ""
    mapping: dict[str, str] = {}
    for item in raw.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, proto = item.partition(":")
        name, proto = name.strip().upper(), proto.strip().upper()
        if not sep or not name or not proto:
            raise ConfigError(f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL")
        if proto not in SECURITY_PROTOCOLS:
            raise ConfigError(f"listener.security.protocol.map: {proto} (for listener {name}) "
                              f"is not a Kafka security protocol "
                              f"(one of {', '.join(SECURITY_PROTOCOLS)})")
        mapping[name] = proto
    if not config.is_set("listener.security.protocol.map"):
        # as Kafka's KRaft nodes: with the default map, controller listeners are PLAINTEXT
        for name in config.get_list("controller.listener.names"):
            mapping.setdefault(name.upper(), "PLAINTEXT")
    return mapping


def _check_protocols(listeners: list[Listener], mapping: dict[str, str], key: str) -> None:
    for lst in listeners:
        proto = mapping.get(lst.name)
        where = f"{key}: {lst.name}://{lst.host}:{lst.port}"
        if proto is None:
            raise ConfigError(
                f"{where}: {lst.name} is not a Kafka security protocol "
                f"({', '.join(SECURITY_PROTOCOLS)}) nor a listener name mapped to one in "
                "listener.security.protocol.map")
        if proto not in SERVED_PROTOCOLS:
            via = "" if proto == lst.name else f" (listener {lst.name} maps to {proto})"
            raise ConfigError(
                f"{where}: security protocol {proto}{via} is not implemented by odradek yet; "
                "only PLAINTEXT listeners can be served (the node never serves another "
                "protocol as plaintext)")


def listeners_of(config: BrokerConfig) -> list[Listener]:
    """The checked `listeners`: known, served security protocols, distinct names and ports."""
    listeners = parse_listeners(",".join(config.listeners))
    _check_protocols(listeners, security_protocol_map(config), "listeners")
    names, ports = set(), set()
    for lst in listeners:
        if lst.name in names:
            raise ConfigError(f"listeners: each listener must have a different name "
                              f"({lst.name} appears twice)")
        if lst.port in ports and lst.port != 0:
            raise ConfigError(f"listeners: each listener must have a different port "
                              f"({lst.port} appears twice)")
        names.add(lst.name)
        ports.add(lst.port)
    return listeners


def advertised_of(config: BrokerConfig) -> list[Listener]:
    """The checked `advertised.listeners` (default: listeners): a subset of the listener names."""
    if not config.is_set("advertised.listeners") or not config.get_list("advertised.listeners"):
        return listeners_of(config)
    advertised = parse_listeners(",".join(config.advertised_listeners), "advertised.listeners")
    _check_protocols(advertised, security_protocol_map(config), "advertised.listeners")
    names = {lst.name for lst in listeners_of(config)}
    for lst in advertised:
        if lst.name not in names:
            raise ConfigError(f"advertised.listeners: listener name {lst.name} is not one of "
                              f"the names in listeners ({', '.join(sorted(names))})")
    return advertised


def event_loop_of(config: BrokerConfig) -> str:
    """odradek.event.loop: 'asyncio' or 'uvloop' ('auto' is the stock asyncio loop for now)."""
    choice = (config.values.get("odradek.event.loop") or "auto").strip().lower()
    if choice not in EVENT_LOOPS:
        raise ConfigError(f"odradek.event.loop must be one of {', '.join(EVENT_LOOPS)}, "
                          f"got {choice!r}")
    if choice == "uvloop":
        try:
            import uvloop  # noqa: F401
        except ImportError as exc:
            raise ConfigError("odradek.event.loop=uvloop but uvloop is not installed") from exc
    return "asyncio" if choice == "auto" else choice


def check_config(config: BrokerConfig) -> None:
    """Everything that can be refused in the config, checked before the data dir is touched."""
    listeners_of(config)
    advertised_of(config)
    event_loop_of(config)
    try:
        # the defaults every log is opened with: a bad log.* value fails here, not mid-start
        log_config({}, config)
    except Exception as exc:
        raise ConfigError(str(exc)) from exc
    if config.node_id < 0:
        raise ConfigError(f"node.id must be 0 or more, got {config.node_id}")
