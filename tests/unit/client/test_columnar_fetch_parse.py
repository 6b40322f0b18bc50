"""The columnar consumer's own Fetch v11 response reader (fetcher.parse_fetch) against kio's
encoder, and under fuzzing."""

from __future__ import annotations

import struct
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v11.response import (
    AbortedTransaction,
    FetchableTopicResponse,
    FetchResponse,
    PartitionData,
)
from kio.static.primitive import i32, i32Timedelta, i64

from odradek.client.fetcher import Fetched, parse_fetch
from odradek.protocol.errors import ProtocolError
from odradek.protocol.messages import encode_response

codes = st.sampled_from([0, 1, 3, 6, 74])
i64s = st.integers(-1, 2**62)
aborted = st.one_of(st.none(), st.lists(st.tuples(st.integers(0, 2**40), i64s), max_size=3))
partition = st.tuples(st.integers(0, 5), codes, i64s, i64s, i64s, aborted,
                      st.one_of(st.none(), st.binary(max_size=64)))
topics = st.lists(st.tuples(st.sampled_from(["a", "b", "tópico"]),
                            st.lists(partition, max_size=4)), max_size=3)


def frame(error: int, spec: list, corr: int = 7) -> bytes:
    resp = FetchResponse(
        throttle_time=i32Timedelta.parse(timedelta(milliseconds=0)),
        error_code=ErrorCode(error), session_id=i32(0),
        responses=tuple(FetchableTopicResponse(topic=name, partitions=tuple(
            PartitionData(partition_index=i32(idx), error_code=ErrorCode(code),
                          high_watermark=i64(hw), last_stable_offset=i64(lso),
                          log_start_offset=i64(start),
                          aborted_transactions=None if ab is None else tuple(
                              AbortedTransaction(producer_id=i64(pid), first_offset=i64(first))
                              for pid, first in ab),
                          records=recs)
            for idx, code, hw, lso, start, ab, recs in parts))
                        for name, parts in spec))
    return struct.pack(">i", corr) + encode_response(resp)


def expected(spec: list, topic: str, index: int) -> Fetched | None:
    for name, parts in spec:
        for idx, code, hw, lso, start, ab, recs in parts:
            if name == topic and idx == index:
                return Fetched(code, hw, lso, start, list(ab or []), recs or b"")
    return None


@given(topics, st.sampled_from(["a", "b", "tópico"]), st.integers(0, 5))
@settings(max_examples=200, deadline=None)
def test_reads_what_kio_wrote(spec: list, topic: str, index: int) -> None:
    data = frame(0, spec)
    want = expected(spec, topic, index)
    for buf in (data, memoryview(bytearray(data)).toreadonly()):
        if want is None:
            with pytest.raises(ConnectionError):
                parse_fetch(buf, topic, index)
            continue
        got = parse_fetch(buf, topic, index)
        assert got._replace(records=bytes(got.records)) == want
        if isinstance(buf, memoryview):
            assert got.records.obj is buf.obj  # a view, not a copy


def test_a_top_level_error_is_returned_as_is() -> None:
    got = parse_fetch(frame(3, [("a", [(0, 0, 1, 1, 0, None, b"x")])]), "a", 0)
    assert got == Fetched(3, -1, -1, -1, [], b"")


@given(topics, st.data())
@settings(max_examples=300, deadline=None)
def test_damaged_frames_raise_protocol_or_connection_errors_only(spec: list,
                                                                 data: st.DataObject) -> None:
    raw = bytearray(frame(0, spec))
    for _ in range(data.draw(st.integers(0, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        raw = raw[:data.draw(st.integers(0, len(raw)))]
    try:
        got = parse_fetch(bytes(raw), "a", data.draw(st.integers(0, 5)))
    except (ProtocolError, ConnectionError):
        return
    # Whatever parses points inside the frame.
    assert len(got.records) <= len(raw)


@given(st.binary(max_size=200))
@settings(max_examples=300, deadline=None)
def test_random_bytes_raise_protocol_or_connection_errors_only(raw: bytes) -> None:
    try:
        parse_fetch(raw, "a", 0)
    except (ProtocolError, ConnectionError):
        pass
