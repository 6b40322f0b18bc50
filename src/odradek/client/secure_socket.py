"""TLS and SASL for odradek's native client connection (the fetcher's path), over the same
client side the node's own connections use (network.client_security).

From librdkafka's setting names (what the Spark source and the CLI hand over):
security.protocol SSL / SASL_PLAINTEXT / SASL_SSL, ssl.ca.location, ssl.certificate.location,
ssl.key.location, ssl.key.password, ssl.endpoint.identification.algorithm (https or none),
sasl.mechanism PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 with sasl.username/sasl.password.

Any other ssl.* or sasl.* setting (OAUTHBEARER, GSSAPI, a PKCS12 key store, ...) is not
handled here: `ClientSecurity.from_settings` returns None for them and the caller uses
confluent-kafka instead, so no setting is ever dropped on the floor.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Mapping
from typing import Any

from odradek.network.client_security import (
    CLIENT_MECHANISMS,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    AuthenticationFailed,
)
from odradek.network.client_security import ClientSecurity as _Security

__all__ = ["NOT_HANDLED", "AuthenticationFailed", "ClientSecurity"]

_HANDLED = {"security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username",
            "sasl.password", "ssl.ca.location", "ssl.certificate.location",
            "ssl.key.location", "ssl.key.password", "ssl.endpoint.identification.algorithm"}
NOT_HANDLED = object()


class ClientSecurity(_Security):
    """network's ClientSecurity (the one the node's own connections use), read from
    librdkafka's setting names and driven over a blocking socket."""

    def __repr__(self) -> str:  # the password stays out of logs and tracebacks
        return f"ClientSecurity({self.protocol}, {self.mechanism}, user={self.username!r})"

    @classmethod
    def from_settings(cls, client: Mapping[str, Any]) -> ClientSecurity | object | None:
        """None: plaintext; NOT_HANDLED: settings this client cannot honour."""
        proto = str(client.get("security.protocol", "plaintext")).strip().upper()
        if proto == "PLAINTEXT" and not any(k.startswith(("sasl.", "ssl.")) for k in client):
            return None
        if proto not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            return NOT_HANDLED
        if any(k.startswith(("sasl.", "ssl.")) and k not in _HANDLED for k in client):
            return NOT_HANDLED
        ctx = None
        if proto in ("SSL", "SASL_SSL"):
            ctx = ssl.create_default_context(cafile=client.get("ssl.ca.location") or None)
            if str(client.get("ssl.endpoint.identification.algorithm", "https")).lower() in (
                    "none", ""):
                ctx.check_hostname = False
            cert = client.get("ssl.certificate.location")
            if cert:
                ctx.load_cert_chain(str(cert), client.get("ssl.key.location") or None,
                                    client.get("ssl.key.password") or None)
        mechanism = None
        if proto.startswith("SASL"):
            mechanism = str(client.get("sasl.mechanism", client.get("sasl.mechanisms",
                                                                    "GSSAPI"))).upper()
            if mechanism not in CLIENT_MECHANISMS:
                return NOT_HANDLED
        return cls(proto, ctx, mechanism, str(client.get("sasl.username", "")),
                   str(client.get("sasl.password", "")))

    def wrap(self, sock: socket.socket, host: str) -> socket.socket:
        if self.ssl_context is None:
            return sock
        return self.ssl_context.wrap_socket(sock, server_hostname=host)

    def authenticate(self, conn: Any) -> None:
        """SaslHandshake v1 then SaslAuthenticate v2 exchanges over `conn` (a Connection)."""
        if not self.sasl:
            return
        from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
        from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

        from odradek.protocol.messages import decode_response, encode_request

        def call(api: int, version: int, req: Any) -> Any:
            corr = conn.send(api, version, encode_request(req))
            header_len = 4 if api == SASL_HANDSHAKE else 5  # v2 is flexible: a tag byte
            return decode_response(api, version, conn.receive(corr), header_len)

        shake = call(SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism=self.mechanism))
        if int(shake.error_code):
            raise AuthenticationFailed(f"SASL mechanism {self.mechanism} refused "
                                       f"(enabled: {', '.join(shake.mechanisms)})")
        steps = self.sasl_exchange()
        token = next(steps)
        while True:
            answer = call(SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=token))
            if int(answer.error_code):
                raise AuthenticationFailed(answer.error_message or "authentication failed")
            try:
                token = steps.send(bytes(answer.auth_bytes))
            except StopIteration:
                return
