"""SCRAM-SHA-256/512 server against a client written here from RFC 5802, PLAIN on the same
credentials, and the parsers fuzzed: anything malformed is a SaslFailure, never another
exception."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.security.sasl.mechanism import SaslFailure
from odradek.security.sasl.plain import PlainServer, parse_plain
from odradek.security.sasl.scram import (
    MECHANISMS,
    ScramServer,
    make_credential,
    parse_client_final,
    parse_client_first,
)
from odradek.security.sasl.server_config import SaslServerConfig

PASSWORD = "pencil"


class ScramClient:
    """RFC 5802's client side."""

    def __init__(self, mechanism: str, user: str, password: str) -> None:
        self.algo = MECHANISMS[mechanism][0]
        self.user, self.password = user, password
        self.nonce = base64.b64encode(os.urandom(12)).decode()
        self.first_bare = f"n={user.replace('=', '=3D').replace(',', '=2C')},r={self.nonce}"

    def first(self) -> bytes:
        return f"n,,{self.first_bare}".encode()

    def final(self, server_first: bytes, nonce: str | None = None) -> bytes:
        attrs = dict(a.split("=", 1) for a in server_first.decode().split(","))
        salt, iterations = base64.b64decode(attrs["s"]), int(attrs["i"])
        assert attrs["r"].startswith(self.nonce)
        salted = hashlib.pbkdf2_hmac(self.algo, self.password.encode(), salt, iterations)
        client_key = hmac.digest(salted, b"Client Key", self.algo)
        stored = hashlib.new(self.algo, client_key).digest()
        without_proof = f"c=biws,r={attrs['r'] if nonce is None else nonce}"
        self.auth_message = f"{self.first_bare},{server_first.decode()},{without_proof}"
        sig = hmac.digest(stored, self.auth_message.encode(), self.algo)
        proof = bytes(a ^ b for a, b in zip(client_key, sig, strict=True))
        self.server_key = hmac.digest(salted, b"Server Key", self.algo)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def check_server_final(self, data: bytes) -> None:
        expected = hmac.digest(self.server_key, self.auth_message.encode(), self.algo)
        assert data == b"v=" + base64.b64encode(expected)


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
@pytest.mark.parametrize("user", ["alice", "we,ird=name"])
def test_scram_exchange(mechanism: str, user: str) -> None:
    cred = make_credential(mechanism, PASSWORD)
    server = ScramServer(mechanism, lambda u: cred if u == user else None)
    client = ScramClient(mechanism, user, PASSWORD)
    client.check_server_final(server.step(client.final(server.step(client.first()))))
    assert server.complete and server.username == user
    with pytest.raises(SaslFailure):
        server.step(b"again")


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_scram_wrong_password(mechanism: str) -> None:
    cred = make_credential(mechanism, PASSWORD)
    server = ScramServer(mechanism, lambda u: cred)
    client = ScramClient(mechanism, "alice", "not-pencil")
    with pytest.raises(SaslFailure, match="invalid credentials"):
        server.step(client.final(server.step(client.first())))
    assert not server.complete


def test_scram_unknown_user_and_nonce_checks() -> None:
    cred = make_credential("SCRAM-SHA-256", PASSWORD)
    with pytest.raises(SaslFailure, match="Invalid user credentials"):
        ScramServer("SCRAM-SHA-256", lambda u: None).step(b"n,,n=bob,r=abc")
    server = ScramServer("SCRAM-SHA-256", lambda u: cred)
    client = ScramClient("SCRAM-SHA-256", "alice", PASSWORD)
    first = server.step(client.first())
    with pytest.raises(SaslFailure, match="nonce"):
        server.step(client.final(first, nonce="someone-elses-nonce"))


def test_scram_librdkafka_nonce_form_accepted() -> None:
    # librdkafka < 2.6.1 repeats its own nonce before the combined one (librdkafka#4895)
    cred = make_credential("SCRAM-SHA-512", PASSWORD)
    server = ScramServer("SCRAM-SHA-512", lambda u: cred)
    client = ScramClient("SCRAM-SHA-512", "alice", PASSWORD)
    first = server.step(client.first())
    combined = dict(a.split("=", 1) for a in first.decode().split(","))["r"]
    client.check_server_final(server.step(client.final(first, nonce=client.nonce + combined)))


def test_scram_refuses_channel_binding_and_tokenauth() -> None:
    cred = make_credential("SCRAM-SHA-256", PASSWORD)
    with pytest.raises(SaslFailure, match="channel binding"):
        ScramServer("SCRAM-SHA-256", lambda u: cred).step(b"p=tls-unique,,n=a,r=b")
    with pytest.raises(SaslFailure, match="delegation"):
        ScramServer("SCRAM-SHA-256", lambda u: cred).step(b"n,,n=a,r=b,tokenauth=true")


def test_credential_keeps_no_password() -> None:
    cred = make_credential("SCRAM-SHA-512", "s3cret-pw", iterations=4096)
    assert b"s3cret-pw" not in cred.salt + cred.stored_key + cred.server_key
    assert "s3cret" not in repr(cred)
    with pytest.raises(ValueError):
        make_credential("SCRAM-SHA-512", "x", iterations=100)


def test_plain_checks_scram_credentials() -> None:
    creds = {("alice", "SCRAM-SHA-256"): make_credential("SCRAM-SHA-256", PASSWORD)}
    config = SaslServerConfig(["PLAIN"], credentials=lambda u, m: creds.get((u, m)))
    ok = config.new_mechanism("PLAIN")
    assert ok.step(b"\0alice\0pencil") == b"" and ok.username == "alice"
    for token in (b"\0alice\0wrong", b"\0bob\0pencil", b"mallory\0alice\0pencil"):
        with pytest.raises(SaslFailure):
            config.new_mechanism("PLAIN").step(token)
    assert PlainServer(lambda u: []).complete is False


# --- fuzzing: the parsers take network bytes ---------------------------------------------

_SCRAMISH = st.lists(st.sampled_from([b"n", b"y", b"p", b",", b"=", b"a=", b"n=", b"r=",
                                      b"c=", b"p=", b"=2C", b"=3D", b"biws", b"\x00",
                                      b"\xff", b"abc", b"m=", b"tokenauth=true", b"x"]),
                     max_size=20).map(b"".join)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.binary(max_size=200), _SCRAMISH))
def test_fuzz_client_first(data: bytes) -> None:
    try:
        first = parse_client_first(data)
    except SaslFailure:
        return
    assert first.username and first.nonce


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.binary(max_size=200), _SCRAMISH))
def test_fuzz_client_final(data: bytes) -> None:
    try:
        parse_client_final(data)
    except SaslFailure:
        pass


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=100), _SCRAMISH), st.one_of(st.binary(max_size=100),
                                                               _SCRAMISH))
def test_fuzz_scram_server_exchange(first: bytes, final: bytes) -> None:
    cred = make_credential("SCRAM-SHA-256", PASSWORD, salt=b"salt" * 4)
    server = ScramServer("SCRAM-SHA-256", lambda u: cred)
    try:
        server.step(first)
        server.step(final)
    except SaslFailure:
        return
    pytest.fail("random bytes authenticated")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=100))
def test_fuzz_plain(data: bytes) -> None:
    try:
        _authzid, user, password = parse_plain(data)
    except SaslFailure:
        return
    assert user and password
