"""The fixed-layout fetch response encoding is byte for byte the field-by-field one.

`_reference` is the encoder as it was before partitions without aborted transactions were
packed in one struct: every field written on its own, following the schema.
"""

from __future__ import annotations

import os
import struct
import tempfile
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol.fetch import FetchPartitionResponse, FileRegion, encode_fetch_response
from odradek.protocol.primitives import encode_uvarint

VERSIONS = range(4, 19)
_INLINE = 4096


def _reference(version: int, throttle: int, error: int, session: int,
               topics: Sequence[tuple[str, uuid.UUID | None, Sequence[FetchPartitionResponse]]]
               ) -> list[Any]:
    flexible = version >= 12
    parts: list[Any] = []
    out = bytearray(struct.pack(">i", throttle))
    if version >= 7:
        out += struct.pack(">hi", error, session)
    out += encode_uvarint(len(topics) + 1) if flexible else struct.pack(">i", len(topics))
    for name, topic_id, partitions in topics:
        if version >= 13:
            out += (topic_id or uuid.UUID(int=0)).bytes
        else:
            data = name.encode()
            out += encode_uvarint(len(data) + 1) if flexible else struct.pack(">h", len(data))
            out += data
        out += (encode_uvarint(len(partitions) + 1) if flexible
                else struct.pack(">i", len(partitions)))
        for p in partitions:
            out += struct.pack(">ihqq", p.partition, p.error_code, p.high_watermark,
                               p.last_stable_offset)
            if version >= 5:
                out += struct.pack(">q", p.log_start_offset)
            aborted = p.aborted_transactions
            if aborted is None:
                out += b"\x00" if flexible else b"\xff\xff\xff\xff"
            else:
                out += (encode_uvarint(len(aborted) + 1) if flexible
                        else struct.pack(">i", len(aborted)))
                for producer_id, first_offset in aborted:
                    out += struct.pack(">qq", producer_id, first_offset)
                    if flexible:
                        out += b"\x00"
            if version >= 11:
                out += struct.pack(">i", p.preferred_read_replica)
            records = p.records
            size = 0 if records is None else (
                records.size if isinstance(records, FileRegion) else len(records))
            out += encode_uvarint(size + 1) if flexible else struct.pack(">i", size)
            if size:
                if size <= _INLINE and not isinstance(records, FileRegion):
                    out += records
                else:
                    parts.append(bytes(out))
                    out = bytearray()
                    parts.append(records if not isinstance(records, bytearray) else bytes(records))
            if flexible:
                out += b"\x00"
        if flexible:
            out += b"\x00"
    if flexible:
        out += b"\x00"
    if out:
        parts.append(bytes(out))
    return parts


def _flat(parts: list[Any]) -> list[Any]:
    # parts compared as sent: bytes by value, FileRegions by identity of what they name
    return [p if isinstance(p, FileRegion) else bytes(p) for p in parts]


_i32 = st.integers(-(2**31), 2**31 - 1)
_i64 = st.integers(-(2**63), 2**63 - 1)
_partitions = st.lists(st.builds(
    FetchPartitionResponse,
    partition=_i32,
    error_code=st.integers(-(2**15), 2**15 - 1),
    high_watermark=_i64,
    last_stable_offset=_i64,
    log_start_offset=_i64,
    aborted_transactions=st.one_of(st.none(), st.none(), st.lists(st.tuples(_i64, _i64),
                                                                    max_size=3)),
    preferred_read_replica=_i32,
    records=st.one_of(st.none(), st.binary(max_size=300), st.binary(min_size=4090, max_size=4200),
                      st.builds(bytearray, st.binary(max_size=20)),
                      st.builds(memoryview, st.binary(max_size=200)), st.just("file")),
), max_size=4)


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topics=st.lists(st.tuples(st.text(max_size=12), st.one_of(st.none(), st.uuids()),
                                 _partitions), max_size=3),
       throttle=_i32, error=st.integers(-(2**15), 2**15 - 1), session=_i32)
def test_same_bytes_as_field_by_field(version: int, topics: list[Any], throttle: int,
                                      error: int, session: int) -> None:
    with tempfile.TemporaryFile() as f:
        f.write(os.urandom(500))
        f.flush()
        region = FileRegion(f.fileno(), 7, 300)
        topics = [(n, tid, [p._replace(records=region) if isinstance(p.records, str) else p
                            for p in ps]) for n, tid, ps in topics]
        fast = encode_fetch_response(version, throttle, error, session, topics)
        ref = _reference(version, throttle, error, session, topics)
    assert _flat(fast) == _flat(ref)


@pytest.mark.parametrize("version", VERSIONS)
def test_empty_tail_of_six_partitions(version: int) -> None:
    """What a caught-up consumer gets back most of the time."""
    parts = [FetchPartitionResponse(i, 0, 1000 + i, 1000 + i, 3) for i in range(6)]
    topics = [("topic", uuid.uuid4(), parts)]
    assert _flat(encode_fetch_response(version, 0, 0, 0, topics)) == _flat(
        _reference(version, 0, 0, 0, topics))
