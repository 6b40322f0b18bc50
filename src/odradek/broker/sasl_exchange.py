"""One connection's SASL state on a SASL listener: SaslHandshake, then SaslAuthenticate
(or, after a v0 handshake, raw tokens framed by a length as Kafka's v0 does) until the
mechanism has a principal; later a handshake again re-authenticates (KIP-368).

Before authentication only ApiVersions, SaslHandshake and SaslAuthenticate are answered:
anything else closes the connection (logged), as Kafka's SaslServerAuthenticator does. A
failed authentication is answered (SASL_AUTHENTICATION_FAILED with the reason) and then
the connection is closed. A session past its lifetime (connections.max.reauth.ms, or a
token's expiry) is closed at its next request other than a re-authentication.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from odradek.broker.handlers.common import decode, respond
from odradek.broker.transport_signals import Disconnect
from odradek.protocol.apis import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.security.principal import KafkaPrincipal
from odradek.security.sasl.mechanism import SaslFailure, SaslMechanism
from odradek.security.sasl.server_config import SaslServerConfig

__all__ = ["ALLOWED_BEFORE_AUTH", "CloseAfter", "SaslExchange"]

log = logging.getLogger(__name__)

ALLOWED_BEFORE_AUTH = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE,
                                 ApiKey.SASL_AUTHENTICATE})
SASL_APIS = frozenset({ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})

# states
_HANDSHAKE, _AUTHENTICATE, _RAW, _DONE = "handshake", "authenticate", "raw", "done"


class CloseAfter(Exception):
    """Answer with `response`, then close the connection (a failed authentication)."""

    def __init__(self, response: Any, reason: str) -> None:
        super().__init__(reason)
        self.response = response


class SaslExchange:
    def __init__(self, config: SaslServerConfig, session: Any, peer: str) -> None:
        self.config = config
        self.session = session
        self.peer = peer
        self.state = _HANDSHAKE
        self.mechanism: SaslMechanism | None = None
        self.mechanism_name: str | None = None
        self.expires_at: float | None = None  # monotonic deadline of the session, or None
        self.reauthenticating = False

    @property
    def raw(self) -> bool:
        """After a v0 handshake the client sends bare tokens, not requests."""
        return self.state == _RAW

    def expired(self) -> bool:
        return self.expires_at is not None and time.monotonic() >= self.expires_at

    # --- requests -------------------------------------------------------------------

    def handle(self, header: Any, frame: memoryview) -> Any:
        """A request on a SASL listener that the exchange decides: SASL APIs always, and
        any API before authentication or after the session expired. Returns the response
        (a dispatch result) or None to let the dispatcher answer (ApiVersions)."""
        key = header.api_key
        if key == ApiKey.SASL_HANDSHAKE:
            return self._handshake(header, frame)
        if key == ApiKey.SASL_AUTHENTICATE:
            return self._authenticate(header, frame)
        if key == ApiKey.API_VERSIONS:
            return None
        if not self.session.authenticated:
            log.warning("closing connection from %s: api key %d before SASL authentication "
                        "(only ApiVersions, SaslHandshake and SaslAuthenticate are allowed)",
                        self.peer, key)
            raise Disconnect("")
        log.info("closing connection from %s: its SASL session expired "
                 "(connections.max.reauth.ms) and it did not re-authenticate", self.peer)
        raise Disconnect("")

    def _handshake(self, header: Any, frame: memoryview) -> Any:
        request = decode(header, frame)
        enabled = self.config.mechanisms
        if self.state not in (_HANDSHAKE, _DONE):
            raise CloseAfter(respond(header, {"error_code": ErrorCode.illegal_sasl_state,
                                              "mechanisms": enabled}),
                             "SaslHandshake out of order")
        wanted = request.mechanism
        if wanted not in enabled:
            raise CloseAfter(respond(header, {"error_code": ErrorCode.unsupported_sasl_mechanism,
                                              "mechanisms": enabled}),
                             f"unsupported SASL mechanism {wanted!r}")
        if self.state == _DONE:
            # KIP-368: a re-authentication keeps its mechanism and principal
            if header.api_version < 1 or wanted != self.mechanism_name:
                raise CloseAfter(respond(header, {"error_code": ErrorCode.illegal_sasl_state,
                                                  "mechanisms": enabled}),
                                 "re-authentication must use SaslHandshake v1 and the same "
                                 "mechanism")
            self.reauthenticating = True
        self.mechanism = self.config.new_mechanism(wanted)
        self.mechanism_name = wanted
        self.state = _AUTHENTICATE if header.api_version >= 1 else _RAW
        return respond(header, {"error_code": ErrorCode.none, "mechanisms": enabled})

    def _authenticate(self, header: Any, frame: memoryview) -> Any:
        request = decode(header, frame)
        if self.state != _AUTHENTICATE or self.mechanism is None:
            raise CloseAfter(respond(header, {
                "error_code": ErrorCode.illegal_sasl_state,
                "error_message": "SaslAuthenticate before a SaslHandshake v1",
                "auth_bytes": b""}), "SaslAuthenticate out of order")
        try:
            answer = self.mechanism.step(bytes(request.auth_bytes))
        except SaslFailure as exc:
            raise CloseAfter(respond(header, {
                "error_code": ErrorCode.sasl_authentication_failed,
                "error_message": str(exc), "auth_bytes": b""}),
                f"SASL authentication failed ({self.mechanism_name}): {exc}") from None
        values: dict[str, Any] = {"error_code": ErrorCode.none, "error_message": None,
                                  "auth_bytes": answer}
        if self.mechanism.complete:
            failure = self._complete()
            if failure:
                raise CloseAfter(respond(header, {
                    "error_code": ErrorCode.sasl_authentication_failed,
                    "error_message": failure, "auth_bytes": b""}), failure)
            if header.api_version >= 1:
                values["session_lifetime_ms"] = self._lifetime_ms()
        return respond(header, values)

    def raw_token(self, token: bytes) -> bytes:
        """A v0 token: the answer, or SaslFailure (the connection is then closed)."""
        assert self.mechanism is not None
        answer = self.mechanism.step(token)
        if self.mechanism.complete:
            failure = self._complete()
            if failure:
                raise SaslFailure(failure)
        return answer

    # --- the outcome ----------------------------------------------------------------

    def _complete(self) -> str | None:
        """Install the principal; an error message when it may not be (re-authentication
        as someone else)."""
        assert self.mechanism is not None
        principal = KafkaPrincipal("User", self.mechanism.username or "")
        if self.reauthenticating and principal != self.session.principal:
            return (f"Cannot change principals during re-authentication from "
                    f"{self.session.principal}: {principal}")
        self.session.principal = principal
        self.session.authenticated = True
        self.state = _DONE
        self.reauthenticating = False
        lifetime = self._lifetime_ms()
        self.expires_at = time.monotonic() + lifetime / 1000 if lifetime else None
        log.debug("%s authenticated as %s with %s", self.peer, principal, self.mechanism_name)
        return None

    def _lifetime_ms(self) -> int:
        """KIP-368: the smaller of connections.max.reauth.ms and the credential's own
        expiry (a token's exp); 0 when neither limits the session."""
        limits = []
        if self.config.reauth_ms > 0:
            limits.append(self.config.reauth_ms)
        mech = self.mechanism
        if mech is not None and mech.expires_at is not None:
            limits.append(max(0, int((mech.expires_at - time.time()) * 1000)))
        return min(limits) if limits else 0
