"""SCRAM credentials as metadata records: kafka-storage.sh's `--add-scram` argument, and a
credential from a password or from the salted password an admin client sends
(AlterUserScramCredentials carries salt and SaltedPassword, never the password)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re

from odradek.metadata.records import UserScramCredentialRecord
from odradek.security.sasl.scram import (
    MAX_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    make_credential,
    mechanism_type,
)

__all__ = ["parse_add_scram", "record_from_password", "record_from_salted"]

_ARG = re.compile(r"\s*(SCRAM-SHA-256|SCRAM-SHA-512)\s*=\s*\[(.*)\]\s*", re.S)


def record_from_password(name: str, mechanism: str, password: str,
                         iterations: int = MIN_ITERATIONS,
                         salt: bytes | None = None) -> UserScramCredentialRecord:
    cred = make_credential(mechanism, password, iterations, salt)
    return UserScramCredentialRecord(name, mechanism_type(mechanism), cred.salt,
                                     cred.stored_key, cred.server_key, cred.iterations)


def record_from_salted(name: str, mechanism: str, salt: bytes, salted_password: bytes,
                       iterations: int) -> UserScramCredentialRecord:
    """From AlterUserScramCredentials' upsertion (salt and SaltedPassword)."""
    algo = MECHANISMS[mechanism][0]
    client_key = hmac.digest(salted_password, b"Client Key", algo)
    stored = hashlib.new(algo, client_key).digest()
    server = hmac.digest(salted_password, b"Server Key", algo)
    return UserScramCredentialRecord(name, mechanism_type(mechanism), salt, stored, server,
                                     iterations)


def _split(body: str) -> dict[str, str]:
    # name=alice,password="a,b" : values may be double-quoted (then they may hold commas)
    out: dict[str, str] = {}
    for m in re.finditer(r'\s*([A-Za-z]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^,]*)\s*(?:,|$)', body):
        key, value = m.group(1).lower(), m.group(2)
        if value.startswith('"') and value.endswith('"') and len(value) >= 2:
            value = value[1:-1].replace('\\"', '"')
        out[key] = value
    return out


def parse_add_scram(text: str) -> UserScramCredentialRecord:
    """`SCRAM-SHA-512=[name=admin,password=admin-secret]` (also iterations=, salt= as base64,
    or saltedpassword= as base64 instead of password=), as kafka-storage.sh format takes it.
    ValueError says what is wrong (never echoing the password)."""
    m = _ARG.fullmatch(text)
    if m is None:
        raise ValueError("--add-scram takes SCRAM-SHA-256=[name=...,password=...] or "
                         "SCRAM-SHA-512=[...]")
    mechanism, fields = m.group(1), _split(m.group(2))
    name = fields.get("name", "")
    if not name:
        raise ValueError(f"--add-scram {mechanism}: name= is required")
    try:
        iterations = int(fields.get("iterations", MIN_ITERATIONS))
    except ValueError:
        raise ValueError(f"--add-scram {mechanism}: iterations must be a number") from None
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"--add-scram {mechanism}: iterations must be {MIN_ITERATIONS} to "
                         f"{MAX_ITERATIONS}")
    try:
        salt = base64.b64decode(fields["salt"], validate=True) if "salt" in fields else None
        salted = (base64.b64decode(fields["saltedpassword"], validate=True)
                  if "saltedpassword" in fields else None)
    except (binascii.Error, ValueError):
        raise ValueError(f"--add-scram {mechanism}: salt and saltedpassword are base64"
                         ) from None
    if salted is not None:
        if salt is None:
            raise ValueError(f"--add-scram {mechanism}: saltedpassword needs salt")
        return record_from_salted(name, mechanism, salt, salted, iterations)
    password = fields.get("password")
    if not password:
        raise ValueError(f"--add-scram {mechanism}: password= (or saltedpassword=) is required")
    return record_from_password(name, mechanism, password, iterations, salt)
