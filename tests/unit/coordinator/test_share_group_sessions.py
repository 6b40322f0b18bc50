"""Share-group membership (ShareGroupHeartbeat's rules), share sessions (ShareFetch and
ShareAcknowledge epochs) and the `__share_group_state` snapshot records (round trip, and a
fuzzed decoder that only ever answers a value or ProtocolError)."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.coordinator.share import group_records as gr
from odradek.coordinator.share.group import ShareGroup
from odradek.coordinator.share.partition import RecordState, StateBatch
from odradek.coordinator.share.sessions import SessionError, ShareSessionCache
from odradek.coordinator.share.state_log import (
    ShareKey,
    ShareSnapshot,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.errors import ProtocolError

T1, T2 = uuid.uuid4(), uuid.uuid4()
TOPICS = {"a": (T1, 2), "b": (T2, 3)}


def beat(g: ShareGroup, member: str, epoch: int, topics: list[str] | None = None,
         now: float = 0, lookup: dict | None = None):
    table = TOPICS if lookup is None else lookup
    return g.heartbeat(member, epoch, topics, None, "cid", "/h", now, 45_000, 5_000, 3,
                       table.get)


def test_join_gets_every_partition_and_epochs_move():
    g = ShareGroup("g")
    r1 = beat(g, "m1", 0, ["a"])
    assert (r1.error, r1.member_epoch, r1.assignment) == (E.none, 1, {"a": [0, 1]})
    r2 = beat(g, "m2", 0, ["a", "b"])
    assert r2.member_epoch == 2 and r2.assignment == {"a": [0, 1], "b": [0, 1, 2]}
    # m1 catches up with the group epoch; its assignment did not change: not re-sent
    r = beat(g, "m1", 1)
    assert r.member_epoch == 2 and r.assignment is None
    assert g.state == "Stable"
    assert beat(g, "m1", -1).member_epoch == -1 and "m1" not in g.members
    assert g.group_epoch == 3


def test_heartbeat_errors():
    g = ShareGroup("g")
    assert beat(g, "", 0, ["a"]).error == E.invalid_request
    assert beat(g, "m", 0, None).error == E.invalid_request
    assert beat(g, "m", -2, ["a"]).error == E.invalid_request
    assert beat(g, "x", 3).error == E.unknown_member_id
    beat(g, "m", 0, ["a"])
    assert beat(g, "m", 7).error == E.fenced_member_epoch
    beat(g, "m2", 0, ["a"])
    beat(g, "m3", 0, ["a"])
    assert beat(g, "m4", 0, ["a"]).error == E.group_max_size_reached


def test_topic_appearing_moves_the_epoch_and_reassigns():
    g = ShareGroup("g")
    lookup: dict = {}
    r = beat(g, "m", 0, ["a"], lookup=lookup)
    assert r.assignment == {}
    lookup["a"] = (T1, 4)
    r = beat(g, "m", r.member_epoch, lookup=lookup)
    assert r.assignment == {"a": [0, 1, 2, 3]}


def test_sessions_expire():
    g = ShareGroup("g")
    beat(g, "m1", 0, ["a"], now=0)
    beat(g, "m2", 0, ["a"], now=10_000)
    assert g.next_deadline() == 45_000
    assert g.expire(45_000, TOPICS.get) == ["m1"]
    assert list(g.members) == ["m2"]


def test_share_session_epochs():
    c = ShareSessionCache(max_sessions=1)
    tp = (T1, 0)
    with pytest.raises(SessionError) as e:
        c.fetch("g", "m", 0, [tp], [], has_acks=True)
    assert e.value.code == E.invalid_request
    s, closing = c.fetch("g", "m", 0, [tp], [], has_acks=False)
    assert list(s.partitions) == [tp] and not closing
    with pytest.raises(SessionError) as e:
        c.fetch("g", "m", 5, [], [], has_acks=False)
    assert e.value.code == E.invalid_share_session_epoch and s.next_epoch == 1
    c.fetch("g", "m", 1, [(T2, 1)], [tp], has_acks=True)
    assert list(s.partitions) == [(T2, 1)]
    _, closing = c.acknowledge("g", "m", 2)
    assert not closing and s.next_epoch == 3
    with pytest.raises(SessionError) as e:
        c.acknowledge("g", "m", 0)
    assert e.value.code == E.invalid_share_session_epoch
    with pytest.raises(SessionError) as e:
        c.fetch("g", "other", 0, [], [], has_acks=False)
    assert e.value.code == E.share_session_limit_reached
    with pytest.raises(SessionError) as e:
        c.fetch("g", "other", 1, [], [], has_acks=False)
    assert e.value.code == E.share_session_not_found
    assert c.fetch("g", "m", -1, [], [], has_acks=True)[1]
    assert not c.sessions


def test_snapshot_record_round_trip():
    key = ShareKey("group-é", T1, 7)
    snap = ShareSnapshot(0, 100, (StateBatch(100, 104, RecordState.AVAILABLE, 2),
                                  StateBatch(105, 105, RecordState.ARCHIVED, 5)), 123, 9)
    assert decode_key(encode_key(key)) == key
    assert decode_value(encode_value(snap)) == snap
    # Kafka's SharePartitionKey: the topic id as Kafka's Uuid.toString (url-safe base64)
    fixed = ShareKey("g", uuid.UUID("7d4af586-1103-4a6f-96b7-cfd95b946d87"), 7)
    assert fixed.coordinator_key() == "g:fUr1hhEDSm-Wt8_ZW5Rthw:7"


@given(st.binary(max_size=200))
def test_snapshot_decoders_fuzzed(data: bytes) -> None:
    for decode in (decode_key, decode_value):
        try:
            decode(data)
        except ProtocolError:
            pass


def test_membership_records_round_trip():
    g = ShareGroup("g")
    beat(g, "m1", 0, ["a", "b"])
    beat(g, "m2", 0, ["b"])
    beat(g, "m1", 1)
    ids = {"a": T1, "b": T2}
    records = gr.group_records(g)
    for m in g.members.values():
        records += gr.member_records("g", m, ids)
    records += [(b"\x00\x01junk", b"x")]  # an offset commit's key version: not ours
    restored: dict[str, gr.RestoredGroup] = {}
    assert [gr.apply(restored, k, v) for k, v in records] == [True] * 5 + [False]
    [back] = gr.restore(restored, {T1: "a", T2: "b"}.get, deadline=99)
    assert back.group_epoch == g.group_epoch
    for mid, m in g.members.items():
        r = back.members[mid]
        assert (r.member_epoch, r.subscribed, r.assignment, r.client_id, r.deadline) == \
            (m.member_epoch, m.subscribed, m.assignment, m.client_id, 99)
    # a member's tombstones, then the group's
    for k, v in gr.member_tombstones("g", "m2") + gr.group_tombstone("g"):
        gr.apply(restored, k, v)
    assert restored == {}


@given(st.binary(max_size=120), st.one_of(st.none(), st.binary(max_size=120)))
def test_membership_record_decoder_fuzzed(key: bytes, value: bytes | None) -> None:
    key = b"\x00\x0a" + key  # a share-group key version, then anything
    try:
        gr.apply({}, key, value)
    except ProtocolError:
        pass


def test_state_partition_metadata_outlives_the_members_and_round_trips():
    """The topic-partitions a share group was ever assigned (where its state may be, on any
    node) survive its members leaving and a replay: DeleteGroups deletes their state."""
    g = ShareGroup("g")
    beat(g, "m1", 0, ["a"])
    assert g.note_initialized() and not g.note_initialized()
    beat(g, "m2", 0, ["a", "b"])
    assert g.note_initialized()
    beat(g, "m1", -1)
    beat(g, "m2", -1)
    assert not g.members and not g.note_initialized()
    assert g.initialized == {T1: ("a", frozenset({0, 1})), T2: ("b", frozenset({0, 1, 2}))}
    restored: dict[str, gr.RestoredGroup] = {}
    for k, v in gr.group_records(g) + gr.state_partition_metadata(g):
        assert gr.apply(restored, k, v)
    [back] = gr.restore(restored, {T1: "a", T2: "b"}.get, deadline=99)
    assert back.initialized == g.initialized and not back.members
    for k, v in gr.group_tombstone("g"):
        gr.apply(restored, k, v)
    assert restored == {}


def test_state_partition_metadata_bytes_are_kafkas():
    # ShareGroupStatePartitionMetadataKey (version 15: group id) and Value v0 (flexible):
    # InitializedTopics [TopicId, TopicName, Partitions], DeletingTopics [], tagged fields
    g = ShareGroup("g")
    g.initialized = {T1: ("a", frozenset({1, 0}))}
    [(key, value)] = gr.state_partition_metadata(g)
    assert key == b"\x00\x0f\x00\x01g"
    assert value == (b"\x00\x00" + b"\x02" + T1.bytes + b"\x02a" + b"\x03"
                     + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x01" + b"\x00"
                     + b"\x01" + b"\x00")


@given(st.binary(max_size=120), st.one_of(st.none(), st.binary(max_size=120)))
def test_state_partition_metadata_decoder_fuzzed(key: bytes, value: bytes | None) -> None:
    key = b"\x00\x0f" + key
    try:
        gr.apply({}, key, value)
    except ProtocolError:
        pass
