"""Hand-written produce codec against kio (v3+) and a hand encoder (v0-2)."""

from __future__ import annotations

import struct
import uuid
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol.errors import KafkaError, ProtocolError, UnsupportedVersion
from odradek.protocol.messages import decode_response, request_class
from odradek.protocol.primitives import Reader, Writer
from odradek.protocol.produce import (
    PartitionResult,
    decode_produce_request,
    encode_produce_response,
)
from odradek.protocol.records import Record, build_batch
from tests.unit.protocol.strategies import encode, entities

_settings = settings(max_examples=15, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _plain_kio(req) -> tuple:
    return (
        getattr(req, "transactional_id", None),
        int(req.acks),
        req.timeout // timedelta(milliseconds=1),
        [((t.topic_id or uuid.UUID(int=0)) if hasattr(t, "topic_id") else t.name,
          [(int(p.index), None if p.records is None else bytes(p.records))
                   for p in t.partition_data]) for t in req.topic_data],
    )


def _plain_ours(req) -> tuple:
    return (
        req.transactional_id,
        req.acks,
        req.timeout_ms,
        [(t.name if t.topic_id is None else t.topic_id, [(i, None if r is None else bytes(r)) for i, r in t.partitions])
         for t in req.topics],
    )


@pytest.mark.parametrize("version", range(3, 14))
@_settings
@given(data=st.data())
def test_request_matches_kio(version: int, data: st.DataObject) -> None:
    entity = data.draw(entities(request_class(0, version)))
    raw = b"HDR" + encode(entity)
    assert _plain_ours(decode_produce_request(memoryview(raw), 3, version)) == _plain_kio(entity)


def test_records_are_views_into_the_frame() -> None:
    batch = build_batch([Record(-1, 1, b"k", b"v")])
    w = Writer()
    w.write_nullable_string(None)
    w.write_int16(1)
    w.write_int32(1000)
    w.write_array_len(1)
    w.write_string("t")
    w.write_array_len(1)
    w.write_int32(0)
    w.write_bytes_(batch)
    frame = memoryview(w.getvalue())
    req = decode_produce_request(frame, 0, 7)
    view = req.topics[0].partitions[0][1]
    assert isinstance(view, memoryview) and view.obj is frame.obj and bytes(view) == batch


def _encode_v0_2(acks: int, timeout: int, topics: list) -> bytes:
    w = Writer()
    w.write_int16(acks)
    w.write_int32(timeout)
    w.write_array_len(len(topics))
    for name, parts in topics:
        w.write_string(name)
        w.write_array_len(len(parts))
        for index, records in parts:
            w.write_int32(index)
            w.write_nullable_bytes(records)
    return w.getvalue()


@pytest.mark.parametrize("version", [0, 1, 2])
@_settings
@given(acks=st.sampled_from([-1, 0, 1]), timeout=st.integers(0, 2**31 - 1),
       topics=st.lists(st.tuples(st.text(min_size=1, max_size=10), st.lists(
           st.tuples(st.integers(0, 100), st.one_of(st.none(), st.binary(max_size=30))), max_size=3)),
           max_size=3))
def test_request_v0_2(version: int, acks: int, timeout: int, topics: list) -> None:
    raw = _encode_v0_2(acks, timeout, topics)
    req = decode_produce_request(raw, 0, version)
    assert _plain_ours(req) == (None, acks, timeout, topics)


_results = st.lists(st.tuples(st.text(max_size=10), st.lists(st.builds(
    PartitionResult,
    index=st.integers(0, 2**31 - 1),
    error_code=st.sampled_from([0, 2, 3, 10, 87]),
    base_offset=st.integers(-1, 2**62),
    log_append_time_ms=st.one_of(st.just(-1), st.integers(0, 2**41)),
    log_start_offset=st.integers(-1, 2**62),
    record_errors=st.lists(st.tuples(st.integers(0, 100), st.one_of(st.none(), st.text(max_size=10))),
                           max_size=2),
    error_message=st.one_of(st.none(), st.text(max_size=10)),
), max_size=3)), max_size=3)


@pytest.mark.parametrize("version", range(3, 14))
@_settings
@given(topics=_results, throttle=st.integers(0, 2**31 - 1))
def test_response_decodes_with_kio(version: int, topics: list, throttle: int) -> None:
    if version >= 13:  # v13 names topics by id
        topics = [(uuid.uuid5(uuid.NAMESPACE_DNS, name), parts) for name, parts in topics]
    raw = encode_produce_response(version, topics, throttle)
    resp = decode_response(0, version, raw)
    assert resp.throttle_time // timedelta(milliseconds=1) == throttle
    got = []
    for t in resp.responses:
        parts = []
        for p in t.partition_responses:
            lat = -1 if p.log_append_time is None else round(p.log_append_time.timestamp() * 1000)
            row = [int(p.index), int(p.error_code), int(p.base_offset)]
            row.append(lat if version >= 2 else -1)
            row.append(int(p.log_start_offset) if version >= 5 else -1)
            if version >= 8:
                row.append([(int(e.batch_index), e.batch_index_error_message) for e in p.record_errors])
                row.append(p.error_message)
            parts.append(row)
        got.append((t.topic_id if version >= 13 else t.name, parts))
    want = []
    for name, parts in topics:
        rows = []
        for p in parts:
            row = [p.index, p.error_code, p.base_offset,
                   p.log_append_time_ms if version >= 2 else -1,
                   p.log_start_offset if version >= 5 else -1]
            if version >= 8:
                row += [list(p.record_errors), p.error_message]
            rows.append(row)
        want.append((name, rows))
    assert got == want


@pytest.mark.parametrize("version", [0, 1, 2])
def test_response_v0_2_layout(version: int) -> None:
    raw = encode_produce_response(version, [("t", [PartitionResult(3, 0, 42, 1234, 5)])], 9)
    r = Reader(raw)
    assert r.array_len() == 1 and r.string() == "t" and r.array_len() == 1
    assert (r.int32(), r.int16(), r.int64()) == (3, 0, 42)
    if version >= 2:
        assert r.int64() == 1234
    if version >= 1:
        assert r.int32() == 9
    assert r.remaining() == 0


def test_unsupported_version() -> None:
    with pytest.raises(UnsupportedVersion):
        decode_produce_request(b"", 0, 14)
    with pytest.raises(UnsupportedVersion):
        encode_produce_response(-1, [])


def test_records_length_beyond_frame() -> None:
    raw = _encode_v0_2(1, 1000, [("t", [(0, b"abc")])])
    bad = bytearray(raw)
    struct.pack_into(">i", bad, len(bad) - 7, 2**31 - 1)
    with pytest.raises(ProtocolError):
        decode_produce_request(bytes(bad), 0, 2)


@settings(max_examples=300, deadline=None)
@given(version=st.integers(0, 13), junk=st.binary(max_size=120))
def test_fuzz_random(version: int, junk: bytes) -> None:
    try:
        decode_produce_request(junk, 0, version)
    except ProtocolError:
        pass


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(version=st.integers(3, 13), data=st.data())
def test_fuzz_mutated(version: int, data: st.DataObject) -> None:
    raw = bytearray(encode(data.draw(entities(request_class(0, version)))))
    for _ in range(data.draw(st.integers(1, 3))):
        if raw:
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    del raw[data.draw(st.integers(0, len(raw))):]
    try:
        decode_produce_request(bytes(raw), 0, version)
    except (ProtocolError, KafkaError):
        pass
