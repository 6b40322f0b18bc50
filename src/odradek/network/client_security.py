"""The client side of a secured connection: TLS, then SASL PLAIN or SCRAM (RFC 5802/7677).

One `ClientSecurity` (the protocol, a client ssl.SSLContext, the mechanism and this side's
credentials) serves every client odradek runs: the node's own connections to its peers
(Raft, registration and heartbeats, forwarding, replica fetchers, transaction markers, over
`Channel`) and the native client's blocking socket (client.secure_socket). The SASL exchange
is sans-I/O: `sasl_exchange()` is a generator that yields the client's tokens and is sent the
server's, so the asyncio channel and the blocking socket drive the same steps.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import ssl
from collections.abc import Generator
from dataclasses import dataclass, field

__all__ = ["CLIENT_MECHANISMS", "AuthenticationFailed", "ClientSecurity", "plain_token",
           "scram_exchange"]

# mechanism -> hashlib name (None: PLAIN)
CLIENT_MECHANISMS: dict[str, str | None] = {
    "PLAIN": None, "SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36

# one client token out, the server's token in; returns when the exchange is complete
Exchange = Generator[bytes, bytes, None]


class AuthenticationFailed(Exception):
    """The server refused the mechanism or the credentials, or proved no knowledge of them
    (a SCRAM server signature that does not match). Not an OSError on purpose: the native
    client retries those (a leader moving), and retrying a wrong password only delays the
    answer; `Channel` turns it into a ChannelError, as its peers retry with a backoff."""


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str  # PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None  # with SASL_*: a CLIENT_MECHANISMS key
    username: str = ""
    password: str = field(default="", repr=False)  # never in logs or tracebacks

    def __post_init__(self) -> None:
        tls = self.protocol in ("SSL", "SASL_SSL")
        if tls != (self.ssl_context is not None):
            raise ValueError(f"security protocol {self.protocol}: "
                             f"{'a' if tls else 'no'} TLS context expected")
        sasl = self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")
        if sasl and self.mechanism not in CLIENT_MECHANISMS:
            raise ValueError(f"SASL mechanism {self.mechanism} is not one this client speaks "
                             f"({', '.join(CLIENT_MECHANISMS)})")

    @property
    def sasl(self) -> bool:
        return self.mechanism is not None and self.protocol.startswith("SASL")

    def sasl_exchange(self) -> Exchange:
        """The client's side of SaslAuthenticate, after a handshake for `mechanism`."""
        if self.mechanism == "PLAIN":
            yield plain_token(self.username, self.password)
            return
        yield from scram_exchange(self.mechanism or "", self.username, self.password)


def plain_token(username: str, password: str) -> bytes:
    """RFC 4616: no authorization id, NUL, the user, NUL, the password."""
    return f"\0{username}\0{password}".encode()


def _saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _attributes(message: bytes) -> dict[str, str]:
    try:
        text = message.decode()
    except UnicodeDecodeError:
        raise AuthenticationFailed("SCRAM: the server's message is not UTF-8") from None
    out = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if sep and len(key) == 1:
            out[key] = value
    return out


def scram_exchange(mechanism: str, username: str, password: str,
                   nonce: str | None = None) -> Exchange:
    """client-first, client-final; then the server-final is checked (its signature proves
    the server holds the stored key, so a false server is detected)."""
    algo = CLIENT_MECHANISMS.get(mechanism)
    if algo is None:
        raise ValueError(f"{mechanism} is not a SCRAM mechanism")
    nonce = nonce or base64.b64encode(os.urandom(24)).decode()
    bare = f"n={_saslname(username)},r={nonce}"
    first = yield f"n,,{bare}".encode()
    attrs = _attributes(first)
    if "e" in attrs:
        raise AuthenticationFailed(f"SCRAM: the server refused: {attrs['e']}")
    if not attrs.get("r", "").startswith(nonce) or len(attrs["r"]) <= len(nonce):
        raise AuthenticationFailed("SCRAM: the server's nonce does not extend ours")
    try:
        salt, iterations = base64.b64decode(attrs["s"], validate=True), int(attrs["i"])
    except (KeyError, ValueError):
        raise AuthenticationFailed("SCRAM: the server's first message lacks a salt or an "
                                   "iteration count") from None
    if not 1 <= iterations <= 1_000_000:
        raise AuthenticationFailed(f"SCRAM: iteration count {iterations} out of bounds")
    salted = hashlib.pbkdf2_hmac(algo, password.encode(), salt, iterations)
    client_key = hmac.digest(salted, b"Client Key", algo)
    without_proof = f"c=biws,r={attrs['r']}"
    auth_message = f"{bare},{first.decode()},{without_proof}".encode()
    signature = hmac.digest(hashlib.new(algo, client_key).digest(), auth_message, algo)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    final = yield f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
    expected = hmac.digest(hmac.digest(salted, b"Server Key", algo), auth_message, algo)
    got = _attributes(final)
    if "e" in got:
        raise AuthenticationFailed(f"SCRAM: the server refused: {got['e']}")
    if not hmac.compare_digest(got.get("v", "").encode(), base64.b64encode(expected)):
        raise AuthenticationFailed("SCRAM: the server's signature is wrong")
