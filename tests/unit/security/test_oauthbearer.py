"""OAUTHBEARER: JWTs the test signs checked against a JWKS file; the client message parser
fuzzed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.security.sasl.mechanism import SaslFailure
from odradek.security.sasl.oauthbearer import (
    OAuthBearerServer,
    TokenValidator,
    parse_client_message,
)
from tests.support.jwt_tokens import JwtIssuer


def _message(token: str, authzid: str = "") -> bytes:
    gs2 = f"n,a={authzid}," if authzid else "n,,"
    return f"{gs2}\x01auth=Bearer {token}\x01\x01".encode()


@pytest.fixture
def issuer(tmp_path: Path) -> JwtIssuer:
    return JwtIssuer(tmp_path)


def _validator(issuer: JwtIssuer, **kw: object) -> TokenValidator:
    return TokenValidator(str(issuer.jwks), issuer=issuer.issuer, audience=["kafka"],
                          skew_s=0, **kw)  # type: ignore[arg-type]


def test_valid_token(issuer: JwtIssuer) -> None:
    server = OAuthBearerServer(_validator(issuer))
    assert server.step(_message(issuer.token("svc", 600))) == b""
    assert server.complete and server.username == "svc" and server.expires_at is not None


@pytest.mark.parametrize("kwargs,why", [
    ({"lifetime_s": -10}, "expired"),
    ({"audience": "other"}, "audience"),
    ({"iss": "someone-else"}, "issuer"),
    ({"nbf": 4102444800}, "future"),
])
def test_refused_tokens(issuer: JwtIssuer, kwargs: dict, why: str) -> None:
    sub = "svc"
    token = issuer.token(sub, **kwargs)
    with pytest.raises(SaslFailure, match=why):
        OAuthBearerServer(_validator(issuer)).step(_message(token))


def test_forged_and_unsigned_tokens(issuer: JwtIssuer, tmp_path: Path) -> None:
    other = JwtIssuer(tmp_path / "..", kid=issuer.kid, issuer=issuer.issuer)
    with pytest.raises(SaslFailure, match="signature"):
        OAuthBearerServer(_validator(issuer)).step(_message(other.token("svc")))
    _head, body, _ = issuer.token("svc").split(".")
    import base64

    none_head = base64.urlsafe_b64encode(json.dumps({"alg": "none"}).encode()).rstrip(b"=")
    with pytest.raises(SaslFailure, match="algorithm"):
        OAuthBearerServer(_validator(issuer)).step(_message(f"{none_head.decode()}.{body}."))


def test_authzid_must_be_subject(issuer: JwtIssuer) -> None:
    with pytest.raises(SaslFailure):
        OAuthBearerServer(_validator(issuer)).step(_message(issuer.token("svc"), "admin"))


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.binary(max_size=200),
                 st.lists(st.sampled_from([b"n", b",", b"a=", b"\x01", b"auth=", b"Bearer ",
                                           b"x.y.z", b"=", b"\xff", b"k=v"]),
                          max_size=16).map(b"".join)))
def test_fuzz_client_message(data: bytes) -> None:
    try:
        _, bearer, _ = parse_client_message(data)
    except SaslFailure:
        return
    assert bearer


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=120))
def test_fuzz_token_validation(token: str) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        issuer = JwtIssuer(Path(d))
        try:
            _validator(issuer).validate(token)
        except SaslFailure:
            return
    pytest.fail("a random string validated")
