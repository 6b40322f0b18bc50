"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), server side, and the credentials.

The server keeps for each user and mechanism only (salt, StoredKey, ServerKey, iterations):
the password itself is never stored, as Kafka's ScramCredential. Passwords are UTF-8
without SASLprep, as Kafka's ScramFormatter. Channel binding is refused (Kafka's clients
never ask for it); the `tokenauth` extension (delegation tokens) is refused, as this node
has no delegation tokens.

The parsers take bytes from the network and raise SaslFailure for anything malformed,
never another exception (fuzzed in tests/unit/test_sasl_fuzz.py).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from collections.abc import Callable
from dataclasses import dataclass

from odradek.security.sasl.mechanism import SaslFailure

__all__ = [
    "MAX_ITERATIONS",
    "MECHANISMS",
    "MIN_ITERATIONS",
    "ClientFinal",
    "ClientFirst",
    "ScramCredential",
    "ScramServer",
    "make_credential",
    "mechanism_type",
    "parse_client_final",
    "parse_client_first",
    "salted_keys",
]

# name -> (hash, Kafka's ScramMechanism type id used in UserScramCredentialRecord)
MECHANISMS: dict[str, tuple[str, int]] = {"SCRAM-SHA-256": ("sha256", 1),
                                           "SCRAM-SHA-512": ("sha512", 2)}
MIN_ITERATIONS = 4096  # Kafka's ScramMechanism.minIterations
MAX_ITERATIONS = 16384  # Kafka's cap for AlterUserScramCredentials


def mechanism_type(name: str) -> int:
    return MECHANISMS[name][1]


def mechanism_name(type_id: int) -> str | None:
    for name, (_, tid) in MECHANISMS.items():
        if tid == type_id:
            return name
    return None


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # keys never reach a log line
        return f"ScramCredential(iterations={self.iterations})"


def salted_keys(mechanism: str, password: str, salt: bytes,
                iterations: int) -> tuple[bytes, bytes]:
    """(StoredKey, ServerKey) of a password."""
    algo = MECHANISMS[mechanism][0]
    salted = hashlib.pbkdf2_hmac(algo, password.encode("utf-8"), salt, iterations)
    client_key = hmac.digest(salted, b"Client Key", algo)
    stored = hashlib.new(algo, client_key).digest()
    return stored, hmac.digest(salted, b"Server Key", algo)


def make_credential(mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    if mechanism not in MECHANISMS:
        raise ValueError(f"unknown SCRAM mechanism {mechanism}")
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be {MIN_ITERATIONS} to {MAX_ITERATIONS}, "
                         f"got {iterations}")
    salt = os.urandom(32) if salt is None else salt
    stored, server = salted_keys(mechanism, password, salt, iterations)
    return ScramCredential(salt, stored, server, iterations)


def _b64decode(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise SaslFailure(f"Invalid SCRAM message: {what} is not base64") from None


def _decode_name(raw: str) -> str:
    # saslname: "," and "=" are sent as =2C and =3D; any other "=" is malformed
    out, i = [], 0
    while i < len(raw):
        ch = raw[i]
        if ch == "=":
            esc = raw[i:i + 3]
            if esc == "=2C":
                out.append(",")
            elif esc == "=3D":
                out.append("=")
            else:
                raise SaslFailure("Invalid SCRAM message: bad escape in the user name")
            i += 3
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _attributes(parts: list[str]) -> list[tuple[str, str]]:
    # RFC 5802's attributes are one letter; Kafka's extensions (tokenauth=true) are words
    out = []
    for part in parts:
        key, eq, value = part.partition("=")
        if not eq or not key.isascii() or not key.isalpha():
            raise SaslFailure("Invalid SCRAM message: attribute is not a=value")
        out.append((key, value))
    return out


@dataclass(frozen=True, slots=True)
class ClientFirst:
    gs2_header: str
    authzid: str | None
    username: str
    nonce: str
    extensions: dict[str, str]
    bare: str


def _text(data: bytes) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslFailure("Invalid SCRAM message: not UTF-8") from None
    if "\x00" in text:
        raise SaslFailure("Invalid SCRAM message: NUL in message")
    return text


def parse_client_first(data: bytes) -> ClientFirst:
    text = _text(data)
    parts = text.split(",")
    if len(parts) < 4:
        raise SaslFailure("Invalid SCRAM client-first message")
    cbind, authz = parts[0], parts[1]
    if cbind == "p" or cbind.startswith("p="):
        raise SaslFailure("SCRAM channel binding is not supported")
    if cbind not in ("n", "y"):
        raise SaslFailure("Invalid SCRAM client-first message: bad gs2 header")
    authzid = None
    if authz:
        if not authz.startswith("a="):
            raise SaslFailure("Invalid SCRAM client-first message: bad authzid")
        authzid = _decode_name(authz[2:])
    gs2 = f"{cbind},{authz},"
    bare_parts = parts[2:]
    if bare_parts and bare_parts[0].startswith("m="):
        raise SaslFailure("SCRAM mandatory extensions are not supported")
    attrs = _attributes(bare_parts)
    if attrs[0][0] != "n" or attrs[1][0] != "r":
        raise SaslFailure("Invalid SCRAM client-first message: n= and r= expected")
    username = _decode_name(attrs[0][1])
    nonce = attrs[1][1]
    if not username or not nonce or not nonce.isprintable() or "," in nonce:
        raise SaslFailure("Invalid SCRAM client-first message: empty user name or nonce")
    extensions = {}
    for key, value in attrs[2:]:
        extensions[key] = value
    return ClientFirst(gs2, authzid, username, nonce, extensions, ",".join(bare_parts))


@dataclass(frozen=True, slots=True)
class ClientFinal:
    channel_binding: bytes
    nonce: str
    proof: bytes
    without_proof: str


def parse_client_final(data: bytes) -> ClientFinal:
    text = _text(data)
    head, sep, proof_part = text.rpartition(",p=")
    if not sep:
        raise SaslFailure("Invalid SCRAM client-final message: no proof")
    attrs = _attributes(head.split(","))
    if len(attrs) < 2 or attrs[0][0] != "c" or attrs[1][0] != "r":
        raise SaslFailure("Invalid SCRAM client-final message: c= and r= expected")
    return ClientFinal(_b64decode(attrs[0][1], "channel binding"), attrs[1][1],
                       _b64decode(proof_part, "proof"), head)


# state names of the exchange
_FIRST, _FINAL, _DONE = "client-first", "client-final", "done"


class ScramServer:
    """One SCRAM exchange. `credentials(username) -> ScramCredential | None`."""

    def __init__(self, mechanism: str,
                 credentials: Callable[[str], ScramCredential | None]) -> None:
        self.name = mechanism
        self._algo = MECHANISMS[mechanism][0]
        self._credentials = credentials
        self._state = _FIRST
        self.complete = False
        self.username: str | None = None
        self.expires_at: float | None = None
        self._first: ClientFirst | None = None
        self._server_first = ""
        self._nonce = ""
        self._credential: ScramCredential | None = None

    def step(self, token: bytes) -> bytes:
        if self._state == _FIRST:
            return self._client_first(token)
        if self._state == _FINAL:
            return self._client_final(token)
        raise SaslFailure("Unexpected SCRAM message after the exchange completed")

    def _client_first(self, token: bytes) -> bytes:
        first = parse_client_first(token)
        if first.extensions.get("tokenauth", "false").lower() == "true":
            raise SaslFailure("Authentication failed: delegation tokens are not supported")
        credential = self._credentials(first.username)
        if credential is None:
            # Kafka's ScramSaslServer: an unknown user fails at the first message
            raise SaslFailure("Authentication failed: Invalid user credentials")
        if first.authzid is not None and first.authzid != first.username:
            raise SaslFailure("Authentication failed: Client requested an authorization id "
                              "that is different from username")
        self._first, self._credential = first, credential
        self._nonce = first.nonce + base64.b64encode(os.urandom(18)).decode()
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        self._state = _FINAL
        return self._server_first.encode()

    def _client_final(self, token: bytes) -> bytes:
        final = parse_client_final(token)
        first, credential = self._first, self._credential
        assert first is not None and credential is not None
        # librdkafka before 2.6.1 (kcat as Debian ships it) sends its own nonce again in
        # front of the combined one (librdkafka#4895); Kafka 3.8.1-3.9 accepted any nonce
        # ending with ours. Only that exact form is taken besides RFC 5802's: it still
        # carries this exchange's fresh server nonce, so a replayed message cannot pass.
        if final.nonce not in (self._nonce, first.nonce + self._nonce):
            raise SaslFailure("Invalid SCRAM client-final message: nonce mismatch")
        if final.channel_binding != first.gs2_header.encode():
            raise SaslFailure("Invalid SCRAM client-final message: channel binding mismatch")
        auth_message = f"{first.bare},{self._server_first},{final.without_proof}".encode()
        signature = hmac.digest(credential.stored_key, auth_message, self._algo)
        if len(final.proof) != len(signature):
            raise SaslFailure(self._invalid())
        client_key = bytes(a ^ b for a, b in zip(final.proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._algo, client_key).digest(),
                                   credential.stored_key):
            raise SaslFailure(self._invalid())
        self._state = _DONE
        self.complete = True
        self.username = first.username
        server_sig = hmac.digest(credential.server_key, auth_message, self._algo)
        return b"v=" + base64.b64encode(server_sig)

    def _invalid(self) -> str:
        return (f"Authentication failed during authentication due to invalid credentials "
                f"with SASL mechanism {self.name}")
