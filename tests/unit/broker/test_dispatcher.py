"""The dispatcher without sockets: routing by api key, versions it does not serve, malformed
requests (a clean disconnect and one refusal line), and the response header versions."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.broker.transport_signals import Disconnect
from odradek.protocol.apis import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import parse_request_header
from odradek.protocol.messages import decode_response
from tests.unit.broker.support import PEER, Broker

API_VERSIONS_BODY = {"client_software_name": "t", "client_software_version": "1"}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path)
    yield b
    b.close()


@pytest.fixture
def refusals(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="odradek.refusals")
    return caplog


def refusal_lines(caplog: pytest.LogCaptureFixture, client: str) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "odradek.refusals" and repr(client) in r.getMessage()]


def client() -> str:
    # the refusal log counts repeats per client: a fresh id per test keeps each line visible
    return f"c-{uuid.uuid4().hex[:8]}"


def test_each_api_key_goes_to_its_handler(broker: Broker) -> None:
    versions = broker.call(ApiKey.API_VERSIONS, 3, API_VERSIONS_BODY)
    assert versions.error_code == ErrorCode.none
    broker.create("routed", 2)
    meta = broker.call(ApiKey.METADATA, 8, {"topics": [{"name": "routed"}],
                                             "allow_auto_topic_creation": False,
                                             "include_cluster_authorized_operations": False,
                                             "include_topic_authorized_operations": False})
    assert [(t.name, len(t.partitions)) for t in meta.topics] == [("routed", 2)]
    cluster = broker.call(ApiKey.DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations":
                                                       False})
    assert cluster.cluster_id == "cid" and [b.broker_id for b in cluster.brokers] == [1]


def test_an_api_not_served_closes_the_connection_with_one_line(
        broker: Broker, refusals: pytest.LogCaptureFixture) -> None:
    cid = client()
    # RenewDelegationToken v1: a Kafka API this node has no handler for (no delegation tokens)
    frame = broker.frame(ApiKey.RENEW_DELEGATION_TOKEN, 1, b"\x00\x00\x00\x00", client_id=cid)
    with pytest.raises(Disconnect):
        broker.raw(frame)
    lines = refusal_lines(refusals, cid)
    assert len(lines) == 1
    assert "RENEW_DELEGATION_TOKEN v1" in lines[0] and "UNSUPPORTED_VERSION" in lines[0]
    assert PEER in lines[0]


def test_a_version_not_served_closes_the_connection_with_one_line(
        broker: Broker, refusals: pytest.LogCaptureFixture) -> None:
    cid = client()
    lo, hi = broker.ctx.advertised_apis[ApiKey.FETCH]
    for version in (lo - 1, hi + 1):
        with pytest.raises(Disconnect):
            broker.raw(broker.frame(ApiKey.FETCH, version, b"", client_id=cid))
    lines = refusal_lines(refusals, cid)
    assert len(lines) == 2
    assert all(f"serves versions {lo}-{hi}" in line for line in lines)
    assert f"FETCH v{lo - 1}" in lines[0] and f"FETCH v{hi + 1}" in lines[1]


def test_api_versions_of_an_unknown_version_answers_v0_with_the_table(broker: Broker) -> None:
    answer = broker.raw(broker.frame(ApiKey.API_VERSIONS, 99, b"\x00\x00\x00"))
    assert answer is not None
    header_version, body = answer
    assert header_version == 0  # so any client can read it
    r = decode_response(ApiKey.API_VERSIONS, 0, body)
    assert r.error_code == ErrorCode.unsupported_version
    assert {k.api_key: (k.min_version, k.max_version) for k in r.api_keys} == \
        broker.ctx.advertised_apis


def test_a_malformed_request_is_a_clean_disconnect_and_one_line(
        broker: Broker, refusals: pytest.LogCaptureFixture) -> None:
    cid = client()
    body = broker.request(ApiKey.METADATA, 12, {"topics": [{"name": "x", "topic_id": uuid.UUID(
        int=0)}], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False})
    with pytest.raises(Disconnect):
        broker.raw(broker.frame(ApiKey.METADATA, 12, body[:5], client_id=cid))
    lines = refusal_lines(refusals, cid)
    assert len(lines) == 1
    assert "METADATA v12" in lines[0] and "INVALID_REQUEST" in lines[0]
    # the node still answers the next request
    assert broker.call(ApiKey.API_VERSIONS, 3, API_VERSIONS_BODY).error_code == ErrorCode.none


@pytest.mark.parametrize(("api_key", "version", "request_header", "response_header"), [
    (ApiKey.API_VERSIONS, 0, 1, 0),
    (ApiKey.API_VERSIONS, 3, 2, 0),  # flexible, but the response header stays v0
    (ApiKey.METADATA, 8, 1, 0),
    (ApiKey.METADATA, 9, 2, 1),
    (ApiKey.DESCRIBE_CLUSTER, 0, 2, 1),
])
def test_request_and_response_header_versions(broker: Broker, api_key: ApiKey, version: int,
                                              request_header: int, response_header: int) -> None:
    values = {
        ApiKey.API_VERSIONS: API_VERSIONS_BODY,
        ApiKey.METADATA: {"topics": [], "allow_auto_topic_creation": False,
                          "include_cluster_authorized_operations": False,
                          "include_topic_authorized_operations": False},
        ApiKey.DESCRIBE_CLUSTER: {"include_cluster_authorized_operations": False},
    }[api_key]
    frame = broker.frame(api_key, version, broker.request(api_key, version, values))
    # header v1: 8 fixed bytes and the client id "t"; v2 adds an (empty) tag buffer
    header = parse_request_header(memoryview(frame))
    assert header.body_offset == {1: 11, 2: 12}[request_header]
    answer = broker.raw(frame)
    assert answer is not None and answer[0] == response_header
    decode_response(api_key, version, answer[1])  # the whole body reads at this version
