"""The share-group state persister RPCs (83-87) and FindCoordinator's share key through the
real request path without sockets (support.Broker with StandardAuthorizer and a real share
coordinator): Kafka's codes per partition, ClusterAction required (a principal without it
gets CLUSTER_AUTHORIZATION_FAILED everywhere and nothing is written)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.broker.server import Connection, Server
from odradek.coordinator.runtime import CoordinatorRuntime
from odradek.coordinator.share.coordinator import ShareCoordinator
from odradek.coordinator.share.state_log import TOPIC, ShareKey
from odradek.metadata.controller_requests import CreatableTopic
from odradek.protocol.apis import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import encode_request_header, parse_request_header
from odradek.protocol.messages import decode_response
from odradek.security.principal import KafkaPrincipal, Session
from tests.unit.broker.support import PEER, Broker, _await, _bytes

E = ErrorCode
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    b = Broker(tmp_path_factory.mktemp("share-state"),
               **{"authorizer.class.name": AUTHORIZER, "super.users": "User:ANONYMOUS"})
    b.controller.create_topics([CreatableTopic(TOPIC, 3, 1,
                                               configs={"cleanup.policy": "compact"}),
                                CreatableTopic("data", 2, 1)], False)
    b.rm.load(b.controller.image)
    image = b.controller.image

    def lookup(name: str) -> tuple[uuid.UUID, int] | None:
        t = image.topics_by_name.get(name)
        return None if t is None else (t.topic_id, len(t.partitions))

    def name_of(tid: uuid.UUID) -> str | None:
        t = image.topics_by_id.get(tid)
        return None if t is None else t.name

    runtime = CoordinatorRuntime(b.rm)
    coord = ShareCoordinator(runtime, b.ctx.static_config, lookup, name_of, lambda g: {})
    coord.load_existing(3)
    b.ctx.share_coordinator = coord
    yield b
    b.close()


def _send(b: Broker, principal: str, api_key: int, version: int,
          values: dict[str, Any]) -> Any:
    conn = Connection(Server(b.dispatch, 100 << 20))
    conn.peer = PEER
    conn.session = Session(principal=KafkaPrincipal.parse(principal),
                           client_address=PEER.split(":")[0])
    frame = memoryview(encode_request_header(api_key, version, 7, "t")
                       + b.request(api_key, version, values))
    result = b.dispatch(conn, frame, parse_request_header(frame))
    if not isinstance(result, tuple):
        result = asyncio.run(_await(result))
    _, parts = result
    return decode_response(api_key, version, b"".join(_bytes(p) for p in parts))


def _tid(b: Broker) -> uuid.UUID:
    return b.controller.image.topics_by_name["data"].topic_id  # type: ignore[no-any-return]


def _one(r: Any) -> Any:
    return r.results[0].partitions[0]


def _write(tid: uuid.UUID, partition: int, leader_epoch: int, start: int,
           batches: list[tuple[int, int, int, int]], state_epoch: int = 0) -> dict[str, Any]:
    return {"group_id": "g", "topics": [{"topic_id": tid, "partitions": [{
        "partition": partition, "state_epoch": state_epoch, "leader_epoch": leader_epoch,
        "start_offset": start, "delivery_complete_count": -1, "state_batches": [
            {"first_offset": f, "last_offset": last, "delivery_state": s,
             "delivery_count": c} for f, last, s, c in batches]}]}]}


def _read(tid: uuid.UUID, partition: int, leader_epoch: int) -> dict[str, Any]:
    return {"group_id": "g", "topics": [{"topic_id": tid, "partitions": [
        {"partition": partition, "leader_epoch": leader_epoch}]}]}


def _key_request(key: str) -> dict[str, Any]:
    return {"key_type": 2, "coordinator_keys": [key]}


def test_without_cluster_action_everything_is_refused(broker: Broker) -> None:
    tid = _tid(broker)
    ends = [broker.rm.get(TOPIC, p).log_end_offset for p in range(3)]
    eve = "User:eve"
    calls = [(ApiKey.WRITE_SHARE_GROUP_STATE, 1, _write(tid, 0, 0, 0, [(0, 1, 2, 1)])),
             (ApiKey.READ_SHARE_GROUP_STATE, 0, _read(tid, 0, 0)),
             (ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 1, _read(tid, 0, 0)),
             (ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, {"group_id": "g", "topics": [{
                 "topic_id": tid, "partitions": [
                     {"partition": 0, "state_epoch": 1, "start_offset": 0}]}]}),
             (ApiKey.DELETE_SHARE_GROUP_STATE, 0, {"group_id": "g", "topics": [{
                 "topic_id": tid, "partitions": [{"partition": 0}]}]})]
    for key, version, values in calls:
        assert _one(_send(broker, eve, key, version, values)).error_code == \
            E.cluster_authorization_failed, key
    r = _send(broker, eve, ApiKey.FIND_COORDINATOR, 6,
              _key_request(ShareKey("g", tid, 0).coordinator_key()))
    assert r.coordinators[0].error_code == E.cluster_authorization_failed
    assert [broker.rm.get(TOPIC, p).log_end_offset for p in range(3)] == ends


def test_the_five_apis_answer_as_kafka(broker: Broker) -> None:
    tid = _tid(broker)
    admin = "User:ANONYMOUS"  # a super user: a broker
    w = _send(broker, admin, ApiKey.WRITE_SHARE_GROUP_STATE, 1,
              _write(tid, 1, 5, 10, [(10, 11, 2, 1), (12, 12, 0, 3)]))
    assert _one(w).error_code == E.none
    r = _one(_send(broker, admin, ApiKey.READ_SHARE_GROUP_STATE, 0, _read(tid, 1, 5)))
    assert (r.error_code, r.state_epoch, r.start_offset) == (E.none, 0, 10)
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in r.state_batches] == [(10, 11, 2, 1), (12, 12, 0, 3)]
    # an older leader epoch is fenced; an ACQUIRED batch is not a persisted state
    assert _one(_send(broker, admin, ApiKey.WRITE_SHARE_GROUP_STATE, 1,
                      _write(tid, 1, 4, 10, []))).error_code == E.fenced_leader_epoch
    assert _one(_send(broker, admin, ApiKey.WRITE_SHARE_GROUP_STATE, 0,
                      _write(tid, 1, 5, 10, [(13, 13, 1, 1)]))).error_code == \
        E.invalid_request
    assert _one(_send(broker, admin, ApiKey.READ_SHARE_GROUP_STATE, 0,
                      _read(tid, 9, 5))).error_code == E.unknown_topic_or_partition
    s = _one(_send(broker, admin, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 1, _read(tid, 1, -1)))
    assert (s.error_code, s.start_offset, s.leader_epoch, s.delivery_complete_count) == (
        E.none, 10, 5, 2)
    i = _send(broker, admin, ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, {
        "group_id": "g", "topics": [{"topic_id": tid, "partitions": [
            {"partition": 1, "state_epoch": 1, "start_offset": 40}]}]})
    assert _one(i).error_code == E.none
    assert _one(_send(broker, admin, ApiKey.WRITE_SHARE_GROUP_STATE, 1,
                      _write(tid, 1, 5, 40, []))).error_code == E.fenced_state_epoch
    d = _send(broker, admin, ApiKey.DELETE_SHARE_GROUP_STATE, 0, {
        "group_id": "g", "topics": [{"topic_id": tid, "partitions": [{"partition": 1}]}]})
    assert _one(d).error_code == E.none
    r = _one(_send(broker, admin, ApiKey.READ_SHARE_GROUP_STATE, 0, _read(tid, 1, 6)))
    assert (r.error_code, r.start_offset) == (E.none, -1)
    # a key whose state partition is not owned here: NOT_COORDINATOR, for the persister to
    # look the coordinator up again
    coord = broker.ctx.share_coordinator
    key = ShareKey("g", tid, 0)
    p = coord.store.state_partition(key)
    coord.runtime.unload(TOPIC, [p])
    try:
        assert _one(_send(broker, admin, ApiKey.READ_SHARE_GROUP_STATE, 0,
                          _read(tid, 0, 0))).error_code == E.not_coordinator
    finally:
        coord.runtime.load(TOPIC, [p])


def test_find_coordinator_share_key(broker: Broker) -> None:
    tid = _tid(broker)
    admin = "User:ANONYMOUS"
    r = _send(broker, admin, ApiKey.FIND_COORDINATOR, 6,
              _key_request(ShareKey("g", tid, 0).coordinator_key()))
    c = r.coordinators[0]
    assert (c.error_code, c.node_id, c.port) == (E.none, 1, 9092)
    r = _send(broker, admin, ApiKey.FIND_COORDINATOR, 6, _key_request("no-colons"))
    assert r.coordinators[0].error_code == E.invalid_request
    # the share key type is Kafka 4.0's v6: older versions refuse it
    r = _send(broker, admin, ApiKey.FIND_COORDINATOR, 5, _key_request(
        ShareKey("g", tid, 0).coordinator_key()))
    assert r.coordinators[0].error_code == E.invalid_request


_I64 = st.integers(-(2**63), 2**63 - 1)
_I32 = st.integers(-(2**31), 2**31 - 1)
_SMALL = st.integers(-3, 60)
_BATCH = st.tuples(st.one_of(_SMALL, _I64), st.one_of(_SMALL, _I64),
                   st.integers(-128, 127), st.integers(-(2**15), 2**15 - 1))
_KNOWN = {E.none, E.invalid_request, E.fenced_leader_epoch, E.fenced_state_epoch,
          E.unknown_topic_or_partition, E.not_coordinator}


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(partition=st.one_of(st.integers(-2, 3), _I32), leader_epoch=st.one_of(_SMALL, _I32),
       state_epoch=st.one_of(_SMALL, _I32), start=st.one_of(_SMALL, _I64),
       batches=st.lists(_BATCH, max_size=5))
def test_any_write_gets_a_kafka_code_and_the_state_stays_readable(
        broker: Broker, partition: int, leader_epoch: int, state_epoch: int, start: int,
        batches: list[tuple[int, int, int, int]]) -> None:
    tid = _tid(broker)
    r = _one(_send(broker, "User:ANONYMOUS", ApiKey.WRITE_SHARE_GROUP_STATE, 1,
                   _write(tid, partition, leader_epoch, start, batches, state_epoch)))
    assert r.error_code in _KNOWN, r
    if 0 <= partition < 2:
        # an admin's summary neither fences nor records an epoch: the fuzz goes on writing
        got = _one(_send(broker, "User:ANONYMOUS", ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 1,
                         _read(tid, partition, -1)))
        assert got.error_code == E.none, got
        snap = broker.ctx.share_coordinator.snapshots.get(ShareKey("g", tid, partition))
        if snap is not None:
            assert got.start_offset == snap.start_offset >= 0
            for b in snap.batches:
                assert int(b.state) in (0, 2, 4) and snap.start_offset <= b.first_offset
                assert b.first_offset <= b.last_offset and b.delivery_count >= 0
