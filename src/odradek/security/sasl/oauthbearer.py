"""OAUTHBEARER (RFC 7628), server side: the client's bearer token is a JWT (RFC 7519) whose
signature is checked against the keys of a JWKS (RFC 7517) file, as Kafka's
OAuthBearerValidatorCallbackHandler does with `sasl.oauthbearer.jwks.endpoint.url`.

Checked: a signature by a key of the JWKS (RS256/384/512, PS256/384/512, ES256/384/512; the
token's `kid` picks the key), `exp` (required, with sasl.oauthbearer.clock.skew.seconds),
`nbf` and `iat` not in the future, the issuer (sasl.oauthbearer.expected.issuer) and
audience (sasl.oauthbearer.expected.audience) when configured, and the subject claim
(sasl.oauthbearer.sub.claim.name) that names the principal. Kafka's unsecured validator
(any unsigned token accepted) is not offered: OAUTHBEARER without a JWKS refuses the start.

An invalid token fails the exchange at once (SASL_AUTHENTICATION_FAILED with the reason)
instead of RFC 7628's error challenge and the client's dummy reply: the client learns the
same thing one round trip sooner.

The JWKS file is read again when its modification time changes, so keys rotate without
a restart. Only file:// (or a plain path) is served: fetching an https JWKS is not built.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any

from odradek.security.sasl.mechanism import SaslFailure
from odradek.security.tls import listener_value

__all__ = ["OAuthBearerServer", "TokenValidator", "parse_client_message",
           "validator_from_config"]

_SEP = b"\x01"


def b64url(text: str | bytes) -> bytes:
    raw = text.encode("ascii") if isinstance(text, str) else text
    raw += b"=" * (-len(raw) % 4)
    try:
        return base64.urlsafe_b64decode(raw)
    except (binascii.Error, ValueError):
        raise SaslFailure("invalid_token: not base64url") from None


def parse_client_message(token: bytes) -> tuple[str | None, str, dict[str, str]]:
    """(authzid, bearer token, extensions) of `gs2-header %x01 auth=Bearer <t> %x01 ...
    %x01 %x01`; SaslFailure when malformed."""
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslFailure("Invalid OAUTHBEARER client message: not UTF-8") from None
    if not text.endswith("\x01\x01"):
        raise SaslFailure("Invalid OAUTHBEARER client message: not terminated")
    head, _, rest = text.partition("\x01")
    gs2 = head.split(",")
    if len(gs2) != 3 or gs2[0] not in ("n", "y") or gs2[2] != "":
        raise SaslFailure("Invalid OAUTHBEARER client message: bad gs2 header")
    authzid = None
    if gs2[1]:
        if not gs2[1].startswith("a="):
            raise SaslFailure("Invalid OAUTHBEARER client message: bad authzid")
        authzid = gs2[1][2:]
    bearer = None
    extensions: dict[str, str] = {}
    for item in rest[:-2].split("\x01"):
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise SaslFailure("Invalid OAUTHBEARER client message: bad key=value")
        if key == "auth":
            scheme, _, tok = value.partition(" ")
            if scheme.lower() != "bearer" or not tok.strip():
                raise SaslFailure("Invalid OAUTHBEARER client message: no Bearer token")
            bearer = tok.strip()
        else:
            extensions[key] = value
    if bearer is None:
        raise SaslFailure("Invalid OAUTHBEARER client message: no auth=")
    return authzid, bearer, extensions


def _public_key(jwk: dict[str, Any]) -> Any:
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    def num(name: str) -> int:
        return int.from_bytes(b64url(jwk[name]), "big")

    kty = jwk.get("kty")
    if kty == "RSA":
        return rsa.RSAPublicNumbers(num("e"), num("n")).public_key()
    if kty == "EC":
        curves = {"P-256": ec.SECP256R1(), "P-384": ec.SECP384R1(), "P-521": ec.SECP521R1()}
        curve = curves.get(jwk.get("crv", ""))
        if curve is None:
            raise ValueError(f"unsupported EC curve {jwk.get('crv')}")
        return ec.EllipticCurvePublicNumbers(num("x"), num("y"), curve).public_key()
    raise ValueError(f"unsupported key type {kty}")


def _verify(alg: str, key: Any, signature: bytes, signed: bytes) -> bool:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

    hashes_by = {"256": hashes.SHA256(), "384": hashes.SHA384(), "512": hashes.SHA512()}
    algo = hashes_by.get(alg[2:])
    if algo is None:
        return False
    try:
        if alg.startswith("RS") and isinstance(key, rsa.RSAPublicKey):
            key.verify(signature, signed, padding.PKCS1v15(), algo)
        elif alg.startswith("PS") and isinstance(key, rsa.RSAPublicKey):
            key.verify(signature, signed,
                       padding.PSS(padding.MGF1(algo), padding.PSS.DIGEST_LENGTH), algo)
        elif alg.startswith("ES") and isinstance(key, ec.EllipticCurvePublicKey):
            half = len(signature) // 2
            if half == 0 or len(signature) % 2:
                return False
            der = encode_dss_signature(int.from_bytes(signature[:half], "big"),
                                       int.from_bytes(signature[half:], "big"))
            key.verify(der, signed, ec.ECDSA(algo))
        else:
            return False
    except InvalidSignature:
        return False
    return True


@dataclass
class TokenValidator:
    jwks_path: str
    issuer: str | None = None
    audience: list[str] = field(default_factory=list)
    sub_claim: str = "sub"
    skew_s: int = 30
    _mtime: float = -1.0
    _keys: list[tuple[str | None, str | None, Any]] = field(default_factory=list)

    def keys(self) -> list[tuple[str | None, str | None, Any]]:
        """(kid, alg, public key) of the JWKS, re-read when the file changed."""
        try:
            mtime = os.stat(self.jwks_path).st_mtime
        except OSError as exc:
            raise SaslFailure(f"invalid_token: JWKS unavailable ({exc.strerror})") from None
        if mtime != self._mtime:
            self._keys = load_jwks(self.jwks_path)
            self._mtime = mtime
        return self._keys

    def validate(self, token: str) -> tuple[str, float]:
        """(principal name, exp) of a valid token; SaslFailure otherwise."""
        parts = token.split(".")
        if len(parts) != 3:
            raise SaslFailure("invalid_token: a JWT has three parts")
        try:
            header = json.loads(b64url(parts[0]))
            claims = json.loads(b64url(parts[1]))
        except (ValueError, UnicodeDecodeError):
            raise SaslFailure("invalid_token: header or payload is not JSON") from None
        if not isinstance(header, dict) or not isinstance(claims, dict):
            raise SaslFailure("invalid_token: header or payload is not a JSON object")
        alg, kid = header.get("alg"), header.get("kid")
        if not isinstance(alg, str) or alg == "none" or alg[:2] not in ("RS", "PS", "ES"):
            raise SaslFailure(f"invalid_token: algorithm {alg!r} is not accepted")
        candidates = [(k, a, key) for k, a, key in self.keys()
                      if (kid is None or k == kid) and (a is None or a == alg)]
        signed = f"{parts[0]}.{parts[1]}".encode("ascii", "replace")
        signature = b64url(parts[2])
        if not any(_verify(alg, key, signature, signed) for _, _, key in candidates):
            raise SaslFailure("invalid_token: the signature matches no key of the JWKS")
        now = time.time()
        exp = claims.get("exp")
        if not isinstance(exp, int | float):
            raise SaslFailure("invalid_token: no exp claim")
        if exp + self.skew_s < now:
            raise SaslFailure("invalid_token: the token has expired")
        for name in ("nbf", "iat"):
            value = claims.get(name)
            if isinstance(value, int | float) and value - self.skew_s > now:
                raise SaslFailure(f"invalid_token: {name} is in the future")
        if self.issuer is not None and claims.get("iss") != self.issuer:
            raise SaslFailure("invalid_token: unexpected issuer")
        if self.audience:
            aud = claims.get("aud")
            auds = aud if isinstance(aud, list) else [aud]
            if not any(a in self.audience for a in auds):
                raise SaslFailure("invalid_token: unexpected audience")
        sub = claims.get(self.sub_claim)
        if not isinstance(sub, str) or not sub:
            raise SaslFailure(f"invalid_token: no {self.sub_claim} claim")
        return sub, float(exp)


def load_jwks(path: str) -> list[tuple[str | None, str | None, Any]]:
    try:
        with open(path, "rb") as f:
            doc = json.load(f)
        keys = doc["keys"]
        out = []
        for jwk in keys:
            if jwk.get("use", "sig") != "sig":
                continue
            out.append((jwk.get("kid"), jwk.get("alg"), _public_key(jwk)))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SaslFailure(f"invalid_token: the JWKS cannot be read ({exc})") from None
    return out


class OAuthBearerServer:
    name = "OAUTHBEARER"

    def __init__(self, validator: TokenValidator) -> None:
        self._validator = validator
        self.complete = False
        self.username: str | None = None
        self.expires_at: float | None = None

    def step(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslFailure("Unexpected OAUTHBEARER message after authentication")
        authzid, bearer, _extensions = parse_client_message(token)
        name, exp = self._validator.validate(bearer)
        if authzid and authzid != name:
            raise SaslFailure("Authentication failed: the authorization id is not the "
                              "token's subject")
        self.complete = True
        self.username = name
        self.expires_at = exp
        return b""


def validator_from_config(config: Any, listener: str) -> TokenValidator:
    def get(key: str) -> Any:
        return listener_value(config, listener, key)

    url = get("sasl.oauthbearer.jwks.endpoint.url")
    if not url:
        raise ValueError("OAUTHBEARER needs sasl.oauthbearer.jwks.endpoint.url (a JWKS file); "
                         "odradek does not accept unsigned tokens")
    url = str(url)
    if url.startswith("file://"):
        path = url[len("file://"):]
    elif "://" in url:
        raise ValueError(f"sasl.oauthbearer.jwks.endpoint.url={url}: only file:// JWKS are "
                         "served by odradek (no https fetching)")
    else:
        path = url
    load = load_jwks(path)  # a JWKS that does not load refuses the start
    if not load:
        raise ValueError(f"sasl.oauthbearer.jwks.endpoint.url={url}: no signing keys in it")
    audience = get("sasl.oauthbearer.expected.audience") or []
    if isinstance(audience, str):
        audience = [a.strip() for a in audience.split(",") if a.strip()]
    return TokenValidator(path, get("sasl.oauthbearer.expected.issuer") or None, list(audience),
                          str(get("sasl.oauthbearer.sub.claim.name") or "sub"),
                          int(get("sasl.oauthbearer.clock.skew.seconds") or 30))
