"""Issue 16: refusals are clean and the node keeps serving others.

A wrong password, an unknown user, an expired token, an unsupported mechanism: answered
(SASL_AUTHENTICATION_FAILED / UNSUPPORTED_SASL_MECHANISM) and then disconnected. A request
before authentication: disconnected. A plaintext client on a TLS port and a TLS client
without a certificate under ssl.client.auth=required: the handshake fails and the
connection closes. After each, good clients are served.
"""

from __future__ import annotations

import socket
import ssl
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from tests.integration.security_support import USERS, SecuredNode, start_secured
from tests.support import requests
from tests.support.wire import Conn, Disconnected, frame, request_payload

SASL_AUTHENTICATION_FAILED = 58
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredNode]:
    s = start_secured(tmp_path_factory.mktemp("refusals"))
    yield s
    assert s.node.stop() == 0, s.node.log()


def _served(s: SecuredNode) -> None:
    """The node is up and a good SCRAM client produces."""
    assert s.node.alive(), s.node.log()
    producer = Producer(s.sasl_ssl("SCRAM-SHA-512"))
    producer.produce("after-refusal", uuid.uuid4().bytes)
    assert producer.flush(30) == 0


def _plain(user: str, password: str) -> bytes:
    return f"\0{user}\0{password}".encode()


def _sasl_conn(s: SecuredNode) -> Conn:
    return Conn(s.ports["SASL_PLAINTEXT"])


@pytest.mark.parametrize("user,password", [("admin", "wrong-password"),
                                           ("nobody", "whatever")])
def test_bad_credentials_answered_then_closed(secured: SecuredNode, user: str,
                                              password: str) -> None:
    with _sasl_conn(secured) as conn:
        assert conn.request(SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
        answer = conn.request(SaslAuthenticateRequest(auth_bytes=_plain(user, password)))
        assert answer.error_code == SASL_AUTHENTICATION_FAILED
        assert answer.error_message and password not in answer.error_message
        assert conn.wait_closed(), "the node kept a connection that failed authentication"
    _served(secured)


def test_scram_unknown_user_refused(secured: SecuredNode) -> None:
    with _sasl_conn(secured) as conn:
        assert conn.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256")).error_code == 0
        answer = conn.request(SaslAuthenticateRequest(auth_bytes=b"n,,n=nobody,r=abcdefgh"))
        assert answer.error_code == SASL_AUTHENTICATION_FAILED
        assert conn.wait_closed()
    _served(secured)


def test_confluent_wrong_password_gets_authentication_error(secured: SecuredNode) -> None:
    errors: list[str] = []
    producer = Producer({**secured.sasl_ssl("SCRAM-SHA-256", "alice", "not-her-password"),
                         "error_cb": lambda e: errors.append(e.name())})
    producer.produce("never", b"x")
    deadline = time.monotonic() + 30
    while "_AUTHENTICATION" not in errors and time.monotonic() < deadline:
        producer.poll(0.2)
    if "_AUTHENTICATION" not in errors:
        pytest.fail(f"no authentication error reported: {errors}")
    producer.purge()
    _served(secured)


def test_expired_token_refused(secured: SecuredNode) -> None:
    token = secured.issuer.token("service-b", lifetime_s=-120)
    with Conn(secured.ports["SASL_PLAINTEXT"]) as conn:
        assert conn.request(SaslHandshakeRequest(mechanism="OAUTHBEARER")).error_code == 0
        answer = conn.request(SaslAuthenticateRequest(
            auth_bytes=f"n,,\x01auth=Bearer {token}\x01\x01".encode()))
        assert answer.error_code == SASL_AUTHENTICATION_FAILED
        assert "expired" in (answer.error_message or "")
        assert conn.wait_closed()
    _served(secured)


def test_token_signed_by_another_key_refused(secured: SecuredNode, tmp_path) -> None:
    from tests.support.jwt_tokens import JwtIssuer

    other = JwtIssuer(tmp_path, kid=secured.issuer.kid, issuer=secured.issuer.issuer)
    with Conn(secured.ports["SASL_PLAINTEXT"]) as conn:
        assert conn.request(SaslHandshakeRequest(mechanism="OAUTHBEARER")).error_code == 0
        answer = conn.request(SaslAuthenticateRequest(
            auth_bytes=f"n,,\x01auth=Bearer {other.token('mallory')}\x01\x01".encode()))
        assert answer.error_code == SASL_AUTHENTICATION_FAILED
        assert conn.wait_closed()


def test_unsupported_mechanism_answered_then_closed(secured: SecuredNode) -> None:
    with _sasl_conn(secured) as conn:
        answer = conn.request(SaslHandshakeRequest(mechanism="GSSAPI"))
        assert answer.error_code == UNSUPPORTED_SASL_MECHANISM
        assert set(answer.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512",
                                          "OAUTHBEARER"}
        assert conn.wait_closed()


def test_request_before_authentication_disconnects(secured: SecuredNode) -> None:
    with _sasl_conn(secured) as conn:
        versions = conn.request(requests.api_versions_v3())  # allowed before auth
        keys = {k.api_key for k in versions.api_keys}
        assert {17, 36} <= keys
        conn.send(frame(request_payload(requests.metadata_v9(None), 99)))
        assert conn.wait_closed(), "Metadata before SASL authentication was not refused"
    _served(secured)


def test_sasl_handshake_on_plaintext_listener_is_illegal_state(secured: SecuredNode) -> None:
    with Conn(secured.ports["PLAINTEXT"]) as conn:
        answer = conn.request(SaslHandshakeRequest(mechanism="PLAIN"))
        assert answer.error_code == ILLEGAL_SASL_STATE


def test_good_authentication_then_requests(secured: SecuredNode) -> None:
    with _sasl_conn(secured) as conn:
        assert conn.request(SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
        answer = conn.request(SaslAuthenticateRequest(
            auth_bytes=_plain("alice", USERS["alice"])))
        assert answer.error_code == 0
        meta = conn.request(requests.metadata_v9(None))
        assert meta.brokers and meta.brokers[0].port == secured.ports["SASL_PLAINTEXT"]


def test_plaintext_client_on_tls_port(secured: SecuredNode) -> None:
    for listener in ("MTLS", "SASL_SSL"):
        with Conn(secured.ports[listener]) as conn:
            conn.send(frame(request_payload(requests.api_versions_v3(), 1)))
            try:
                closed = conn.wait_closed()
            except OSError:
                closed = True
            assert closed, f"a plaintext client was kept on the {listener} listener"
    _served(secured)


def _tls_client(secured: SecuredNode, with_cert: bool) -> ssl.SSLSocket:
    ctx = ssl.create_default_context(cafile=str(secured.ca.ca_pem))
    if with_cert:
        ctx.load_cert_chain(str(secured.client.cert), str(secured.client.key))
    raw = socket.create_connection(("127.0.0.1", secured.ports["MTLS"]), timeout=10)
    return ctx.wrap_socket(raw, server_hostname="localhost")


def test_tls_client_without_certificate_refused_under_required(secured: SecuredNode) -> None:
    refused = False
    try:
        sock = _tls_client(secured, with_cert=False)
        # TLS 1.3: the server judges the certificate after the client's handshake is done;
        # the refusal arrives at the first read
        sock.sendall(frame(request_payload(requests.api_versions_v3(), 1)))
        refused = sock.recv(65536) == b""
    except (ssl.SSLError, OSError, Disconnected):
        refused = True
    assert refused, "a TLS client without a certificate was served under required"
    # the same listener serves a client with a certificate
    sock = _tls_client(secured, with_cert=True)
    try:
        sock.sendall(frame(request_payload(requests.api_versions_v3(), 7)))
        data = b""
        while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
            chunk = sock.recv(65536)
            assert chunk, "the node closed a connection with a valid client certificate"
            data += chunk
        assert int.from_bytes(data[4:8], "big") == 7  # the ApiVersions answer
    finally:
        sock.close()
    _served(secured)
