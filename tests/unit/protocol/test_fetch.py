"""Fetch response parts decode with kio at every version; request flattening."""

from __future__ import annotations

import os
import tempfile
import uuid
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol.errors import KafkaError, ProtocolError, UnsupportedVersion
from odradek.protocol.fetch import (
    FetchPartitionResponse,
    FileRegion,
    decode_fetch_request,
    encode_fetch_response,
    parts_size,
)
from odradek.protocol.messages import decode_response, request_class
from odradek.protocol.records import Record, build_batch
from tests.unit.protocol.strategies import encode, entities

VERSIONS = range(4, 19)


def _materialize(parts: list, fd_data: dict[int, bytes]) -> bytes:
    out = bytearray()
    for p in parts:
        if isinstance(p, FileRegion):
            out += os.pread(p.fd, p.size, p.position)
        else:
            out += p
    return bytes(out)


_partitions = st.lists(st.builds(
    FetchPartitionResponse,
    partition=st.integers(0, 2**31 - 1),
    error_code=st.sampled_from([0, 1, 3, 6]),
    high_watermark=st.integers(-1, 2**62),
    last_stable_offset=st.integers(-1, 2**62),
    log_start_offset=st.integers(-1, 2**62),
    aborted_transactions=st.one_of(st.none(), st.lists(
        st.tuples(st.integers(0, 2**62), st.integers(0, 2**62)), max_size=2)),
    preferred_read_replica=st.integers(-1, 10),
    records=st.one_of(st.none(), st.binary(max_size=50), st.binary(min_size=5000, max_size=6000),
                      st.just("file")),
), max_size=3)


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topics=st.lists(st.tuples(st.text(max_size=10), st.uuids(), _partitions), max_size=3),
       throttle=st.integers(0, 1000), error=st.sampled_from([0, 70]), session=st.integers(0, 100))
def test_parts_decode_with_kio(version: int, topics: list, throttle: int, error: int, session: int) -> None:
    file_bytes = build_batch([Record(-1, 5, b"k", b"v" * 100)] * 3)
    with tempfile.TemporaryFile() as f:
        f.write(b"JUNK" + file_bytes + b"TAIL")
        f.flush()
        region = FileRegion(f.fileno(), 4, len(file_bytes))

        def resolve(p: FetchPartitionResponse) -> FetchPartitionResponse:
            return p._replace(records=region) if p.records == "file" else p

        topics = [(n, tid, [resolve(p) for p in ps]) for n, tid, ps in topics]
        parts = encode_fetch_response(version, throttle, error, session, topics)
        body = _materialize(parts, {})
        assert parts_size(parts) == len(body)
        # a FileRegion is passed through, never read
        assert all(p is region for p in parts if isinstance(p, FileRegion))
        resp = decode_response(1, version, body)
    assert resp.throttle_time // timedelta(milliseconds=1) == throttle
    if version >= 7:
        assert (int(resp.error_code), int(resp.session_id)) == (error, session)
    assert len(resp.responses) == len(topics)
    for t, (name, tid, ps) in zip(resp.responses, topics, strict=True):
        if version >= 13:
            assert t.topic_id == tid
        else:
            assert t.topic == name
        for got, want in zip(t.partitions, ps, strict=True):
            assert (int(got.partition_index), int(got.error_code), int(got.high_watermark),
                    int(got.last_stable_offset)) == (want.partition, want.error_code,
                                                     want.high_watermark, want.last_stable_offset)
            if version >= 5:
                assert int(got.log_start_offset) == want.log_start_offset
            if version >= 11:
                assert int(got.preferred_read_replica) == want.preferred_read_replica
            aborted = None if got.aborted_transactions is None else [
                (int(a.producer_id), int(a.first_offset)) for a in got.aborted_transactions]
            assert aborted == (None if want.aborted_transactions is None else list(want.aborted_transactions))
            if isinstance(want.records, FileRegion):
                assert bytes(got.records) == file_bytes
            else:
                assert bytes(got.records or b"") == (want.records or b"")


def test_big_records_are_separate_parts_and_views_stay_views() -> None:
    big = memoryview(bytes(100_000))
    parts = encode_fetch_response(11, 0, 0, 0, [("t", None, [FetchPartitionResponse(0, 0, 5, records=big)])])
    assert any(p is big for p in parts)


def test_unsupported_versions() -> None:
    for v in (3, 19):
        with pytest.raises(UnsupportedVersion):
            encode_fetch_response(v, 0, 0, 0, [])
        with pytest.raises(UnsupportedVersion):
            decode_fetch_request(b"", 0, v)


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_request_flattening(version: int, data: st.DataObject) -> None:
    entity = data.draw(entities(request_class(1, version)))
    req = decode_fetch_request(b"xx" + encode(entity), 2, version)
    assert req.max_wait_ms == entity.max_wait // timedelta(milliseconds=1)
    assert req.min_bytes == entity.min_bytes
    assert len(req.topics) == len(entity.topics)
    for ours, theirs in zip(req.topics, entity.topics, strict=True):
        if version >= 13:
            assert ours.topic_id == theirs.topic_id and ours.name is None
        else:
            assert ours.name == theirs.topic
        assert [(p.partition, p.fetch_offset, p.partition_max_bytes) for p in ours.partitions] == [
            (p.partition, p.fetch_offset, p.partition_max_bytes) for p in theirs.partitions]
    if version >= 15:
        assert req.replica_id == entity.replica_state.replica_id
    else:
        assert req.replica_id == entity.replica_id


@settings(max_examples=200, deadline=None)
@given(version=st.sampled_from(list(VERSIONS)), junk=st.binary(max_size=120))
def test_fuzz_request(version: int, junk: bytes) -> None:
    try:
        decode_fetch_request(junk, 0, version)
    except (ProtocolError, KafkaError):
        pass


def test_uuid_zero_for_missing_topic_id() -> None:
    parts = encode_fetch_response(13, 0, 0, 0, [("t", None, [])])
    resp = decode_response(1, 13, b"".join(bytes(p) for p in parts))
    assert resp.responses[0].topic_id in (None, uuid.UUID(int=0))
