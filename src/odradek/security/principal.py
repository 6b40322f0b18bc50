"""Who is asking: the principal a connection authenticated as, and the session a request runs in.

Kafka names principals `Type:name` (KafkaPrincipal): `User:alice` after SASL, `User:CN=...`
from a TLS certificate's DN as `ssl.principal.mapping.rules` maps it, and `User:ANONYMOUS` on
a PLAINTEXT listener. ACLs, super.users and quotas are written against these strings, so the
parsing and printing here are Kafka's.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ANONYMOUS", "KafkaPrincipal", "Session"]


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """`User:alice` -> KafkaPrincipal("User", "alice"); the name may itself hold colons
        (a DN, `User:CN=a,O=b`), the type may not, as Kafka's SecurityUtils.parseKafkaPrincipal."""
        kind, sep, name = text.partition(":")
        if not sep or not kind or not name:
            raise ValueError(f"{text!r} is not a principal of the form Type:name")
        return cls(kind, name)


ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")


@dataclass(slots=True)
class Session:
    """One connection's identity, as Kafka's RequestContext carries it to the authorizer and
    quotas: set when the connection is made, its principal replaced once SASL (or the TLS
    handshake) has authenticated it."""

    principal: KafkaPrincipal = ANONYMOUS
    client_address: str = ""  # the peer's IP, for ACL host matching
    listener_name: str = ""
    security_protocol: str = "PLAINTEXT"
    authenticated: bool = True  # False on a SASL listener until SaslAuthenticate succeeds
