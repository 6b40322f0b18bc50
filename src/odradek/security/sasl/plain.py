"""PLAIN (RFC 4616), server side: `[authzid] NUL authcid NUL password`, checked against the
user's stored SCRAM credential (the password is run through the credential's salt and
iterations and compared with its StoredKey), so one `odradek user create` serves both; and,
as Kafka's PlainServerCallbackHandler, against the `user_<name>` entries of the listener's
PlainLoginModule JAAS config (security.sasl.jaas), which a user there is checked against
only."""

from __future__ import annotations

import hmac
from collections.abc import Callable

from odradek.security.sasl.mechanism import SaslFailure
from odradek.security.sasl.scram import ScramCredential, salted_keys

__all__ = ["PlainServer", "parse_plain"]

_FAILED = "Authentication failed: Invalid username or password"


def parse_plain(token: bytes) -> tuple[str, str, str]:
    """(authzid, username, password); SaslFailure when malformed."""
    parts = token.split(b"\x00")
    if len(parts) != 3:
        raise SaslFailure("Invalid SASL/PLAIN response: expected 3 tokens")
    try:
        authzid, username, password = (p.decode("utf-8") for p in parts)
    except UnicodeDecodeError:
        raise SaslFailure("Invalid SASL/PLAIN response: not UTF-8") from None
    if not username:
        raise SaslFailure("Authentication failed: username not specified")
    if not password:
        raise SaslFailure("Authentication failed: password not specified")
    return authzid, username, password


class PlainServer:
    """`credentials(username) -> [(mechanism, ScramCredential)]`: any one that the password
    matches authenticates."""

    name = "PLAIN"

    def __init__(self,
                 credentials: Callable[[str], list[tuple[str, ScramCredential]]],
                 jaas_users: dict[str, str] | None = None) -> None:
        self._credentials = credentials
        self._jaas_users = jaas_users or {}
        self.complete = False
        self.username: str | None = None
        self.expires_at: float | None = None

    def step(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslFailure("Unexpected SASL/PLAIN message after authentication")
        authzid, username, password = parse_plain(token)
        if authzid and authzid != username:
            raise SaslFailure("Authentication failed: Client requested an authorization id "
                              "that is different from username")
        expected = self._jaas_users.get(username)
        if expected is not None:
            if hmac.compare_digest(expected.encode(), password.encode()):
                self.complete = True
                self.username = username
                return b""
            raise SaslFailure(_FAILED)
        for mechanism, cred in self._credentials(username):
            stored, _ = salted_keys(mechanism, password, cred.salt, cred.iterations)
            if hmac.compare_digest(stored, cred.stored_key):
                self.complete = True
                self.username = username
                return b""
        raise SaslFailure(_FAILED)
