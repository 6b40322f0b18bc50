"""The equal-size fast path of the columnar decoder (stride guesses, whole-run layout checks)
against the record-by-record decoder and the general chain walk, and under corruption."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.client import columnar
from odradek.client.columnar import decode_fetched
from odradek.protocol.errors import CorruptRecord, KafkaError
from odradek.protocol.primitives import decode_uvarint, encode_uvarint
from odradek.protocol.records import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    RECORDS_OFFSET,
    Compression,
    Record,
    build_batch,
    decode_records,
    iter_batches,
)
from tests.unit.client.test_columnar import rows, want

settings_ = settings(max_examples=80, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def uniform_batch(n: int, key: bytes | None, value: bytes | None, base: int = 0,
                  ts_step: int = 0, odd: dict[int, int] | None = None,
                  codec: Compression = Compression.NONE) -> tuple[bytes, list[Record]]:
    """n records with the same key and value sizes (contents differ), consecutive offsets;
    `odd` makes record i's value that many bytes longer (negative: shorter)."""
    recs = []
    for i in range(n):
        v = value
        if v is not None and odd and i in odd:
            v = (v + b"+" * odd[i]) if odd[i] > 0 else v[:len(v) + odd[i]]
        filled = None if v is None else bytes((i + j) & 0xFF for j in range(len(v)))
        recs.append(Record(base + i, 1_600_000_000_000 + i * ts_step, key, filled))
    raw = build_batch(recs, base_offset=base, compression=codec)
    out = []
    for h, view in iter_batches(raw):
        out += decode_records(h, view)
    return raw, out


def record_starts(batch: bytes) -> list[int]:
    """Where each record's length varint sits, walked one record at a time."""
    out, pos = [], RECORDS_OFFSET
    while pos < len(batch):
        out.append(pos)
        z, after = decode_uvarint(batch, pos, 5)
        pos = after + (z >> 1)
    return out


def with_crc(batch: bytearray) -> bytes:
    from crc32c import crc32c

    struct.pack_into(">I", batch, CRC_OFFSET, crc32c(bytes(batch[ATTRIBUTES_OFFSET:])))
    return bytes(batch)


def relength(batch: bytes, changes: dict[int, int]) -> bytes:
    """The batch with record i's length varint changed by changes[i] (fields untouched),
    and a CRC that matches again: only the record decoder can catch it."""
    starts = record_starts(batch)
    out = bytearray(batch[:RECORDS_OFFSET])
    for i, at in enumerate(starts):
        z, after = decode_uvarint(batch, at, 5)
        end = starts[i + 1] if i + 1 < len(starts) else len(batch)
        length = (z >> 1) + changes.get(i, 0)
        out += encode_uvarint(length << 1) + batch[after:end]
    struct.pack_into(">i", out, 8, len(out) - 12)
    return with_crc(out)


sizes = st.one_of(st.none(), st.integers(0, 300))


def blob(n: int | None) -> bytes | None:
    return None if n is None else b"x" * n


@settings_
@given(st.lists(st.tuples(st.integers(1, 400), sizes, sizes, st.integers(0, 3)),
                min_size=1, max_size=5),
       st.integers(0, 10_000))
def test_uniform_batches_decode_as_the_record_decoder(spec: list, base: int) -> None:
    # Offsets and timestamp deltas cross one- and two-byte varints inside a batch, so the
    # record size changes a few times: each run is guessed, checked and read as a block.
    data, expected = b"", []
    for n, k, v, ts_step in spec:
        raw, recs = uniform_batch(n, blob(k), blob(v), base, ts_step)
        data += raw
        expected += recs
        base += n
    got = decode_fetched(data, start=0, end=10**9)
    assert rows(got.columns, False) == want(expected, 0, 10**9, False)


@settings_
@given(st.integers(2, 300), sizes, st.integers(0, 200),
       st.dictionaries(st.integers(0, 299), st.integers(-3, 3).filter(bool), max_size=4),
       st.sampled_from([Compression.NONE, Compression.LZ4]))
def test_nearly_uniform_batches_are_not_taken_for_uniform(n: int, k: int | None, v: int,
                                                           odd: dict[int, int],
                                                           codec: Compression) -> None:
    # Valid batches whose records are all one size but a few (one longer and one shorter
    # keeps the batch as long as a uniform one): the guesses must notice.
    odd = {i: d for i, d in odd.items() if i < n and v + d >= 0}
    data, expected = uniform_batch(n, blob(k), b"v" * v, 7, 1, odd, codec)
    got = decode_fetched(data, start=0, end=10**9, headers=True)
    assert rows(got.columns, True) == want(expected, 0, 10**9, True)


@settings_
@given(st.integers(2, 300), sizes, st.integers(0, 200), st.data())
def test_uniform_chain_equals_the_general_walk(n: int, k: int | None, v: int,
                                              data: st.DataObject) -> None:
    odd = data.draw(st.dictionaries(st.integers(0, n - 1), st.integers(-2, 2).filter(bool),
                                    max_size=3))
    odd = {i: d for i, d in odd.items() if v + d >= 0}
    raw, _ = uniform_batch(n, blob(k), b"v" * v, 0, 1, odd)
    arr = np.frombuffer(raw, np.uint8)
    run = columnar._Run(RECORDS_OFFSET, len(raw), n, 0)
    found, rest = columnar._strided(arr, [run])
    fast = [c for c, _ in found[0]]
    if rest:
        fast += columnar._general(raw, arr, [rest[0]])
    assert np.concatenate(fast).tolist() == record_starts(raw)
    assert columnar._walk(raw, run).tolist() == record_starts(raw)


@settings_
@given(st.integers(3, 300), sizes, st.integers(1, 200), st.data())
def test_lengths_that_lie_in_a_uniform_batch_raise_corrupt_record(n: int, k: int | None,
                                                                  v: int,
                                                                  data: st.DataObject) -> None:
    # One record says it is longer and another one shorter (the lengths still add up to
    # the batch, the CRC matches): the fields of those records do not fill their lengths.
    raw, _ = uniform_batch(n, blob(k), b"v" * v, 0, 1)
    i = data.draw(st.integers(0, n - 1))
    j = data.draw(st.integers(0, n - 1).filter(lambda j: j != i))
    d = data.draw(st.integers(1, 2))
    bad = relength(raw, {i: d, j: -d})
    for crc in (True, False):
        with pytest.raises(CorruptRecord):
            decode_fetched(bad, start=0, end=10**9, check_crc=crc)


@settings_
@given(st.integers(40, 300), sizes, st.integers(0, 120), st.data())
def test_corrupted_uniform_batches_raise_a_kafka_error_only(n: int, k: int | None, v: int,
                                                           data: st.DataObject) -> None:
    # Bytes changed inside the records of a uniform batch, CRC fixed up: whatever decodes
    # must agree with the record decoder, anything else is a Kafka error.
    raw, _ = uniform_batch(n, blob(k), b"v" * v, 0, data.draw(st.integers(0, 3)))
    bad = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 4))):
        bad[data.draw(st.integers(RECORDS_OFFSET, len(bad) - 1))] = data.draw(
            st.integers(0, 255))
    bad_bytes = with_crc(bad)
    try:
        got = decode_fetched(bad_bytes, start=0, end=10**9, headers=True)
    except KafkaError:
        return
    h, view = next(iter_batches(bad_bytes))
    try:
        expected = decode_records(h, view)
    except KafkaError:
        pytest.fail("the columnar decoder accepted a batch the record decoder refuses")
    assert rows(got.columns, True) == want(expected, 0, 10**9, True)


def test_a_big_uniform_batch_is_read_in_runs() -> None:
    # 10,000 records of 100 B: the offset delta widens at 64 and 8192, so the record size
    # changes twice; every record is found by stride guesses and read by layout.
    raw, expected = uniform_batch(10_000, None, b"v" * 100, 0, 0)
    sel = columnar.select(raw, start=0, end=10**9)
    arr = np.frombuffer(sel.buffer, np.uint8)
    chain, strides = columnar._chains(sel.buffer, arr, sel.segments)
    assert len(chain) == 10_000
    assert [s.count for s in strides] == [64, 8192 - 64, 10_000 - 8192]
    out = columnar._Fields(*(np.zeros(10_000, np.int64) for _ in range(6)))
    assert all(columnar._same_layout(sel.buffer, arr, s, out) for s in strides)
    got = decode_fetched(raw, start=0, end=10**9)
    assert rows(got.columns, False) == want(expected, 0, 10**9, False)


@settings_
@given(st.integers(32, 200), st.integers(1, 20), st.integers(1, 60),
       st.dictionaries(st.integers(0, 199), st.integers(-1, 1).filter(bool), min_size=1,
                       max_size=3),
       st.booleans())
def test_same_size_records_split_differently_are_read_as_written(n: int, k: int, v: int,
                                                                 moved: dict[int, int],
                                                                 with_header: bool) -> None:
    # Every record as long as the others, but in a few the key is a byte longer and the
    # value a byte shorter (or back), or a header takes the place of value bytes: one
    # stride, not one layout.
    recs = []
    for i in range(n):
        d = moved.get(i, 0)
        key, value = b"k" * (k + d), b"v" * (v - d)
        hdrs = [("h", b"")] if with_header and d == 1 else []
        if hdrs:
            value = value[:-4]  # the header (count, key length, key, value length) fills it
        recs.append(Record(i, 1000, key, value, hdrs))
    raw = build_batch(recs, base_offset=0)
    h, view = next(iter_batches(raw))
    expected = decode_records(h, view)
    got = decode_fetched(raw, start=0, end=10**9, headers=True)
    assert rows(got.columns, True) == want(expected, 0, 10**9, True)


@pytest.mark.parametrize("field", ["key length", "value length", "header count", "ts delta"])
def test_one_bad_field_in_a_long_uniform_run_raises_corrupt_record(field: str) -> None:
    # The layout check compares every record's field bytes with the first record's: one
    # record whose key length, value length or header count says otherwise (CRC fixed up),
    # or whose timestamp delta grows a byte over its length, is refused.
    raw, _ = uniform_batch(100, b"k" * 5, b"v" * 20, 0, 0)
    at = record_starts(raw)[50]
    bad = bytearray(raw)
    # length(1) attributes(1) ts delta(1) offset delta(1) key length(1) key(5) value length(1)
    pos = {"key length": at + 4, "value length": at + 10, "header count": at + 31,
           "ts delta": at + 2}[field]
    bad[pos] = 0x80 if field == "ts delta" else bad[pos] + 2
    with pytest.raises(CorruptRecord):
        decode_fetched(with_crc(bad), start=0, end=10**9)
