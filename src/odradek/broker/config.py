"""The node's start checks on its configuration, and its listeners.

`check_config` is everything the node checks before it touches the data directory: every
key's type and range (the config table), the listeners and their security protocols, the
log levels and the event loop. A node that would have to refuse later never writes first.
Where the values come from (Kafka defaults < --config file < --set) is `server_properties`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from odradek.broker.inter_node_security import (
    PROTOCOL_IDS,
    InterNodeSecurityError,
    node_client_security,
)
from odradek.broker.listener_security import (
    PLAINTEXT_LISTENER,
    ListenerSecurity,
    image_credentials,
    listener_security,
)
from odradek.metadata.config.broker_configs import BrokerConfig
from odradek.metadata.config.log_config import log_config
from odradek.network.client_security import ClientSecurity

# Kafka's SecurityProtocol names, all served (issue 16); a listener whose ssl.* or sasl.*
# settings cannot be honoured refuses the start (check_listener_security)
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SERVED_PROTOCOLS = frozenset(SECURITY_PROTOCOLS)
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
        for name in controller_listener_names(config):
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


def listener_protocol(config: BrokerConfig, name: str) -> str:
    return security_protocol_map(config).get(name.upper(), "PLAINTEXT")


def check_listener_security(config: BrokerConfig) -> None:
    """Build each secured listener's TLS context and SASL settings once: a key store that
    does not load, an unknown mechanism, a bad mapping rule refuse the start here."""
    if has_quorum(config):
        # the node's own clients (Raft, registration, forwarding, follower fetches) must be
        # able to reach the controller and inter-broker listeners as they are secured
        inter_node_securities(config)
    for lst in listeners_of(config):
        proto = listener_protocol(config, lst.name)
        if proto == "PLAINTEXT":
            continue
        try:
            listener_security(config, lst.name, proto)
        except ValueError as exc:
            raise ConfigError(f"listener {lst.name} ({proto}): {exc}") from None


@dataclass(frozen=True, slots=True)
class InterNodeSecurities:
    """How this node reaches its peers: their controller listener, and (a broker) their
    inter-broker listener. None: PLAINTEXT."""

    controller: ClientSecurity | None
    inter_broker: ClientSecurity | None


def inter_node_securities(config: BrokerConfig) -> InterNodeSecurities:
    own = {lst.name for lst in listeners_of(config)}
    try:
        name = controller_listener_names(config)[0]
        controller = node_client_security(config, name, listener_protocol(config, name),
                                          controller=True, served_here=name in own)
        inter = None
        if "broker" in roles_of(config):
            name = inter_broker_listener_name(config)
            inter = node_client_security(config, name, listener_protocol(config, name),
                                         controller=False, served_here=name in own)
    except InterNodeSecurityError as exc:
        raise ConfigError(str(exc)) from None
    return InterNodeSecurities(controller, inter)


def listener_security_protocol_id(config: BrokerConfig, name: str) -> int:
    """The SecurityProtocol id a broker registration carries for its listener."""
    return PROTOCOL_IDS[listener_protocol(config, name)]


def listener_securities(config: BrokerConfig,
                        image_of: Callable[[], Any]) -> dict[str, ListenerSecurity]:
    """Every listener name -> its security (PLAINTEXT ones share PLAINTEXT_LISTENER's
    behaviour but carry their name)."""
    credentials = image_credentials(image_of)
    out = {}
    for lst in listeners_of(config):
        proto = listener_protocol(config, lst.name)
        if proto == "PLAINTEXT" and lst.name == "PLAINTEXT":
            out[lst.name] = PLAINTEXT_LISTENER
        else:
            out[lst.name] = listener_security(config, lst.name, proto, credentials)
    return out


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
    check_kraft(config)  # roles and the quorum first: they decide what the listeners must be
    listeners_of(config)
    check_listener_security(config)
    advertised_of(config)
    event_loop_of(config)
    try:
        # the defaults every log is opened with: a bad log.* value fails here, not mid-start
        log_config({}, config)
    except Exception as exc:
        raise ConfigError(str(exc)) from exc
    if config.node_id < 0:
        raise ConfigError(f"node.id must be 0 or more, got {config.node_id}")


# --- KRaft: roles, the quorum, the controller and inter-broker listeners -------------------


@dataclass(frozen=True, slots=True)
class Voter:
    """One entry of controller.quorum.voters: a controller's id and its CONTROLLER listener."""

    node_id: int
    host: str
    port: int


def parse_voters(items: list[str], key: str = "controller.quorum.voters") -> dict[int, Voter]:
    """`id@host:port,...` (Kafka's QuorumConfig.parseVoterConnections)."""
    voters: dict[int, Voter] = {}
    for raw in items:
        raw = raw.strip()
        if not raw:
            continue
        id_s, at, address = raw.partition("@")
        if address.startswith("["):
            host, _, port_s = address[1:].partition("]:")
        else:
            host, _, port_s = address.rpartition(":")
        try:
            node_id, port = int(id_s), int(port_s)
        except ValueError:
            node_id = port = -1
        if not at or not host or node_id < 0 or not 0 < port <= 65535:
            raise ConfigError(f"Invalid value {','.join(items)} for configuration {key}: "
                              f"{raw!r} is not id@host:port")
        if node_id in voters:
            raise ConfigError(f"Invalid value {','.join(items)} for configuration {key}: "
                              f"node id {node_id} appears twice")
        voters[node_id] = Voter(node_id, host, port)
    return voters


def parse_bootstrap_servers(items: list[str]) -> list[tuple[str, int]]:
    """controller.quorum.bootstrap.servers: host:port,... (KIP-853)."""
    out = []
    for raw in items:
        host, _, port_s = raw.strip().rpartition(":")
        try:
            port = int(port_s)
        except ValueError:
            port = -1
        if not host or not 0 < port <= 65535:
            raise ConfigError(f"Invalid value {','.join(items)} for configuration "
                              f"controller.quorum.bootstrap.servers: {raw!r} is not host:port")
        out.append((host.strip("[]"), port))
    return out


def voters_of(config: BrokerConfig) -> dict[int, Voter]:
    return parse_voters(config.get_list("controller.quorum.voters"))


def has_quorum(config: BrokerConfig) -> bool:
    """A quorum is configured: the node is part of a cluster (else a one-voter node of its own,
    formatted at its first start)."""
    return bool(config.get_list("controller.quorum.voters")
                or config.get_list("controller.quorum.bootstrap.servers"))


def roles_of(config: BrokerConfig) -> frozenset[str]:
    return frozenset(r.strip().lower() for r in config.get_list("process.roles"))


def controller_listener_names(config: BrokerConfig) -> list[str]:
    """controller.listener.names; CONTROLLER when a quorum is configured and it is unset."""
    names = [n.upper() for n in config.get_list("controller.listener.names")]
    if not names and has_quorum(config):
        names = ["CONTROLLER"]
    return names


def controller_listeners(config: BrokerConfig) -> list[Listener]:
    """This node's controller listeners (empty for a single node without a quorum)."""
    if not has_quorum(config):
        return []
    names = controller_listener_names(config)
    return [lst for lst in listeners_of(config) if lst.name in names]


def broker_listeners(config: BrokerConfig) -> list[Listener]:
    """The listeners clients and other brokers use (everything but the controller's)."""
    names = set(controller_listener_names(config)) if has_quorum(config) else set()
    return [lst for lst in listeners_of(config) if lst.name not in names]


def inter_broker_listener_name(config: BrokerConfig) -> str:
    """inter.broker.listener.name, or the listener named after security.inter.broker.protocol
    (Kafka's rules, one of the two); neither set: PLAINTEXT when there is such a listener
    (that key's default), else the first broker listener."""
    explicit = config.get_str("inter.broker.listener.name")
    if explicit:
        if config.is_set("security.inter.broker.protocol"):
            raise ConfigError("Only one of inter.broker.listener.name and "
                              "security.inter.broker.protocol should be set.")
        name = explicit.strip().upper()
        if name not in security_protocol_map(config):
            raise ConfigError(f"Listener with name {name} defined in "
                              "inter.broker.listener.name not found in "
                              "listener.security.protocol.map.")
        return name
    if config.is_set("security.inter.broker.protocol"):
        proto = (config.get_str("security.inter.broker.protocol") or "").strip().upper()
        if proto not in SECURITY_PROTOCOLS:
            raise ConfigError(f"Invalid value {proto} for configuration "
                              "security.inter.broker.protocol: one of "
                              f"{', '.join(SECURITY_PROTOCOLS)}")
        return proto
    names = [lst.name for lst in broker_listeners(config)]
    if not names or "PLAINTEXT" in names:
        return "PLAINTEXT"
    return names[0]


def check_kraft(config: BrokerConfig) -> None:
    """Kafka's KRaft rules (KafkaConfig.validateValues), each refusal one line naming the keys."""
    roles = roles_of(config)
    if not roles:
        raise ConfigError("process.roles must be broker, controller or broker,controller")
    voters = voters_of(config)
    parse_bootstrap_servers(config.get_list("controller.quorum.bootstrap.servers"))
    if not has_quorum(config):
        if roles != {"broker", "controller"}:
            raise ConfigError(
                f"process.roles={','.join(sorted(roles))} needs a quorum: set "
                "controller.quorum.voters (id@host:port of each controller); without one a "
                "node is both broker and controller of its own one-node cluster")
        return
    if not config.is_set("node.id") and not config.is_set("broker.id"):
        raise ConfigError("Missing required configuration node.id which has no default value "
                          "(a node in a quorum needs its own id)")
    node_id = config.node_id
    names = controller_listener_names(config)
    listener_names = [lst.name for lst in listeners_of(config)]
    voter_list = ",".join(config.get_list("controller.quorum.voters"))
    if "controller" in roles:
        if voters and node_id not in voters:
            raise ConfigError(f"process.roles contains controller, so node.id {node_id} must be "
                              f"in the set of voters controller.quorum.voters={voter_list}")
        if not any(n in listener_names for n in names):
            raise ConfigError(f"controller.listener.names ({','.join(names)}) must contain at "
                              f"least one value appearing in listeners "
                              f"({','.join(listener_names)}) when running the controller role")
    if roles == {"controller"}:
        extra = [n for n in listener_names if n not in names]
        if extra:
            raise ConfigError(f"listeners must only contain controller listeners from "
                              f"controller.listener.names ({','.join(names)}) when "
                              f"process.roles=controller; {','.join(extra)} is not one")
        return
    # the broker role
    if roles == {"broker"}:
        if node_id in voters:
            raise ConfigError(f"process.roles=broker, so node.id {node_id} must not be in the "
                              f"set of voters controller.quorum.voters={voter_list}")
        clash = [n for n in names if n in listener_names]
        if clash:
            raise ConfigError(f"controller.listener.names must not contain a value appearing in "
                              f"listeners when process.roles=broker ({','.join(clash)})")
    inter = inter_broker_listener_name(config)
    if inter in names:
        raise ConfigError(f"inter.broker.listener.name {inter} must not be a controller listener "
                          f"(controller.listener.names={','.join(names)})")
    advertised = [lst.name for lst in advertised_of(config)]
    if inter not in advertised:
        raise ConfigError(f"inter.broker.listener.name {inter} must be a listener name defined "
                          f"in advertised.listeners ({','.join(advertised)})")
