"""Fetched record batches straight into columns, with no Python object per record.

A fetch response's records (magic 2 batches) become numpy arrays: offsets, timestamps and
the (position, length) of every key and value inside one buffer, which Arrow turns into
binary columns in C. Only the record-length chain is walked in Python (and skipped when a
batch's records all have the same size); every other field is decoded for all records at
once. Needs numpy (the `spark` extra).

Consumer semantics follow Kafka's fetcher: batches below the fetch start are skipped,
control batches are never returned, and under read_committed the batches of aborted
transactions (the fetch response's aborted list) are dropped. Malformed input raises
CorruptRecord (or InvalidRecord for an old magic); nothing is allocated from an unchecked
length.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np

from odradek.protocol.errors import CorruptRecord, ProtocolError
from odradek.protocol.primitives import decode_uvarint
from odradek.protocol.records import (
    ATTR_COMPRESSION_MASK,
    ATTR_TIMESTAMP_TYPE,
    RECORDS_OFFSET,
    BatchHeader,
    ControlRecordType,
    batch_crc_ok,
    decode_control_record,
    decode_records,
    decompress,
    iter_batches,
)

__all__ = ["Columns", "Decoded", "Selection", "columns", "decode_fetched", "select"]

Headers = list[tuple[str, bytes | None]]
# The smallest record: length, attributes, ts delta, offset delta, key len, value len,
# header count, one byte each.
_MIN_RECORD = 7
# One side-by-side step over many batches costs about as much as walking this many records.
_STEP_COST = 100


class Columns(NamedTuple):
    """Records of one fetch, in offset order; positions index into `buffer`."""

    buffer: bytes | memoryview
    offsets: np.ndarray  # int64
    timestamps: np.ndarray  # int64, ms
    log_append: np.ndarray  # bool: timestamp type LogAppendTime
    key_pos: np.ndarray  # int64
    key_len: np.ndarray  # int64, -1 for a null key
    value_pos: np.ndarray
    value_len: np.ndarray  # -1 for a null value
    headers: list[Headers] | None  # only when asked for

    def __len__(self) -> int:
        return len(self.offsets)


class Decoded(NamedTuple):
    columns: Columns | None  # None when no record of the range was in the fetch
    next_offset: int  # where the next fetch starts (past control and aborted batches too)


class _Segment(NamedTuple):
    header: BatchHeader
    body: bytes | memoryview  # the (decompressed) records of one batch
    base: int  # where body starts in the shared buffer


class Selection(NamedTuple):
    """The batches of a fetch to decode; cheap to get (headers, CRCs, decompression), so the
    next fetch can be sent before the records are decoded."""

    buffer: bytes
    segments: list[_Segment]
    next_offset: int  # where the next fetch starts (past control and aborted batches too)
    start: int
    end: int


def select(records: bytes | memoryview, *, start: int, end: int, read_committed: bool = False,
           aborted: Iterable[tuple[int, int]] = (), check_crc: bool = True) -> Selection:
    """The batches of one partition's fetch response that hold offsets in [start, end).

    `aborted` is the response's aborted transactions as (producer_id, first_offset).
    """
    raw = records if isinstance(records, bytes) else bytes(records)
    segments, next_offset = _select(raw, start, end, read_committed, aborted, check_crc)
    if segments:
        raw, segments = _one_buffer(raw, segments)
    return Selection(raw, segments, next_offset, start, end)


def columns(sel: Selection, *, headers: bool = False) -> Columns | None:
    """The selected records as columns; None when none is in [start, end)."""
    if not sel.segments:
        return None
    cols = _columns(sel.buffer, sel.segments, headers)
    keep = (cols.offsets >= sel.start) & (cols.offsets < sel.end)
    if not keep.all():
        cols = _filter(cols, keep)
    return cols if len(cols) else None


def decode_fetched(records: bytes | memoryview, *, start: int, end: int,
                   read_committed: bool = False,
                   aborted: Iterable[tuple[int, int]] = (),
                   headers: bool = False, check_crc: bool = True) -> Decoded:
    """`select` then `columns` in one call."""
    sel = select(records, start=start, end=end, read_committed=read_committed,
                 aborted=aborted, check_crc=check_crc)
    return Decoded(columns(sel, headers=headers), sel.next_offset)


def _select(records: bytes, start: int, end: int, read_committed: bool,
            aborted: Iterable[tuple[int, int]],
            check_crc: bool) -> tuple[list[_Segment], int]:
    """The data batches to decode, and the offset after the last whole batch."""
    pending = sorted((first, pid) for pid, first in aborted)
    heapq.heapify(pending)
    aborting: set[int] = set()
    view = memoryview(records)
    out: list[_Segment] = []
    next_offset = start
    pos = 0
    for h, batch in iter_batches(view):
        at = pos
        pos += h.size
        if h.base_offset >= end:
            break
        next_offset = max(next_offset, h.last_offset + 1)
        if h.last_offset < start:
            continue
        if check_crc and not batch_crc_ok(batch):
            raise CorruptRecord(f"record batch at offset {h.base_offset} fails its CRC")
        if read_committed and h.producer_id >= 0:
            # Kafka's rule: a transaction listed as aborted becomes "aborting" once the
            # fetch reaches its first offset, until that producer's abort marker.
            while pending and pending[0][0] <= h.last_offset:
                aborting.add(heapq.heappop(pending)[1])
            if h.is_control:
                if h.producer_id in aborting and _is_abort(h, batch):
                    aborting.discard(h.producer_id)
                continue
            if h.is_transactional and h.producer_id in aborting:
                continue
        if h.is_control:
            continue
        if h.records_count <= 0:
            if h.records_count < 0:
                raise CorruptRecord(f"negative record count in the batch at offset {h.base_offset}")
            continue
        codec = h.attributes & ATTR_COMPRESSION_MASK
        if codec:
            seg = _Segment(h, decompress(codec, batch[RECORDS_OFFSET:]), -1)
        else:
            seg = _Segment(h, batch[RECORDS_OFFSET:], at + RECORDS_OFFSET)
        if h.records_count * _MIN_RECORD > len(seg.body):
            raise CorruptRecord(f"record count {h.records_count} does not fit the batch "
                                f"at offset {h.base_offset}")
        out.append(seg)
    return out, next_offset


def _is_abort(h: BatchHeader, batch: memoryview) -> bool:
    recs = decode_records(h, batch)
    return bool(recs) and decode_control_record(recs[0]).type == ControlRecordType.ABORT


def _one_buffer(records: bytes, segments: list[_Segment]) -> tuple[bytes, list[_Segment]]:
    """Positions must index one buffer: the response itself when no batch was compressed
    (no copy), else the batches' records joined."""
    if all(s.base >= 0 for s in segments):
        return records, segments
    out: list[_Segment] = []
    at = 0
    for s in segments:
        out.append(_Segment(s.header, s.body, at))
        at += len(s.body)
    return b"".join(bytes(s.body) if not isinstance(s.body, bytes) else s.body
                    for s in segments), out


def _chains(buf: bytes, arr: np.ndarray, segments: Sequence[_Segment]) -> np.ndarray:
    """Where every record's length varint sits, in segment order (not yet validated)."""
    counts = np.array([s.header.records_count for s in segments], np.int64)
    # Walking many batches side by side costs per step, walking one costs per record:
    # batches up to `cut` records go side by side, bigger ones are walked alone.
    order = np.concatenate([[0], np.sort(counts)])
    tail = order.sum() - np.cumsum(order)  # records in batches bigger than each cut
    cut = int(order[int(np.argmin(order * _STEP_COST + tail))])
    side = [i for i, s in enumerate(segments) if s.header.records_count <= cut]
    found: dict[int, np.ndarray] = {}
    if len(side) > 1:
        try:
            rows = _side_by_side(arr, [segments[i] for i in side])
            found.update(zip(side, rows, strict=True))
        except _LongRecord:
            pass
    return np.concatenate([found[i] if i in found else _walk(buf, s)
                           for i, s in enumerate(segments)])


class _LongRecord(Exception):
    """A record length needs three or more varint bytes: walk it in Python."""


def _side_by_side(arr: np.ndarray, segments: Sequence[_Segment]) -> list[np.ndarray]:
    counts = np.array([s.header.records_count for s in segments], np.int64)
    pos = np.array([s.base for s in segments], np.int64)
    out = np.zeros((len(segments), int(counts.max())), np.int64)
    last = len(arr) - 1
    for i in range(out.shape[1]):
        live = counts > i
        out[:, i] = pos
        b = arr[np.minimum(pos, last)].astype(np.int64)
        b1 = arr[np.minimum(pos + 1, last)].astype(np.int64)
        two = b >= 0x80
        if (two & (b1 >= 0x80) & live).any():
            raise _LongRecord
        z = np.where(two, (b & 0x7F) | (b1 << 7), b)
        # A bad length is caught when the chain is validated; here it must only stay bounded.
        pos = np.where(live, np.minimum(pos + 1 + two + (z >> 1), last + 1), pos)
    return [row[:n] for row, n in zip(out, counts.tolist(), strict=True)]


def _walk(buf: bytes, seg: _Segment) -> np.ndarray:
    out: list[int] = []
    add = out.append
    pos, hi = seg.base, seg.base + len(seg.body)
    try:
        for _ in range(seg.header.records_count):
            add(pos)
            b = buf[pos]
            if b < 0x80:
                pos += 1 + (b >> 1)
                continue
            b1 = buf[pos + 1]
            if b1 < 0x80:
                pos += 2 + (((b & 0x7F) | (b1 << 7)) >> 1)
                continue
            z, after = decode_uvarint(buf, pos, 5)
            pos = after + (z >> 1)
            if pos > hi:
                break
    except (IndexError, ProtocolError):
        raise CorruptRecord(f"truncated record in the batch at offset {seg.header.base_offset}") from None
    return np.array(out, np.int64)


def _record_bounds(arr: np.ndarray, chain: np.ndarray,
                   segments: Sequence[_Segment]) -> tuple[np.ndarray, np.ndarray]:
    """Validate the chains: each record's length ends exactly where the next one starts and
    the last one where its batch ends. Returns (first field position, record end)."""
    counts = [s.header.records_count for s in segments]
    if len(chain) != sum(counts):
        raise CorruptRecord("record count does not match the records")
    hi = np.repeat(np.array([s.base + len(s.body) for s in segments], np.int64), counts)
    length, starts = _varints(arr, chain, hi, 5)
    if (length < 1).any():
        raise CorruptRecord("a record length is not positive")
    rend = starts + length
    nxt = np.empty_like(chain)
    nxt[:-1] = chain[1:]
    last = np.cumsum(counts) - 1
    nxt[last] = hi[last]
    if (rend != nxt).any():
        raise CorruptRecord("record lengths do not add up to their batch")
    return starts, rend


def _varints(arr: np.ndarray, pos: np.ndarray, limit: np.ndarray,
             max_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """Zigzag varints at every position at once: (values, positions after them)."""
    last = len(arr) - 1
    b0 = arr[np.minimum(pos, last)].astype(np.int64)
    b1 = arr[np.minimum(pos + 1, last)].astype(np.int64)
    # One and two bytes in one pass (lengths, deltas and counts mostly fit); longer ones
    # take the slow lane below.
    two = b0 >> 7
    val = np.where(two, (b0 & 0x7F) | (b1 << 7), b0)
    width = 1 + two
    longer = np.flatnonzero(two & (b1 >> 7))
    if len(longer):
        at = pos[longer]
        v = (val[longer] & 0x3FFF).astype(np.uint64)
        w = np.full(len(longer), 2, np.int64)
        going = np.ones(len(longer), bool)
        k = 2
        while going.any():
            if k >= max_bytes:
                raise CorruptRecord("varint too long in a record")
            b = arr[np.minimum(at + k, last)].astype(np.uint64)
            v |= np.where(going, (b & 0x7F) << np.uint64(7 * k), 0).astype(np.uint64)
            w += going
            going &= b >= 0x80
            k += 1
        val[longer] = 0  # filled below after the zigzag of the short ones
        width[longer] = w
        signed = (val >> 1) ^ -(val & 1)
        signed[longer] = (v >> np.uint64(1)).view(np.int64) ^ -(v & np.uint64(1)).view(np.int64)
    else:
        signed = (val >> 1) ^ -(val & 1)
    after = pos + width
    if (after > limit).any():
        raise CorruptRecord("a record's fields run past its length")
    return signed, after


def _columns(raw: bytes, segments: Sequence[_Segment], want_headers: bool) -> Columns:
    arr = np.frombuffer(raw, np.uint8)
    starts, rend = _record_bounds(arr, _chains(raw, arr, segments), segments)
    counts = [s.header.records_count for s in segments]

    ts_delta, pos = _varints(arr, starts + 1, rend, 10)
    off_delta, pos = _varints(arr, pos, rend, 5)
    key_len, pos = _varints(arr, pos, rend, 5)
    key_pos = pos
    pos = pos + np.maximum(key_len, 0)
    value_len, pos = _varints(arr, np.minimum(pos, rend), rend, 5)
    value_pos = pos
    pos = pos + np.maximum(value_len, 0)
    if (key_len < -1).any() or (value_len < -1).any() or (pos >= rend).any():
        raise CorruptRecord("a record's key or value length does not fit the record")
    n_headers, pos = _varints(arr, pos, rend, 5)
    if (n_headers < 0).any():
        raise CorruptRecord("negative header count in a record")
    with_headers = np.flatnonzero(n_headers)
    if (pos[n_headers == 0] != rend[n_headers == 0]).any():
        raise CorruptRecord("record length does not match its fields")
    headers: list[Headers] | None = None
    if want_headers or len(with_headers):
        found = {int(i): _headers(raw, int(pos[i]), int(rend[i]), int(n_headers[i]))
                 for i in with_headers}
        if want_headers:
            headers = [found.get(i, []) for i in range(len(starts))]

    base_offset = np.repeat(np.array([s.header.base_offset for s in segments], np.int64), counts)
    log_append = np.repeat(np.array([bool(s.header.attributes & ATTR_TIMESTAMP_TYPE)
                                     for s in segments]), counts)
    base_ts = np.repeat(np.array([s.header.base_timestamp for s in segments], np.int64), counts)
    max_ts = np.repeat(np.array([s.header.max_timestamp for s in segments], np.int64), counts)
    offsets = base_offset + off_delta
    timestamps = np.where(log_append, max_ts, base_ts + ts_delta)
    return Columns(raw, offsets, timestamps, log_append, key_pos, key_len, value_pos,
                   value_len, headers)


def _headers(buf: bytes, pos: int, end: int, count: int) -> Headers:
    if count > end - pos:
        raise CorruptRecord(f"header count {count} does not fit the record")
    out: Headers = []
    try:
        for _ in range(count):
            z, pos = decode_uvarint(buf, pos, 5)
            n = (z >> 1) ^ -(z & 1)
            if n < 0 or n > end - pos:
                raise CorruptRecord("header key length does not fit the record")
            key = buf[pos:pos + n].decode()
            pos += n
            z, pos = decode_uvarint(buf, pos, 5)
            n = (z >> 1) ^ -(z & 1)
            if n < -1 or n > end - pos:
                raise CorruptRecord("header value length does not fit the record")
            out.append((key, None if n < 0 else buf[pos:pos + n]))
            pos += max(n, 0)
    except (UnicodeDecodeError, ProtocolError, IndexError) as exc:
        raise CorruptRecord(f"malformed record header: {exc}") from None
    if pos != end:
        raise CorruptRecord("record length does not match its headers")
    return out


def _filter(cols: Columns, keep: np.ndarray) -> Columns:
    headers = None
    if cols.headers is not None:
        headers = [h for h, k in zip(cols.headers, keep.tolist(), strict=True) if k]
    return Columns(cols.buffer, cols.offsets[keep], cols.timestamps[keep], cols.log_append[keep],
                   cols.key_pos[keep], cols.key_len[keep], cols.value_pos[keep],
                   cols.value_len[keep], headers)
