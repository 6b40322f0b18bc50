"""Broker-side schema ID validation without a node: the record scanner and the verdicts."""

from __future__ import annotations

import struct
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.broker.schema_validation import (
    NEGATIVE_TTL_S,
    SchemaValidation,
    record_prefixes,
)
from odradek.protocol.errors import ProtocolError
from odradek.protocol.records import BatchHeader, Compression, Record, build_batch
from odradek.storage.cleaner.batches import batch_body

blobs = st.one_of(st.none(), st.binary(max_size=300))
headers = st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=8))),
                   max_size=3)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(blobs, blobs, headers), min_size=1, max_size=30),
       st.sampled_from([Compression.NONE, Compression.GZIP, Compression.ZSTD]))
def test_prefixes_are_the_first_five_bytes_of_each_key_and_value(
        items: list[tuple[bytes | None, bytes | None, list]], codec: int) -> None:
    batch = build_batch([Record(i, 1000 + i, k, v, h) for i, (k, v, h) in enumerate(items)],
                        compression=codec)
    h = BatchHeader.parse(memoryview(batch))
    got = record_prefixes(batch_body(h, memoryview(batch)), h.records_count)
    assert got == [(None if k is None else k[:5], None if v is None else v[:5])
                   for k, v, _ in items]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(0, 50))
def test_garbage_raises_only_protocol_errors(body: bytes, count: int) -> None:
    try:
        record_prefixes(body, count)
    except (ProtocolError, IndexError):
        pass


def _wire(schema_id: int) -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + b"payload"


def _records(*values: bytes | None) -> memoryview:
    return memoryview(build_batch([Record(i, 0, b"k", v) for i, v in enumerate(values)]))


def test_unknown_ids_are_asked_for_then_judged_from_the_cache() -> None:
    sv = SchemaValidation([])
    verdict = sv.judge("t", (False, True), _records(_wire(1), _wire(2), None, b"raw"))
    assert verdict.missing == {("t-value", 1), ("t-value", 2)}
    assert [i for i, _ in verdict.errors] == [3]  # not the wire format: no lookup needed
    far = time.monotonic() + 60
    sv._cache[("t-value", 1)] = (True, far)
    sv._cache[("t-value", 2)] = (False, far)
    verdict = sv.judge("t", (False, True), _records(_wire(1), _wire(2), None, b"raw", _wire(1)))
    assert verdict.missing == frozenset()
    assert [i for i, _ in verdict.errors] == [1, 3]
    assert "not registered under subject t-value" in verdict.errors[0][1]
    # keys are judged only when asked, against <topic>-key
    keyed = memoryview(build_batch([Record(0, 0, _wire(1), b"anything")]))
    verdict = sv.judge("t", (True, False), keyed)
    assert verdict.missing == {("t-key", 1)} and verdict.errors == ()


def test_a_refusal_is_remembered_only_briefly() -> None:
    sv = SchemaValidation([])
    sv._cache[("t-value", 7)] = (False, time.monotonic() - 1)  # expired
    assert sv.judge("t", (False, True), _records(_wire(7))).missing == {("t-value", 7)}
    assert NEGATIVE_TTL_S <= 5


def test_no_registry_configured_is_a_retriable_failure() -> None:
    from odradek.broker.schema_validation import RegistryUnavailable
    with pytest.raises(RegistryUnavailable, match="no Schema Registry"):
        SchemaValidation([])._resolve_blocking(frozenset({("t-value", 1)}))
