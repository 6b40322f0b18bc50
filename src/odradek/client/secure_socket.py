"""TLS and SASL for odradek's native client connection (the fetcher's path).

From librdkafka's setting names (what the Spark source and the CLI hand over):
security.protocol SSL / SASL_PLAINTEXT / SASL_SSL, ssl.ca.location, ssl.certificate.location,
ssl.key.location, ssl.key.password, ssl.endpoint.identification.algorithm (https or none),
sasl.mechanism PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 with sasl.username/sasl.password.

Any other ssl.* or sasl.* setting (OAUTHBEARER, GSSAPI, a PKCS12 key store, ...) is not
handled here: `ClientSecurity.from_settings` returns None for them and the caller uses
confluent-kafka instead, so no setting is ever dropped on the floor.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["NOT_HANDLED", "ClientSecurity"]

_HANDLED = {"security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username",
            "sasl.password", "ssl.ca.location", "ssl.certificate.location",
            "ssl.key.location", "ssl.key.password", "ssl.endpoint.identification.algorithm"}
_MECHANISMS = {"PLAIN": None, "SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
NOT_HANDLED = object()
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36


class AuthenticationFailed(Exception):
    """The broker refused the credentials (SASL_AUTHENTICATION_FAILED and the like). Not an
    OSError on purpose: callers retry those (a leader moving), and retrying a wrong
    password only delays the answer."""


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str
    ssl_context: ssl.SSLContext | None
    mechanism: str | None
    username: str
    password: str

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
            if mechanism not in _MECHANISMS:
                return NOT_HANDLED
        return cls(proto, ctx, mechanism, str(client.get("sasl.username", "")),
                   str(client.get("sasl.password", "")))

    def wrap(self, sock: socket.socket, host: str) -> socket.socket:
        if self.ssl_context is None:
            return sock
        return self.ssl_context.wrap_socket(sock, server_hostname=host)

    def authenticate(self, conn: Any) -> None:
        """SaslHandshake v1 then SaslAuthenticate v2 exchanges over `conn` (a Connection)."""
        if self.mechanism is None:
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

        def step(token: bytes) -> bytes:
            answer = call(SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=token))
            if int(answer.error_code):
                raise AuthenticationFailed(answer.error_message or "authentication failed")
            return bytes(answer.auth_bytes)

        algo = _MECHANISMS[self.mechanism]
        if algo is None:
            step(f"\0{self.username}\0{self.password}".encode())
            return
        name = self.username.replace("=", "=3D").replace(",", "=2C")
        nonce = base64.b64encode(os.urandom(24)).decode()
        bare = f"n={name},r={nonce}"
        first = step(f"n,,{bare}".encode()).decode()
        attrs = dict(a.split("=", 1) for a in first.split(","))
        if not attrs.get("r", "").startswith(nonce):
            raise AuthenticationFailed("SCRAM: the server's nonce does not extend ours")
        salted = hashlib.pbkdf2_hmac(algo, self.password.encode(),
                                     base64.b64decode(attrs["s"]), int(attrs["i"]))
        client_key = hmac.digest(salted, b"Client Key", algo)
        without = f"c=biws,r={attrs['r']}"
        auth = f"{bare},{first},{without}".encode()
        signature = hmac.digest(hashlib.new(algo, client_key).digest(), auth, algo)
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature,
                                                             strict=True))).decode()
        final = step(f"{without},p={proof}".encode())
        expected = hmac.digest(hmac.digest(salted, b"Server Key", algo), auth, algo)
        if final != b"v=" + base64.b64encode(expected):
            raise AuthenticationFailed("SCRAM: the server's signature is wrong")
