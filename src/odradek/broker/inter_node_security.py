"""The client side of the node's own connections: how it reaches its peers' inter-broker
and controller listeners (issue 16).

Kafka's keys: the inter-broker listener (`inter.broker.listener.name`, or the one named
after `security.inter.broker.protocol`) with `sasl.mechanism.inter.broker.protocol`; the
first of `controller.listener.names` with `sasl.mechanism.controller.protocol`. The TLS side
is that listener's ssl.* settings (client.auth's key store is this node's certificate, the
trust store checks the peer's), the SASL side the username and password of the listener's
`listener.name.<listener>.<mechanism>.sasl.jaas.config` entry. Every node-to-node channel
(Raft, registration and heartbeats, forwarding, replica fetchers, transaction markers) is
built with the `ClientSecurity` made here, so a listener the node cannot reach as configured
refuses the start instead of leaving the cluster unable to talk to itself.
"""

from __future__ import annotations

from typing import Any

from odradek.network.client_security import CLIENT_MECHANISMS, ClientSecurity
from odradek.security.sasl.jaas import jaas_key, listener_jaas
from odradek.security.tls import client_context, listener_value

__all__ = ["InterNodeSecurityError", "node_client_security"]

# SecurityProtocol ids, as a broker registration's listeners carry them
PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


class InterNodeSecurityError(ValueError):
    """A setting of the node's own client side that cannot work (the message names it)."""


def _enabled(config: Any, listener: str) -> list[str]:
    raw = listener_value(config, listener, "sasl.enabled.mechanisms")
    items = raw if isinstance(raw, list) else str(raw or "").split(",")
    return [m.strip().upper() for m in items if m.strip()]


def node_client_security(config: Any, listener: str, protocol: str, *, controller: bool,
                         served_here: bool) -> ClientSecurity | None:
    """How this node connects to `listener` (of `protocol`) on its peers: None for PLAINTEXT.
    `controller`: the controller listener (sasl.mechanism.controller.protocol), else the
    inter-broker one. `served_here`: this node has that listener too, so the mechanism must
    be one it enables there (its peers are configured alike)."""
    if protocol == "PLAINTEXT":
        return None
    try:
        ctx = client_context(config, listener) if protocol in ("SSL", "SASL_SSL") else None
    except ValueError as exc:
        raise InterNodeSecurityError(f"listener {listener} ({protocol}), as this node's "
                                     f"client: {exc}") from None
    if protocol == "SSL":
        return ClientSecurity(protocol, ctx)
    key = ("sasl.mechanism.controller.protocol" if controller
           else "sasl.mechanism.inter.broker.protocol")
    mechanism = str(config.get(key) or "GSSAPI").strip().upper()
    purpose = "the controller" if controller else "inter-broker communication"
    if served_here and mechanism not in _enabled(config, listener):
        raise InterNodeSecurityError(
            f"{key} must be included in sasl.enabled.mechanisms when SASL is used for "
            f"{purpose} ({mechanism} is not enabled on listener {listener}: "
            f"{','.join(_enabled(config, listener)) or 'none'})")
    if mechanism not in CLIENT_MECHANISMS:
        raise InterNodeSecurityError(
            f"{key}={mechanism}: odradek's nodes authenticate to each other with "
            f"{', '.join(CLIENT_MECHANISMS)} only")
    if controller and mechanism.startswith("SCRAM-"):
        # SCRAM credentials are records of the metadata log; the controllers must agree on
        # that log (Vote, Fetch) before any of them could check one: nothing would start
        raise InterNodeSecurityError(
            f"{key}={mechanism}: the controller listener cannot authenticate nodes with "
            "SCRAM, whose credentials live in the metadata log the controllers must first "
            f"agree on; use PLAIN with user_<name> entries in {jaas_key(listener, 'PLAIN')}")
    try:
        entry = listener_jaas(config, listener, mechanism)
    except ValueError as exc:
        raise InterNodeSecurityError(str(exc)) from None
    if entry is None:
        raise InterNodeSecurityError(
            f"{jaas_key(listener, mechanism)} is not set: this node authenticates to the "
            f"{listener} listener of its peers ({purpose}) with the username and password "
            "of that entry")
    user, password = entry.options.get("username"), entry.options.get("password")
    if not user or password is None:
        raise InterNodeSecurityError(
            f"{jaas_key(listener, mechanism)}: the {entry.module} entry needs username and "
            "password options (this node's own credentials towards its peers)")
    return ClientSecurity(protocol, ctx, mechanism, user, password)
