"""What each listener's security protocol needs at the socket: its TLS context, the mapper
of client-certificate DNs to principals, and its SASL settings.

Built once at start (and first at config check, so a listener that cannot be served with
its ssl.* or sasl.* settings refuses the start before the data directory is touched).
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from odradek.security.principal_rules import PrincipalMapper
from odradek.security.sasl.scram import ScramCredential, mechanism_type
from odradek.security.sasl.server_config import (
    Credentials,
    SaslServerConfig,
    sasl_server_config,
)
from odradek.security.tls import TlsConfigError, listener_value, server_context

__all__ = ["PLAINTEXT_LISTENER", "ListenerSecurity", "image_credentials", "listener_securities",
           "listener_security"]


@dataclass(slots=True)
class ListenerSecurity:
    name: str = "PLAINTEXT"
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    mapper: PrincipalMapper = field(default_factory=PrincipalMapper)
    sasl: SaslServerConfig | None = None  # SASL_PLAINTEXT and SASL_SSL


PLAINTEXT_LISTENER = ListenerSecurity()


def listener_security(config: Any, name: str, protocol: str,
                      credentials: Any = None) -> ListenerSecurity:
    """Raises ValueError (TlsConfigError, or a SASL setting's error) naming the key."""
    ctx = server_context(config, name) if protocol in ("SSL", "SASL_SSL") else None
    rules = listener_value(config, name, "ssl.principal.mapping.rules") or "DEFAULT"
    try:
        mapper = PrincipalMapper(str(rules))
    except ValueError as exc:
        raise TlsConfigError(str(exc)) from None
    sasl = (sasl_server_config(config, name, credentials)
            if protocol in ("SASL_PLAINTEXT", "SASL_SSL") else None)
    return ListenerSecurity(name, protocol, ctx, mapper, sasl)


def image_credentials(image_of: Callable[[], Any]) -> Credentials:
    """SCRAM credentials as of the node's current metadata image (they replicate with it)."""

    def lookup(user: str, mechanism: str) -> ScramCredential | None:
        record = image_of().scram_credentials.get((user, mechanism_type(mechanism)))
        if record is None:
            return None
        return ScramCredential(record.salt, record.stored_key, record.server_key,
                               record.iterations)

    return lookup


def listener_securities(config: Any, image_of: Callable[[], Any]) -> dict[str, ListenerSecurity]:
    """Every listener name -> its security (PLAINTEXT ones share PLAINTEXT_LISTENER's
    behaviour but carry their name)."""
    from odradek.broker.config import listener_protocol, listeners_of

    credentials = image_credentials(image_of)
    out = {}
    for lst in listeners_of(config):
        proto = listener_protocol(config, lst.name)
        if proto == "PLAINTEXT" and lst.name == "PLAINTEXT":
            out[lst.name] = PLAINTEXT_LISTENER
        else:
            out[lst.name] = listener_security(config, lst.name, proto, credentials)
    return out
