from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.metadata.records import (
    RECORD_TYPES,
    ConfigRecord,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    TopicRecord,
    decode_record,
    encode_record,
)
from odradek.protocol.errors import ProtocolError

_INTS = {
    "int8": st.integers(-(2**7), 2**7 - 1),
    "int16": st.integers(-(2**15), 2**15 - 1),
    "uint16": st.integers(0, 2**16 - 1),
    "int32": st.integers(-(2**31), 2**31 - 1),
    "int64": st.integers(-(2**63), 2**63 - 1),
}
_UUIDS = st.uuids(allow_nil=True)


def _strategy(kind):
    if isinstance(kind, type):
        return st.lists(_struct(kind), max_size=3)
    if kind in _INTS:
        return _INTS[kind]
    return {
        "bool": st.booleans(),
        "uuid": _UUIDS,
        "string": st.text(max_size=20),
        "nstring": st.none() | st.text(max_size=20),
        "int32s": st.lists(_INTS["int32"], max_size=5),
        "nint32s": st.none() | st.lists(_INTS["int32"], max_size=5),
        "uuids": st.lists(_UUIDS, max_size=3),
        "nuuids": st.none() | st.lists(_UUIDS, max_size=3),
        "float64": st.floats(allow_nan=False),  # ClientQuotaRecord.value
        "bytes": st.binary(max_size=64),  # UserScramCredentialRecord (sasl)
    }[kind]


def _struct(cls):
    # fields newer than the version we write keep their defaults
    written = getattr(cls, "VERSION", 0)
    return st.builds(
        cls, **{f.attr: _strategy(f.kind) for f in cls.FIELDS if f.versions <= written}
    )


ANY_RECORD = st.one_of(*[_struct(cls) for cls in RECORD_TYPES.values()])


@settings(max_examples=150, deadline=None)
@given(ANY_RECORD)
def test_round_trip(record: MetadataRecord):
    assert decode_record(encode_record(record)) == record


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=80))
def test_decoder_raises_only_protocol_error(data: bytes):
    try:
        decode_record(data)
    except ProtocolError:
        pass


@settings(max_examples=100, deadline=None)
@given(ANY_RECORD, st.data())
def test_truncated_record_is_refused(record: MetadataRecord, data):
    encoded = encode_record(record)
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(ProtocolError):
        decode_record(encoded[:cut])


def test_kafka_framing_of_a_topic_record():
    topic_id = uuid.UUID("00000000-0000-0000-0000-000000000002")
    encoded = encode_record(TopicRecord("ab", topic_id))
    # frame version 1, api key 2, version 0, compact string "ab", uuid, no tagged fields
    assert encoded == bytes([1, 2, 0, 3]) + b"ab" + topic_id.bytes + b"\x00"
    assert encode_record(NoOpRecord()) == bytes([1, 20, 0, 0])


def test_tagged_fields_are_written_only_when_set():
    topic_id = uuid.uuid4()
    unchanged = encode_record(PartitionChangeRecord(0, topic_id))
    assert unchanged.endswith(b"\x00")
    with_leader = encode_record(PartitionChangeRecord(0, topic_id, leader=3))
    assert len(with_leader) > len(unchanged)
    assert decode_record(with_leader).leader == 3


def test_null_config_value_means_delete():
    rec = ConfigRecord(2, "t", "retention.ms", None)
    assert decode_record(encode_record(rec)).value is None


def test_unknown_type_and_frame_are_refused():
    with pytest.raises(ProtocolError):
        decode_record(bytes([1, 99, 0, 0]))
    with pytest.raises(ProtocolError):
        decode_record(bytes([2, 20, 0, 0]))
    with pytest.raises(ProtocolError):
        decode_record(bytes([1, 20, 9, 0]))
