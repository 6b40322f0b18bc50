"""An issuer for OAUTHBEARER tests: an EC P-256 key, its JWKS file, and tokens it signs."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class JwtIssuer:
    def __init__(self, directory: Path, kid: str = "test-key", issuer: str = "odradek-tests"):
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.kid, self.issuer = kid, issuer
        nums = self.key.public_key().public_numbers()
        jwk = {"kty": "EC", "crv": "P-256", "kid": kid, "use": "sig", "alg": "ES256",
               "x": _b64(nums.x.to_bytes(32, "big")), "y": _b64(nums.y.to_bytes(32, "big"))}
        self.jwks = Path(directory) / "jwks.json"
        self.jwks.write_text(json.dumps({"keys": [jwk]}))

    def token(self, sub: str, lifetime_s: float = 3600, *, audience: str = "kafka",
              **claims: object) -> str:
        now = int(time.time())
        header = {"alg": "ES256", "typ": "JWT", "kid": self.kid}
        body = {"sub": sub, "iss": self.issuer, "aud": audience, "iat": now,
                "exp": int(now + lifetime_s), **claims}
        signed = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(body).encode())}"
        der = self.key.sign(signed.encode(), ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)
        return f"{signed}.{_b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"
