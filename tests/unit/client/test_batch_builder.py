"""Batches built from columns decode, with both existing decoders, to exactly their input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.client.batch_builder import (
    Binary,
    Column,
    build_columnar_batch,
    fixed_column,
    records_size,
)
from odradek.client.columnar import decode_fetched
from odradek.protocol.records import (
    BATCH_HEADER_SIZE,
    Compression,
    Record,
    batch_crc_ok,
    build_batch,
    decode_records,
    iter_batches,
    validate_batches,
)

BASE_TS = 1_700_000_000_000
# Lengths whose zigzag varint takes 1 (< 64), 2 (< 8192) and 3 bytes.
sizes = st.one_of(st.integers(0, 70), st.sampled_from([63, 64, 65, 8191, 8192, 8193]))
blob = st.one_of(st.none(), sizes.map(lambda n: bytes(i % 251 for i in range(n))))
codecs = st.sampled_from(list(Compression))


def _binary(items: list[bytes | None]) -> Binary:
    data = b"".join(x for x in items if x is not None)
    return Binary(data, np.array([-1 if x is None else len(x) for x in items], np.int64))


def _fixed(items: list[bytes]) -> np.ndarray:
    size = len(items[0])
    return np.frombuffer(b"".join(items), np.uint8).reshape(len(items), size)


@st.composite
def columns(draw: st.DrawFn) -> tuple[list[bytes | None], list[bytes | None], Column | None,
                                      Column]:
    n = draw(st.integers(1, 150))
    # values: fixed size (one size for all) or mixed (nulls and any sizes)
    if draw(st.booleans()):
        size = draw(sizes)
        raw = draw(st.lists(st.binary(min_size=size, max_size=size), min_size=n, max_size=n))
        values: list[bytes | None] = list(raw)
        vcol: Column = _fixed(raw) if draw(st.booleans()) else _binary(list(raw))
    else:
        values = draw(st.lists(blob, min_size=n, max_size=n))
        vcol = _binary(values)
    mode = draw(st.sampled_from(["null", "fixed", "mixed"]))
    keys: list[bytes | None]
    kcol: Column | None
    if mode == "null":
        keys, kcol = [None] * n, None
    elif mode == "fixed":
        size = draw(st.integers(0, 70))
        raw = draw(st.lists(st.binary(min_size=size, max_size=size), min_size=n, max_size=n))
        keys, kcol = list(raw), _fixed(raw)
    else:
        keys = draw(st.lists(st.one_of(st.none(), st.binary(max_size=80)), min_size=n,
                             max_size=n))
        kcol = _binary(keys)
    return keys, values, kcol, vcol


# How timestamps vary: none (all the base), one delta for all, small deltas (one varint size:
# the strided layout), any deltas (varints of several sizes).
delta_modes = st.sampled_from(["none", "same", "small", "any"])


def _check(batch: bytes | bytearray, keys: list[bytes | None], values: list[bytes | None],
           timestamps: list[int], *, producer_id: int = -1, producer_epoch: int = -1,
           base_sequence: int = -1) -> None:
    n = len(values)
    (header, view), = list(iter_batches(batch, strict=True))
    assert header.size == len(batch)
    assert batch_crc_ok(view)
    validate_batches(bytes(batch))
    assert (header.records_count, header.last_offset_delta) == (n, n - 1)
    assert header.max_timestamp == max(timestamps)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (
        producer_id, producer_epoch, base_sequence)
    records = decode_records(header, view)
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in records] == [
        (i, timestamps[i], keys[i], values[i], []) for i in range(n)]

    cols = decode_fetched(bytes(batch), start=0, end=n).columns
    assert cols is not None
    buf = bytes(cols.buffer)
    assert cols.offsets.tolist() == list(range(n))
    assert cols.timestamps.tolist() == timestamps

    def read(pos: np.ndarray, length: np.ndarray) -> list[bytes | None]:
        return [None if ln < 0 else buf[p:p + ln]
                for p, ln in zip(pos.tolist(), length.tolist(), strict=True)]

    assert read(cols.key_pos, cols.key_len) == keys
    assert read(cols.value_pos, cols.value_len) == values


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(columns(), delta_modes, codecs, st.data())
def test_built_batches_decode_to_their_input(cols: tuple[list[bytes | None],
                                                         list[bytes | None], Column | None,
                                                         Column],
                                             mode: str, codec: Compression,
                                             data: st.DataObject) -> None:
    keys, values, kcol, vcol = cols
    n = len(values)
    wide = st.integers(-(1 << 40), 1 << 40)
    ts_deltas: np.ndarray | None = None
    if mode == "same":
        ts_deltas = np.full(n, data.draw(wide), np.int64)
    elif mode != "none":
        each = st.integers(-60, 60) if mode == "small" else wide
        ts_deltas = np.array(data.draw(st.lists(each, min_size=n, max_size=n)), np.int64)
    timestamps = ([BASE_TS] * n if ts_deltas is None
                  else [BASE_TS + int(d) for d in ts_deltas])
    batch = build_columnar_batch(vcol, kcol, base_timestamp=BASE_TS, timestamp_deltas=ts_deltas,
                                 compression=codec)
    _check(batch, keys, values, timestamps)
    if codec == Compression.NONE:
        assert len(batch) == BATCH_HEADER_SIZE + records_size(kcol, vcol, ts_deltas)
        if timestamps[0] == BASE_TS:
            # The same bytes as the record-by-record builder.
            ref = build_batch([Record(-1, ts, k, v, ()) for k, v, ts in
                               zip(keys, values, timestamps, strict=True)])
            assert bytes(batch) == ref


@pytest.mark.parametrize("count", [1, 63, 64, 65, 8191, 8192, 8193, 20000])
@pytest.mark.parametrize("codec", [Compression.NONE, Compression.LZ4])
def test_offset_delta_varints_of_every_width(count: int, codec: Compression) -> None:
    """Fixed-size records change size where the offset delta's varint grows (64, 8192):
    each width is its own stride."""
    payload = bytes(range(100))
    keys = np.frombuffer(bytes(i % 256 for i in range(count * 3)), np.uint8).reshape(count, 3)
    batch = build_columnar_batch(fixed_column(payload, count), keys, base_timestamp=BASE_TS,
                                 compression=codec)
    key_list: list[bytes | None] = [bytes(row) for row in keys]
    _check(batch, key_list, [payload] * count, [BASE_TS] * count)


def test_idempotent_batch_carries_producer_id_epoch_and_sequence() -> None:
    values = [b"a", b"bb", None]
    batch = build_columnar_batch(_binary(values), base_timestamp=BASE_TS,
                                 producer_id=4242, producer_epoch=3, base_sequence=17,
                                 transactional=True)
    _check(batch, [None] * 3, values, [BASE_TS] * 3, producer_id=4242, producer_epoch=3,
           base_sequence=17)
    (header, _), = list(iter_batches(batch))
    assert header.is_transactional and header.last_sequence == 19


def test_bad_columns_are_refused() -> None:
    with pytest.raises(ValueError, match="at least one record"):
        build_columnar_batch(np.zeros((0, 5), np.uint8), base_timestamp=0)
    with pytest.raises(ValueError, match="keys for"):
        build_columnar_batch(np.zeros((3, 5), np.uint8), np.zeros((2, 1), np.uint8),
                             base_timestamp=0)
    with pytest.raises(ValueError, match="holds"):
        build_columnar_batch(Binary(b"abc", np.array([2, 2])), base_timestamp=0)
    with pytest.raises(ValueError, match="-1"):
        build_columnar_batch(Binary(b"abc", np.array([-2, 2])), base_timestamp=0)
    with pytest.raises(ValueError, match="2-D uint8"):
        build_columnar_batch(np.zeros(5, np.uint8), base_timestamp=0)
    with pytest.raises(ValueError, match="idempotent"):
        build_columnar_batch(np.zeros((1, 1), np.uint8), base_timestamp=0, producer_id=5)
    with pytest.raises(ValueError, match="timestamp deltas"):
        build_columnar_batch(np.zeros((2, 1), np.uint8), base_timestamp=0,
                             timestamp_deltas=np.zeros(3, np.int64))
