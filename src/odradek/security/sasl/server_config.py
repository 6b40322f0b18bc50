"""A SASL listener's settings: the mechanisms it serves (sasl.enabled.mechanisms, per
listener as `listener.name.<name>.sasl.enabled.mechanisms`), connections.max.reauth.ms, and
where credentials come from (the metadata image's SCRAM credentials)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from odradek.security.sasl.jaas import listener_jaas
from odradek.security.sasl.mechanism import SaslMechanism
from odradek.security.sasl.plain import PlainServer
from odradek.security.sasl.scram import MECHANISMS, ScramCredential, ScramServer
from odradek.security.tls import listener_value

__all__ = ["SERVED_MECHANISMS", "Credentials", "SaslServerConfig", "sasl_server_config"]

# (username, mechanism name) -> the credential, as of the latest metadata image
Credentials = Callable[[str, str], ScramCredential | None]
SERVED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


def _no_credentials(user: str, mechanism: str) -> ScramCredential | None:
    return None


@dataclass(slots=True)
class SaslServerConfig:
    mechanisms: list[str]
    reauth_ms: int = 0
    credentials: Credentials = _no_credentials
    oauth: Any = None  # security.sasl.oauthbearer.TokenValidator when OAUTHBEARER is on
    plain_users: dict[str, str] = field(default_factory=dict, repr=False)  # JAAS user_<name>
    extra: dict[str, Any] = field(default_factory=dict)

    def new_mechanism(self, name: str) -> SaslMechanism:
        if name in MECHANISMS:
            return ScramServer(name, lambda user: self.credentials(user, name))
        if name == "PLAIN":
            def all_of(user: str) -> list[tuple[str, ScramCredential]]:
                found = [(m, self.credentials(user, m)) for m in MECHANISMS]
                return [(m, c) for m, c in found if c is not None]
            return PlainServer(all_of, self.plain_users)
        if name == "OAUTHBEARER":
            from odradek.security.sasl.oauthbearer import OAuthBearerServer

            return OAuthBearerServer(self.oauth)
        raise ValueError(name)


def sasl_server_config(config: Any, listener: str,
                       credentials: Credentials | None = None) -> SaslServerConfig:
    raw = listener_value(config, listener, "sasl.enabled.mechanisms")
    names = ([m.strip().upper() for m in raw] if isinstance(raw, list)
             else [m.strip().upper() for m in str(raw or "").split(",") if m.strip()])
    if not names:
        raise ValueError(f"listener {listener}: sasl.enabled.mechanisms is empty")
    unserved = [m for m in names if m not in SERVED_MECHANISMS]
    if unserved:
        raise ValueError(
            f"listener {listener}: sasl.enabled.mechanisms={','.join(names)}: "
            f"{', '.join(unserved)} cannot be served by odradek (it serves "
            f"{', '.join(SERVED_MECHANISMS)}); Kafka's default is GSSAPI, so a SASL listener "
            "needs sasl.enabled.mechanisms set")
    reauth = int(listener_value(config, listener, "connections.max.reauth.ms") or 0)
    oauth = None
    if "OAUTHBEARER" in names:
        from odradek.security.sasl.oauthbearer import validator_from_config

        oauth = validator_from_config(config, listener)
    plain_users: dict[str, str] = {}
    if "PLAIN" in names:
        entry = listener_jaas(config, listener, "PLAIN")
        plain_users = entry.plain_users() if entry is not None else {}
    return SaslServerConfig(names, reauth, credentials or _no_credentials, oauth,
                            plain_users=plain_users)
