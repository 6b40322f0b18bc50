from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.coordinator import offsets_topic as ot
from odradek.protocol.errors import ProtocolError


@pytest.mark.parametrize(("text", "expected"), [
    ("", 0), ("hello", 99162322), ("a", 97), ("Aa", 2112), ("BB", 2112),
    ("polygenelubricants", -2147483648), ("\u00e9t\u00e9", 227742), ("\U0001f600", 1772899)])
def test_java_string_hash(text, expected):
    assert ot.java_string_hash(text) == expected


def test_partition_like_kafka():
    # abs(hashCode) % 50
    assert ot.partition_for("hello", 50) == 99162322 % 50
    # Integer.MIN_VALUE has no abs: Kafka's Utils.abs makes it 0
    assert ot.partition_for("polygenelubricants", 50) == 0
    assert all(0 <= ot.partition_for(f"g{i}", 50) < 50 for i in range(200))


def test_offset_commit_key_and_value_bytes():
    key = ot.encode_key(ot.RecordKey(ot.OFFSET_COMMIT_KEY, "g", "t", 3))
    assert key == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    value = ot.encode_value(ot.OFFSET_COMMIT_KEY, {"offset": 5, "leader_epoch": 2,
                                                   "metadata": "", "commit_timestamp": 9})
    assert value == (b"\x00\x03" + (5).to_bytes(8, "big") + (2).to_bytes(4, "big") + b"\x00\x00"
                     + (9).to_bytes(8, "big"))
    assert ot.decode_key(key) == ot.RecordKey(ot.OFFSET_COMMIT_KEY, "g", "t", 3)
    assert ot.decode_value(ot.OFFSET_COMMIT_KEY, value)["offset"] == 5
    # key version 0 reads as an offset commit
    assert ot.decode_key(b"\x00\x00" + key[2:]).kind == ot.OFFSET_COMMIT_KEY
    assert ot.decode_value(ot.OFFSET_COMMIT_KEY, None) is None


def test_group_metadata_round_trip_all_versions():
    values = {"protocol_type": "consumer", "generation": 4, "protocol": "range", "leader": "m1",
              "current_state_timestamp": 77, "members": [{
                  "member_id": "m1", "group_instance_id": "i", "client_id": "c",
                  "client_host": "/h", "rebalance_timeout": 1, "session_timeout": 2,
                  "subscription": b"s", "assignment": b"a"}]}
    for version in range(5):
        data = ot.encode_value(ot.GROUP_METADATA_KEY, values, version=version)
        back = ot.decode_value(ot.GROUP_METADATA_KEY, data)
        assert back["generation"] == 4 and back["members"][0]["assignment"] == b"a"
        assert back["version"] == version


def test_consumer_group_records_round_trip():
    tid = uuid.uuid4()
    v = {"member_epoch": 3, "previous_member_epoch": 2, "state": 0,
         "assigned_partitions": [{"topic_id": tid, "partitions": [0, 2]}],
         "partitions_pending_revocation": []}
    back = ot.decode_value(ot.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY,
                           ot.encode_value(ot.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY, v))
    assert back["assigned_partitions"] == [{"topic_id": tid, "partitions": [0, 2]}]
    key = ot.RecordKey(ot.CONSUMER_GROUP_MEMBER_METADATA_KEY, "g", member_id="m")
    assert ot.decode_key(ot.encode_key(key)) == key
    assert ot.decode_key(b"\x00\x63\x00\x01g") is None  # a record type we do not know


def test_consumer_protocol_embedded_schemas():
    assert ot.parse_subscription_topics(ot.encode_subscription(["a", "b"])) == ["a", "b"]
    assert ot.parse_assignment(ot.encode_assignment({"a": [0, 1]})) == [("a", [0, 1])]
    assert ot.parse_assignment(b"\x00") == []
    assert ot.parse_subscription_topics(b"\x00\x00\x7f\xff\xff\xff") == []


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_decoders_never_crash(data):
    try:
        key = ot.decode_key(data)
        if key is not None:
            ot.decode_value(key.kind, data)
    except ProtocolError:
        pass
    for kind in ot.VALUE_SCHEMAS:
        try:
            ot.decode_value(kind, data)
        except ProtocolError:
            pass
    # the consumer protocol's embedded bytes come from clients: never an exception
    assert isinstance(ot.parse_subscription_topics(data), list)
    assert isinstance(ot.parse_assignment(data), list)


def test_consumer_member_value_field_order_is_kafkas():
    # ConsumerGroupMemberMetadataValue v0 (flexible): ... SubscribedTopicRegex,
    # RebalanceTimeoutMs, ServerAssignor, then tagged fields; Kafka reads these records from
    # the same bytes, so the order is the format (an assignor-first layout misread both ways)
    value = ot.encode_value(ot.CONSUMER_GROUP_MEMBER_METADATA_KEY, {
        "instance_id": None, "rack_id": None, "client_id": "c", "client_host": "/h",
        "subscribed_topic_names": ["t"], "subscribed_topic_regex": None,
        "rebalance_timeout_ms": 45_000, "server_assignor": "uniform",
        "classic_member_metadata": None})
    assert value == (b"\x00\x00"            # value version 0
                     b"\x00\x00"            # instance_id, rack_id: null compact strings
                     b"\x02c" b"\x03/h"     # client_id, client_host
                     b"\x02\x02t"           # [t]
                     b"\x00"                # subscribed_topic_regex: null
                     + (45_000).to_bytes(4, "big")
                     + b"\x08uniform"
                     + b"\x00")             # no tagged fields
    assert ot.decode_value(ot.CONSUMER_GROUP_MEMBER_METADATA_KEY, value)["server_assignor"] \
        == "uniform"
