"""SCRAM credentials as metadata records: the codec, the image, --add-scram's syntax."""

from __future__ import annotations

import base64

import pytest

from odradek.metadata.image import MetadataImage, image_to_records
from odradek.metadata.records import (
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
    decode_record,
    encode_record,
)
from odradek.security.sasl.scram import salted_keys
from odradek.security.scram_credentials import parse_add_scram


def test_record_round_trip_and_image() -> None:
    rec = parse_add_scram("SCRAM-SHA-512=[name=admin,password=admin-secret]")
    assert rec.mechanism == 2 and rec.iterations == 4096
    assert decode_record(encode_record(rec)) == rec
    assert b"admin-secret" not in encode_record(rec)
    assert "admin-secret" not in repr(rec)
    image = MetadataImage().apply([rec, parse_add_scram(
        "SCRAM-SHA-256=[name=alice,password=x,iterations=8192]")])
    assert set(image.scram_credentials) == {("admin", 2), ("alice", 1)}
    again = MetadataImage().apply(image_to_records(image))
    assert again.scram_credentials == image.scram_credentials
    gone = image.apply([RemoveUserScramCredentialRecord("admin", 2)])
    assert set(gone.scram_credentials) == {("alice", 1)}


def test_add_scram_salted_password_and_salt() -> None:
    salt = b"0123456789abcdef"
    import hashlib

    salted = hashlib.pbkdf2_hmac("sha256", b"pw", salt, 4096)
    rec = parse_add_scram(
        f'SCRAM-SHA-256=[name="al,ice",salt="{base64.b64encode(salt).decode()}",'
        f'saltedpassword="{base64.b64encode(salted).decode()}",iterations=4096]')
    assert rec.name == "al,ice" and rec.salt == salt
    assert (rec.stored_key, rec.server_key) == salted_keys("SCRAM-SHA-256", "pw", salt, 4096)


@pytest.mark.parametrize("arg", [
    "SCRAM-SHA-1=[name=a,password=b]", "SCRAM-SHA-256=[password=b]",
    "SCRAM-SHA-256=[name=a]", "SCRAM-SHA-256=[name=a,password=b,iterations=10]",
    "SCRAM-SHA-256=[name=a,saltedpassword=AAAA]", "SCRAM-SHA-256=name=a,password=b"])
def test_add_scram_refusals(arg: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_add_scram(arg)
    assert "password=b" not in str(info.value).replace("password= (", "")


def test_record_fields_are_kafkas() -> None:
    rec = UserScramCredentialRecord("u", 1, b"s", b"k", b"v", 4096)
    # frame version 1, api key 11, version 0, then the compact string "u"
    assert encode_record(rec)[:5] == bytes([1, 11, 0, 2]) + b"u"
