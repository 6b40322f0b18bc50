"""Magic-2 record batches built straight from numpy columns (sans-I/O).

The reverse of odradek.client.columnar: keys and values arrive as columns, and the records
of a batch are laid out for all of them at once — zigzag varints of every length, delta
and size computed as arrays, fields written with fancy-indexed or strided numpy stores —
so no Python object is made per record.

A column is either a 2-D uint8 array of shape (records, size) (every value the same size
and none null; a broadcast view is fine) or `Binary(data, lengths)`: the values one after
the other in `data`, `lengths[i]` bytes each, -1 for null (a null takes no bytes in
`data`). Keys may also be None: every key null.

Where consecutive records have the same size (fixed-size columns and small timestamp
deltas: only the offset delta's varint grows, at 64, 8192 and 2**20 records) their
key and value bytes are copied through one strided 2-D view per run; otherwise through
one scatter index per column.

Records carry attributes 0 and no headers. Compression reuses odradek.protocol.records'
`compress` (cramjam).
"""

from __future__ import annotations

import functools
import itertools
import struct
from typing import NamedTuple

import numpy as np
from crc32c import crc32c
from numpy.lib.stride_tricks import as_strided

from odradek.protocol.primitives import MAX_VARLONG_BYTES, encode_uvarint, encode_varint
from odradek.protocol.records import (
    ATTR_COMPRESSION_MASK,
    ATTR_TRANSACTIONAL,
    ATTRIBUTES_OFFSET,
    BATCH_HEADER,
    BATCH_HEADER_SIZE,
    CRC_OFFSET,
    CURRENT_MAGIC,
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    Compression,
    compress,
)

__all__ = ["Binary", "Column", "build_columnar_batch", "fixed_column", "records_size"]

_HEADER = BATCH_HEADER  # protocol.records' one definition
_CRC = struct.Struct(">I")
# Kafka caps a record's length fields at int32; a varint of a zigzagged int32 is <= 5 bytes.
_MAX_LEN = (1 << 31) - 1
# Above this many runs of equal-size records per batch, one scatter index beats a Python
# loop over strided views.
_RUNS_PER_RECORD = 1 / 16


class Binary(NamedTuple):
    """Variable-size values: `data` holds them one after another; `lengths` -1 is null."""

    data: bytes | bytearray | memoryview | np.ndarray
    lengths: np.ndarray


Column = np.ndarray | Binary


def fixed_column(value: bytes, count: int) -> np.ndarray:
    """The same value `count` times, as a (count, len(value)) view (no copy)."""
    row = np.frombuffer(value, np.uint8)
    return np.broadcast_to(row, (count, len(row)))


class _Col(NamedTuple):
    lengths: np.ndarray  # int64, -1 null
    fixed: np.ndarray | None  # (n, size) uint8 when every value has one size, none null
    data: np.ndarray | None  # the flat bytes otherwise
    size: int  # the common size, or -1


def _column(col: Column | None, count: int | None, what: str) -> _Col:
    if col is None:
        if count is None:
            raise ValueError("a batch needs a value column")
        return _Col(np.full(count, -1, np.int64), None, None, -1)
    if isinstance(col, Binary):
        lengths = np.asarray(col.lengths, np.int64)
        if lengths.ndim != 1:
            raise ValueError(f"{what} lengths must be one-dimensional")
        if len(lengths) and (lengths.min() < -1 or lengths.max() > _MAX_LEN):
            raise ValueError(f"{what} lengths must be -1 (null) or 0..2**31-1")
        data = np.frombuffer(col.data, np.uint8) if not isinstance(col.data, np.ndarray) \
            else col.data.reshape(-1).view(np.uint8)
        need = int(lengths.clip(0).sum())
        if len(data) < need:
            raise ValueError(f"{what} data holds {len(data)} bytes, the lengths {need}")
        if len(lengths) and lengths.min() >= 0 and lengths.min() == lengths.max():
            size = int(lengths[0])
            return _Col(lengths, data[: need].reshape(len(lengths), size), None, size)
        return _Col(lengths, None, data[:need], -1)
    arr = np.asarray(col)
    if arr.ndim != 2 or arr.dtype != np.uint8:
        raise ValueError(f"a fixed-size {what} column is a 2-D uint8 array (records, size)")
    return _Col(np.full(arr.shape[0], arr.shape[1], np.int64), arr, None, arr.shape[1])


def _zigzag(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.int64, copy=False)
    return ((x << 1) ^ (x >> 63)).view(np.uint64)


def _varint_size(u: np.ndarray) -> np.ndarray:
    size = np.ones(u.shape, np.int64)
    for k in range(1, MAX_VARLONG_BYTES):
        above = u >= np.uint64(1 << (7 * k))
        if not above.any():
            break
        size += above
    return size


def _put_varints(out: np.ndarray, pos: np.ndarray, u: np.ndarray, size: np.ndarray) -> None:
    """Write varint u[i] (of size[i] bytes) at out[pos[i]] for every i."""
    top = int(size.max()) if len(size) else 0
    if top and int(size.min()) == top and not (u != u[0]).any():
        # One value for every record (lengths of a fixed-size column, delta 0): the same bytes.
        value = int(u[0])
        for j in range(top):
            more = 0x80 if j + 1 < top else 0
            out[pos + j] = ((value >> (7 * j)) & 0x7F) | more
        return
    for j in range(top):
        byte = ((u >> np.uint64(7 * j)) & np.uint64(0x7F)).astype(np.uint8)
        byte |= ((size > j + 1) * 0x80).astype(np.uint8)
        if j == 0:
            out[pos] = byte
        else:
            has = size > j
            out[pos[has] + j] = byte[has]


def _runs(starts: np.ndarray) -> list[tuple[int, int, int]]:
    """(first, end, stride) of the runs of records laid out at one constant stride."""
    n = len(starts)
    if n == 1:
        return [(0, 1, 1)]
    gaps = np.diff(starts)
    cuts = np.flatnonzero(gaps[1:] != gaps[:-1]) + 1
    bounds = [0, *cuts.tolist(), n - 1]
    runs = []
    for a, b in itertools.pairwise(bounds):
        runs.append((a, b, int(gaps[a])))
    # The last record belongs to the final gap's run.
    first, _, stride = runs[-1]
    runs[-1] = (first, n, stride)
    return runs


def _copy_column(out: np.ndarray, dst: np.ndarray, col: _Col) -> None:
    """Copy the non-null values of `col` to out[dst[i]:...] (dst: where each value starts)."""
    if col.fixed is not None:
        size = col.size
        if size == 0:
            return
        runs = _runs(dst)
        if len(runs) <= max(4, int(len(dst) * _RUNS_PER_RECORD)):
            for a, b, stride in runs:
                view = as_strided(out[int(dst[a]):], shape=(b - a, size),
                                  strides=(max(stride, size), 1))
                view[...] = col.fixed[a:b]
            return
        data = np.ascontiguousarray(col.fixed).reshape(-1)
    else:
        data = col.data if col.data is not None else np.empty(0, np.uint8)
    lengths = col.lengths.clip(0)
    total = int(lengths.sum())
    if not total:
        return
    src = np.cumsum(lengths) - lengths
    index = np.repeat(dst - src, lengths) + np.arange(total, dtype=np.int64)
    out[index] = data


def records_size(keys: Column | None, values: Column, timestamp_deltas: np.ndarray | None = None,
                 ) -> int:
    """Bytes the records of a batch take, uncompressed and without the 61-byte header."""
    v = _column(values, None, "value")
    k = _column(keys, len(v.lengths), "key")
    return int(_layout(k, v, _deltas(timestamp_deltas, len(v.lengths)))[0][-1])


def _deltas(timestamp_deltas: np.ndarray | None, n: int) -> np.ndarray:
    if timestamp_deltas is None:
        return np.zeros(n, np.int64)
    deltas = np.asarray(timestamp_deltas, np.int64)
    if deltas.shape != (n,):
        raise ValueError(f"{len(deltas)} timestamp deltas for {n} records")
    return deltas


class _Layout(NamedTuple):
    length: np.ndarray  # the record length varint's value (bytes after it)
    length_size: np.ndarray
    ts: np.ndarray  # zigzagged timestamp deltas
    ts_size: np.ndarray
    off: np.ndarray
    off_size: np.ndarray
    klen: np.ndarray
    klen_size: np.ndarray
    vlen: np.ndarray
    vlen_size: np.ndarray


def _layout(k: _Col, v: _Col, deltas: np.ndarray) -> tuple[np.ndarray, _Layout]:
    """Where each record starts (with the end as last element), and its varints."""
    n = len(v.lengths)
    ts = _zigzag(deltas)
    off = _zigzag(np.arange(n, dtype=np.int64))
    klen, vlen = _zigzag(k.lengths), _zigzag(v.lengths)
    ts_size, off_size = _varint_size(ts), _varint_size(off)
    klen_size, vlen_size = _varint_size(klen), _varint_size(vlen)
    # attributes + ts delta + offset delta + key length + key + value length + value + headers
    body = (2 + ts_size + off_size + klen_size + k.lengths.clip(0) + vlen_size
            + v.lengths.clip(0))
    length = _zigzag(body)
    length_size = _varint_size(length)
    starts = np.zeros(n + 1, np.int64)
    np.cumsum(length_size + body, out=starts[1:])
    return starts, _Layout(length, length_size, ts, ts_size, off, off_size, klen, klen_size,
                           vlen, vlen_size)


# Offset deltas where the zigzag varint of the delta grows by one byte (2i >= 2**7k).
_OFFSET_BANDS = (0, 1 << 6, 1 << 13, 1 << 20, 1 << 27, 1 << 31)


class _Band(NamedTuple):
    first: int
    end: int
    start: int  # where its first record starts
    stride: int  # bytes per record
    off_size: int
    length: bytes  # the record length varint


def _strided_plan(k: _Col, v: _Col, ts: np.ndarray, ts_size: np.ndarray
                  ) -> tuple[list[_Band], int] | None:
    """Bands of records laid out at one stride each, or None when the sizes vary otherwise
    than by the offset delta (variable-size columns, timestamp deltas of several sizes)."""
    k_null = k.fixed is None and not (k.lengths >= 0).any()
    if v.fixed is None or (k.fixed is None and not k_null):
        return None
    if len(ts_size) and int(ts_size.min()) != int(ts_size.max()):
        return None
    n = len(v.lengths)
    ks = max(k.size, 0)
    fixed = (2 + int(ts_size[0]) + len(encode_varint(-1 if k_null else ks)) + ks
             + len(encode_varint(v.size)) + v.size)
    bands, start = [], 0
    for off_size, (first, end) in enumerate(itertools.pairwise(_OFFSET_BANDS), 1):
        end = min(end, n)
        if first >= end:
            break
        length = encode_varint(fixed + off_size)
        stride = len(length) + fixed + off_size
        bands.append(_Band(first, end, start, stride, off_size, length))
        start += (end - first) * stride
    return bands, start


def _fill_strided(out: np.ndarray, bands: list[_Band], k: _Col, v: _Col, ts: np.ndarray,
                  ts_size: int) -> None:
    """One 2-D view per band: the bytes before the key (or before the value when keys are
    null) come from a small prefix block written in one strided pass, keys and values are
    one 2-D copy each; few passes over the batch, each touching every record once."""
    k_null = k.fixed is None
    kfield = encode_varint(-1 if k_null else k.size)
    vfield = encode_varint(v.size)
    ts_same = not (ts != ts[0]).any()
    ts_bytes = encode_uvarint(int(ts[0])) if ts_same else bytes(ts_size)
    for band in bands:
        a, b = band.first, band.end
        rows = as_strided(out[band.start:], shape=(b - a, band.stride), strides=(band.stride, 1))
        template = band.length + b"\0" + ts_bytes
        off_col = len(template)
        template += bytes(band.off_size) + kfield
        if not k.size or k_null:
            template += vfield  # nothing between the key length and the value length
        prefix = _prefix_block(a, b, template, off_col, band.off_size)
        if not ts_same:
            prefix = prefix.copy()
            _columns_of_varints(prefix, len(band.length) + 1, ts[a:b], ts_size)
        col = len(template)
        rows[:, :col] = prefix
        if k.size > 0 and not k_null:
            rows[:, col:col + k.size] = k.fixed[a:b]  # type: ignore[index]
            col += k.size
            for byte in vfield:
                rows[:, col] = byte
                col += 1
        if v.size:
            rows[:, col:col + v.size] = v.fixed[a:b]  # type: ignore[index]
        # The header count (0) is the zeroed last byte.


@functools.lru_cache(maxsize=32)
def _prefix_block(first: int, end: int, template: bytes, off_col: int,
                  off_size: int) -> np.ndarray:
    """(end - first) copies of `template` with the offset deltas first..end-1 in place:
    batches of one shape (a producer's usual case) share it."""
    block = np.empty((end - first, len(template)), np.uint8)
    block[:] = np.frombuffer(template, np.uint8)
    deltas = np.arange(2 * first, 2 * end, 2, dtype=np.uint64)
    _columns_of_varints(block, off_col, deltas, off_size)
    block.flags.writeable = False
    return block


def _columns_of_varints(rows: np.ndarray, col: int, u: np.ndarray, size: int) -> None:
    """Varints of `size` bytes each (u as uint64) into columns col..col+size-1."""
    for j in range(size):
        more = 0x80 if j + 1 < size else 0
        rows[:, col + j] = ((u >> np.uint64(7 * j)) & np.uint64(0x7F)).astype(np.uint8) | more


def build_columnar_batch(
    values: Column,
    keys: Column | None = None,
    *,
    base_timestamp: int,
    timestamp_deltas: np.ndarray | None = None,
    compression: int = Compression.NONE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytearray:
    """One magic-2 batch (base offset 0, CreateTime) holding one record per row of `values`.

    Record i has timestamp base_timestamp + timestamp_deltas[i] (0 when None). An idempotent
    producer passes its id, epoch and the batch's base sequence (records take base_sequence,
    +1, ...); -1 everywhere for a plain producer. Returns the batch as a fresh bytearray
    (nothing copies it again; callers may send it as is).
    """
    v = _column(values, None, "value")
    n = len(v.lengths)
    if n == 0:
        raise ValueError("a record batch needs at least one record")
    k = _column(keys, n, "key")
    if len(k.lengths) != n:
        raise ValueError(f"{len(k.lengths)} keys for {n} values")
    if (producer_id >= 0) != (base_sequence >= 0):
        raise ValueError("an idempotent batch has both a producer id and a base sequence")
    deltas = _deltas(timestamp_deltas, n)
    ts = _zigzag(deltas)
    ts_size = _varint_size(ts)
    plan = _strided_plan(k, v, ts, ts_size)
    if plan is not None:
        bands, size = plan
    else:
        starts, lay = _layout(k, v, deltas)
        size = int(starts[-1])
    compressed = compression != Compression.NONE
    batch = bytearray(size if compressed else BATCH_HEADER_SIZE + size)
    arr = np.frombuffer(batch, np.uint8)
    out = arr if compressed else arr[BATCH_HEADER_SIZE:]
    if plan is not None:
        _fill_strided(out, bands, k, v, ts, int(ts_size[0]))
    else:
        _fill(out, starts, lay, k, v)
    if compressed:
        body = compress(compression, batch)
        batch = bytearray(BATCH_HEADER_SIZE) + body
    attributes = compression & ATTR_COMPRESSION_MASK
    if transactional:
        attributes |= ATTR_TRANSACTIONAL
    _HEADER.pack_into(
        batch, 0, 0, len(batch) - LOG_OVERHEAD, partition_leader_epoch, CURRENT_MAGIC, 0,
        attributes, n - 1, base_timestamp, base_timestamp + int(deltas.max()), producer_id,
        producer_epoch, base_sequence, n)
    _CRC.pack_into(batch, CRC_OFFSET, crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))
    return batch


def _fill(out: np.ndarray, starts: np.ndarray, lay: _Layout, k: _Col, v: _Col) -> None:
    """Any sizes: every varint by fancy-indexed stores, keys and values by runs or scatter."""
    pos = starts[:-1]
    # bytearray() is zeroed: attributes and the header count (both 0) need no store.
    _put_varints(out, pos, lay.length, lay.length_size)
    pos = pos + lay.length_size + 1
    _put_varints(out, pos, lay.ts, lay.ts_size)
    pos += lay.ts_size
    _put_varints(out, pos, lay.off, lay.off_size)
    pos += lay.off_size
    _put_varints(out, pos, lay.klen, lay.klen_size)
    pos += lay.klen_size
    _copy_column(out, pos, k)
    pos += k.lengths.clip(0)
    _put_varints(out, pos, lay.vlen, lay.vlen_size)
    pos += lay.vlen_size
    _copy_column(out, pos, v)
