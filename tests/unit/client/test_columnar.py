"""The columnar fetch decoder against the record-by-record decoder, and under fuzzing."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.client.columnar import Columns, decode_fetched
from odradek.protocol.errors import KafkaError
from odradek.protocol.records import (
    Compression,
    ControlRecordType,
    Record,
    TimestampType,
    build_batch,
    build_control_batch,
    decode_records,
    iter_batches,
)
from odradek.spark.arrow_columns import binary_column, to_record_batch

blobs = st.one_of(st.none(), st.binary(max_size=20), st.binary(min_size=100, max_size=300))
headers = st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=8))),
                   max_size=2)
record = st.tuples(blobs, blobs, headers, st.integers(0, 3_000_000), st.integers(1, 3))
batch = st.tuples(st.lists(record, min_size=1, max_size=40),
                  st.sampled_from(list(Compression)), st.booleans())


def build(spec: list) -> tuple[bytes, list[Record]]:
    """Batches from (records, codec, log_append) specs; offsets with gaps, as compaction leaves."""
    out, expected, offset = [], [], 5
    for recs, codec, log_append in spec:
        base = offset
        rows = []
        for key, value, hdrs, ts, gap in recs:
            rows.append(Record(offset, 1_600_000_000_000 + ts, key, value, hdrs))
            offset += gap
        raw = build_batch(rows, base_offset=base, compression=codec,
                          timestamp_type=TimestampType.LOG_APPEND_TIME if log_append else 0,
                          log_append_time_ms=1_700_000_000_000)
        out.append(raw)
        for h, view in iter_batches(raw):
            expected += decode_records(h, view)
    return b"".join(out), expected


def rows(cols: Columns | None, with_headers: bool) -> list[tuple]:
    if cols is None:
        return []
    buf = cols.buffer

    def blob(p: int, n: int) -> bytes | None:
        return None if n < 0 else bytes(buf[p:p + n])
    return [(int(o), int(t), blob(int(kp), int(kl)), blob(int(vp), int(vl)),
             [tuple(h) for h in cols.headers[i]] if with_headers and cols.headers else None)
            for i, (o, t, kp, kl, vp, vl) in enumerate(zip(
                cols.offsets, cols.timestamps, cols.key_pos, cols.key_len,
                cols.value_pos, cols.value_len, strict=True))]


def want(expected: list[Record], start: int, end: int, with_headers: bool) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value,
             [tuple(h) for h in r.headers] if with_headers else None)
            for r in expected if start <= r.offset < end]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(batch, min_size=1, max_size=6), st.integers(0, 200), st.integers(0, 400),
       st.booleans())
def test_matches_the_record_decoder(spec: list, start: int, span: int, with_headers: bool) -> None:
    data, expected = build(spec)
    end = start + span
    got = decode_fetched(data, start=start, end=end, headers=with_headers)
    assert rows(got.columns, with_headers) == want(expected, start, end, with_headers)
    # The next fetch starts after the last whole batch that begins below `end`.
    last = [h.last_offset for h, _ in iter_batches(data) if h.base_offset < end]
    assert got.next_offset == max([start, *(o + 1 for o in last)])


def test_many_batches_and_long_records_take_the_same_answer() -> None:
    # Many small batches go side by side through numpy; big records (3-byte lengths) and
    # a single big batch are walked; all must agree with the record decoder.
    rnd = random.Random(7)
    spec = [([(None, rnd.randbytes(rnd.choice([0, 5, 100, 9000])), [], i, 1)
              for i in range(rnd.randint(1, 30))], Compression.NONE, False) for _ in range(120)]
    spec.append(([(b"k", b"v" * 20000, [("h", b"x")], 0, 1)] * 3, Compression.ZSTD, False))
    data, expected = build(spec)
    got = decode_fetched(data, start=0, end=10**9, headers=True)
    assert rows(got.columns, True) == want(expected, 0, 10**9, True)


def _txn(pid: int, base: int, values: list[bytes], committed: bool) -> list[bytes]:
    data = build_batch([Record(base + i, 1000 + i, None, v) for i, v in enumerate(values)],
                       base_offset=base, producer_id=pid, producer_epoch=0, base_sequence=0,
                       transactional=True)
    marker = build_control_batch(ControlRecordType.COMMIT if committed else ControlRecordType.ABORT,
                                 producer_id=pid, producer_epoch=0, base_offset=base + len(values))
    return [data, marker]


@given(st.lists(st.tuples(st.integers(1, 3), st.integers(1, 4), st.booleans(), st.booleans()),
                min_size=1, max_size=12))
@settings(max_examples=100, deadline=None)
def test_read_committed_drops_aborted_transactions_and_markers(txns: list) -> None:
    """Transactions of a few producers, interleaved as the log holds them (one producer's
    transaction at a time), plus plain batches; read_committed keeps committed and plain."""
    parts, committed_values, all_values, aborted = [], [], [], []
    offset = 0
    for pid, n, commit, plain in txns:
        values = [f"{offset}-{i}".encode() for i in range(n)]
        if plain:
            parts.append(build_batch([Record(offset + i, 1, None, v) for i, v in enumerate(values)],
                                     base_offset=offset))
            committed_values += values
        else:
            parts += _txn(pid, offset, values, commit)
            if commit:
                committed_values += values
            else:
                aborted.append((pid, offset))
        all_values += values
        offset += n + (0 if plain else 1)
    data = b"".join(parts)
    got = decode_fetched(data, start=0, end=offset, read_committed=True, aborted=aborted)
    assert [r[3] for r in rows(got.columns, False)] == committed_values
    assert got.next_offset == offset
    # read_uncommitted keeps every data record and still drops the markers.
    got = decode_fetched(data, start=0, end=offset, read_committed=False, aborted=aborted)
    assert [r[3] for r in rows(got.columns, False)] == all_values


def test_partial_trailing_batch_is_left_for_the_next_fetch() -> None:
    data, expected = build([([(None, b"a", [], 0, 1)] * 3, Compression.NONE, False)] * 2)
    cut = data[:-5]
    got = decode_fetched(cut, start=0, end=100)
    assert [r[0] for r in rows(got.columns, False)] == [r.offset for r in expected[:3]]
    assert got.next_offset == expected[2].offset + 1


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(batch, min_size=1, max_size=3), st.data())
def test_corrupted_input_raises_a_kafka_error_only(spec: list, data: st.DataObject) -> None:
    raw = bytearray(build(spec)[0])
    for _ in range(data.draw(st.integers(1, 6))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        raw = raw[:data.draw(st.integers(0, len(raw)))]
    for crc in (True, False):
        try:
            got = decode_fetched(bytes(raw), start=0, end=10**9, headers=True, check_crc=crc)
        except KafkaError:
            continue
        if got.columns is not None:
            # Whatever decodes must point inside the buffer.
            cols = got.columns
            for pos, n in ((cols.key_pos, cols.key_len), (cols.value_pos, cols.value_len)):
                ok = n >= 0
                assert (pos[ok] + n[ok] <= len(cols.buffer)).all()


@given(st.binary(max_size=300))
@settings(max_examples=300, deadline=None)
def test_random_bytes_raise_a_kafka_error_only(raw: bytes) -> None:
    try:
        decode_fetched(raw, start=0, end=10**9, check_crc=False)
    except KafkaError:
        pass


@given(st.lists(blobs, max_size=50))
@settings(max_examples=200, deadline=None)
def test_binary_column_from_positions(values: list[bytes | None]) -> None:
    buf = b"".join(b"<<" + (v or b"") for v in values) + b"<<"
    pos, length, at = [], [], 0
    for v in values:
        at += 2
        pos.append(at)
        length.append(-1 if v is None else len(v))
        at += len(v or b"")
    col = binary_column(buf, np.array(pos, np.int64), np.array(length, np.int64))
    assert col.type == pa.binary()
    assert col.to_pylist() == values


def test_record_batch_has_the_spark_kafka_schema() -> None:
    data, expected = build([([(b"k1", b"v" * 30, [("a", b"1")], 5, 1),
                              (None, None, [], 6, 1)], Compression.LZ4, False),
                            ([(b"k2", b"w", [], 0, 1)], Compression.NONE, True)])
    cols = decode_fetched(data, start=0, end=100, headers=True).columns
    assert cols is not None
    got = to_record_batch(cols, "topic-a", 3, True).to_pylist()
    assert [r["key"] for r in got] == [r.key for r in expected]
    assert [r["value"] for r in got] == [r.value for r in expected]
    assert {r["topic"] for r in got} == {"topic-a"} and {r["partition"] for r in got} == {3}
    assert [r["offset"] for r in got] == [r.offset for r in expected]
    assert [r["timestamp"].timestamp() * 1000 for r in got] == [r.timestamp for r in expected]
    assert [r["timestampType"] for r in got] == [0, 0, 1]
    assert [[(h["key"], h["value"]) for h in r["headers"]] for r in got] == [
        [tuple(h) for h in r.headers] for r in expected]


@pytest.mark.parametrize("codec", list(Compression))
def test_every_codec(codec: Compression) -> None:
    data, expected = build([([(b"k", bytes([i]) * i, [], i, 1) for i in range(50)], codec, False),
                            # Compresses far below 7 bytes a record: the count is checked
                            # against the decompressed records, not the batch.
                            ([(None, b"same", [], 0, 1)] * 5000, codec, False)])
    got = decode_fetched(data, start=0, end=10**9)
    assert rows(got.columns, False) == want(expected, 0, 10**9, False)
