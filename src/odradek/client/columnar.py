"""Fetched record batches straight into columns, with no Python object per record.

A fetch response's records (magic 2 batches) become numpy arrays: offsets, timestamps and
the (position, length) of every key and value inside one buffer, which Arrow turns into
binary columns in C. Producers mostly write records of one size, so each batch's record
chain is first guessed as equal strides and checked (`_strided`), and a run of equal-sized
records laid out as its first one is read as a (count, size) view (`_same_layout`); what
does not fit that (varied sizes, headers) is walked in Python (`_general`) and decoded one
field at a time for all its records at once (`_fields`). Either way every record is checked
as before: lengths chain to the batch end (`_record_bounds`), fields fill each record
exactly. Needs numpy (the `spark` extra).

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
from odradek.protocol.primitives import MAX_VARINT_BYTES, MAX_VARLONG_BYTES, decode_uvarint
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
Buffer = bytes | memoryview
# The smallest record: length, attributes, ts delta, offset delta, key len, value len,
# header count, one byte each.
_MIN_RECORD = 7
# One side-by-side step over many batches costs about as much as walking this many records.
_STEP_COST = 100
# The stride guesses (see _strided): a batch whose guesses hold for fewer records than this
# goes to the general walk, and so does what is left after this many tries.
_MIN_RUN = 16
_WINDOWS = (256, 1024, 4096, 16384, 65536, 1 << 20, 1 << 62, 1 << 62)
# Runs of equal-sized records at least this long are checked against their first record
# as a whole (_same_layout) instead of field by field.
_MIN_TEMPLATE = 32


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

    buffer: bytes | memoryview  # a memoryview only when selected with borrow=True
    segments: list[_Segment]
    next_offset: int  # where the next fetch starts (past control and aborted batches too)
    start: int
    end: int


def select(records: bytes | memoryview, *, start: int, end: int, read_committed: bool = False,
           aborted: Iterable[tuple[int, int]] = (), check_crc: bool = True,
           borrow: bool = False) -> Selection:
    """The batches of one partition's fetch response that hold offsets in [start, end).

    `aborted` is the response's aborted transactions as (producer_id, first_offset).
    A memoryview is copied unless `borrow`: then the selection and its columns point into
    it, and the caller keeps it unchanged for as long as they are used.
    """
    raw = records if isinstance(records, bytes) or borrow else bytes(records)
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


def _select(records: Buffer, start: int, end: int, read_committed: bool,
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


def _one_buffer(records: Buffer, segments: list[_Segment]) -> tuple[Buffer, list[_Segment]]:
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


class _Run(NamedTuple):
    """Records of one batch still to chain: `count` of them from `base` up to `end`."""

    base: int
    end: int
    count: int
    base_offset: int  # for error messages


class _Fields(NamedTuple):
    """Per-record output columns, filled run by run."""

    ts_delta: np.ndarray
    off_delta: np.ndarray
    key_len: np.ndarray
    key_pos: np.ndarray
    value_len: np.ndarray
    value_pos: np.ndarray


class _Stride(NamedTuple):
    """Records [first, first + count) of the chain, all `size` bytes long from `pos`."""

    first: int
    pos: int
    size: int
    count: int


def _chains(buf: Buffer, arr: np.ndarray,
            segments: Sequence[_Segment]) -> tuple[np.ndarray, list[_Stride]]:
    """Where every record's length varint sits, in segment order (not yet validated), and
    the runs of equal-sized records found on the way."""
    runs = [_Run(s.base, s.base + len(s.body), s.header.records_count, s.header.base_offset)
            for s in segments]
    found, rest = _strided(arr, runs)
    if rest:
        later = sorted(rest)
        for i, chain in zip(later, _general(buf, arr, [rest[i] for i in later]), strict=True):
            found[i].append((chain, 0))
    strides: list[_Stride] = []
    at = 0
    for pieces in found:
        run: _Stride | None = None
        for chain, size in pieces:
            if run is not None and size == run.size:
                run = run._replace(count=run.count + len(chain))  # the guess window ended
            else:
                if run is not None and run.count >= _MIN_TEMPLATE:
                    strides.append(run)
                run = _Stride(at, int(chain[0]), size, len(chain)) if size else None
            at += len(chain)
        if run is not None and run.count >= _MIN_TEMPLATE:
            strides.append(run)
    return np.concatenate([c for pieces in found for c, _ in pieces]), strides


def _strided(arr: np.ndarray, runs: Sequence[_Run]) -> tuple[list[list[tuple[np.ndarray, int]]],
                                                             dict[int, _Run]]:
    """The fast path: producers mostly write records of one size, so guess that the records
    of each batch are as long as the first one (base + k * stride), keep the guesses whose
    own length varint says exactly that stride, and guess again from the first miss.

    A kept guess is a true record start: its predecessor was read there and is exactly one
    stride long. Batches guessed wrong too often (runs shorter than _MIN_RUN, or more than
    len(_WINDOWS) tries) are left, from where the guesses stopped, to the general walk; returns
    ((chain piece, record size) per run, what is left of each such run)."""
    found: list[list[tuple[np.ndarray, int]]] = [[] for _ in runs]
    pos = np.array([r.base for r in runs], np.int64)
    hi = np.array([r.end for r in runs], np.int64)
    left = np.array([r.count for r in runs], np.int64)
    active = np.flatnonzero(left > 0)
    for window in _WINDOWS:
        if not len(active):
            break
        p = pos[active]
        stride = _size(arr, p)
        # How many records of this stride fit before the batch ends: no guess past it (so
        # no read past the buffer either). Few are guessed first: a miss comes early when
        # the deltas' varints widen (offset delta 64, timestamp delta 64 ms).
        fit = np.minimum(np.minimum(left[active], window),
                         (hi[active] - p) // np.maximum(stride, 1))
        fit[stride == 0] = 0
        first = np.cumsum(fit) - fit
        total = int(fit.sum())
        take = np.zeros_like(fit)
        if total:
            k = np.arange(total, dtype=np.int64) - np.repeat(first, fit)
            cand = np.repeat(p, fit) + k * np.repeat(stride, fit)
            # Same size, same length varint: compare its one or two bytes with the first
            # record's (a record is at least two bytes, so cand + 1 is inside the batch).
            b0 = arr.take(p, mode='clip')
            same = arr.take(cand, mode='clip') == np.repeat(b0, fit)
            two = np.repeat(b0 >= 0x80, fit)
            same &= ~two | (arr.take(cand + 1, mode='clip')
                            == np.repeat(arr.take(p + 1, mode='clip'), fit))
            miss = np.where(same, np.repeat(fit, fit), k)
            nz = fit > 0
            take[nz] = np.minimum.reduceat(miss, first[nz])
        for i, f, t, z in zip(active.tolist(), first.tolist(), take.tolist(),
                              stride.tolist(), strict=True):
            if t:
                found[i].append((cand[f:f + t], z))
        pos[active] += take * stride
        left[active] -= take
        active = active[(left[active] > 0) & (take >= _MIN_RUN)]
    rest = {i: _Run(int(pos[i]), int(hi[i]), int(left[i]), r.base_offset)
            for i, r in enumerate(runs) if left[i] > 0}
    return found, rest


def _size(arr: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """The whole size (length varint included) of the record at each position when its
    length is a positive one- or two-byte varint; 0 otherwise (the general walk decides)."""
    b0 = arr.take(pos, mode='clip').astype(np.int64)
    b1 = arr.take(pos + 1, mode='clip').astype(np.int64)
    two = b0 >> 7
    z = np.where(two, (b0 & 0x7F) | (b1 << 7), b0)
    good = ((two & (b1 >> 7)) == 0) & ((z & 1) == 0) & (z >= 2)
    return np.where(good, 1 + two + (z >> 1), 0)


def _general(buf: Buffer, arr: np.ndarray, runs: Sequence[_Run]) -> list[np.ndarray]:
    """Chains of runs of any record sizes: small runs side by side, big ones walked alone."""
    counts = np.array([r.count for r in runs], np.int64)
    # Walking many runs side by side costs per step, walking one costs per record:
    # runs up to `cut` records go side by side, bigger ones are walked alone.
    order = np.concatenate([[0], np.sort(counts)])
    tail = order.sum() - np.cumsum(order)  # records in runs bigger than each cut
    cut = int(order[int(np.argmin(order * _STEP_COST + tail))])
    side = [i for i, r in enumerate(runs) if r.count <= cut]
    found: dict[int, np.ndarray] = {}
    if len(side) > 1:
        try:
            rows = _side_by_side(arr, [runs[i] for i in side])
            found.update(zip(side, rows, strict=True))
        except _LongRecord:
            pass
    return [found[i] if i in found else _walk(buf, r) for i, r in enumerate(runs)]


class _LongRecord(Exception):
    """A record length needs three or more varint bytes: walk it in Python."""


def _side_by_side(arr: np.ndarray, runs: Sequence[_Run]) -> list[np.ndarray]:
    counts = np.array([r.count for r in runs], np.int64)
    pos = np.array([r.base for r in runs], np.int64)
    out = np.zeros((len(runs), int(counts.max())), np.int64)
    last = len(arr) - 1
    for i in range(out.shape[1]):
        live = counts > i
        out[:, i] = pos
        b = arr.take(pos, mode='clip').astype(np.int64)
        b1 = arr.take(pos + 1, mode='clip').astype(np.int64)
        two = b >= 0x80
        if (two & (b1 >= 0x80) & live).any():
            raise _LongRecord
        z = np.where(two, (b & 0x7F) | (b1 << 7), b)
        # A bad length is caught when the chain is validated; here it must only stay bounded.
        pos = np.where(live, np.minimum(pos + 1 + two + (z >> 1), last + 1), pos)
    return [row[:n] for row, n in zip(out, counts.tolist(), strict=True)]


def _walk(buf: Buffer, run: _Run) -> np.ndarray:
    out: list[int] = []
    add = out.append
    pos, hi = run.base, run.end
    try:
        for _ in range(run.count):
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
        raise CorruptRecord(f"truncated record in the batch at offset {run.base_offset}") from None
    return np.array(out, np.int64)


def _record_bounds(arr: np.ndarray, chain: np.ndarray,
                   segments: Sequence[_Segment]) -> tuple[np.ndarray, np.ndarray]:
    """Validate the chains: each record's length ends exactly where the next one starts and
    the last one where its batch ends. Returns (first field position, record end)."""
    counts = [s.header.records_count for s in segments]
    if len(chain) != sum(counts):
        raise CorruptRecord("record count does not match the records")
    hi = np.repeat(np.array([s.base + len(s.body) for s in segments], np.int64), counts)
    length, starts = _varints(arr, chain, hi, MAX_VARINT_BYTES)
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
    b0 = arr.take(pos, mode='clip').astype(np.int64)
    b1 = arr.take(pos + 1, mode='clip').astype(np.int64)
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
            b = arr.take(at + k, mode='clip').astype(np.uint64)
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


def _columns(raw: Buffer, segments: Sequence[_Segment], want_headers: bool) -> Columns:
    arr = np.frombuffer(raw, np.uint8)
    chain, strides = _chains(raw, arr, segments)
    starts, rend = _record_bounds(arr, chain, segments)
    counts = [s.header.records_count for s in segments]

    n = len(starts)
    ts_delta = np.empty(n, np.int64)
    off_delta = np.empty(n, np.int64)
    key_len = np.empty(n, np.int64)
    key_pos = np.empty(n, np.int64)
    value_len = np.empty(n, np.int64)
    value_pos = np.empty(n, np.int64)
    out = _Fields(ts_delta, off_delta, key_len, key_pos, value_len, value_pos)
    rest = np.ones(n, bool)
    done = 0
    for run in strides:
        if _same_layout(raw, arr, run, out):
            rest[run.first:run.first + run.count] = False
            done += run.count
    # Records of a checked layout have no headers.
    n_headers: np.ndarray | None = None
    pos = rend
    if done < n:
        left = np.flatnonzero(rest) if done else slice(None)
        ts_delta[left], off_delta[left], key_len[left], key_pos[left], value_len[left], \
            value_pos[left], n_left, pos_left = _fields(arr, starts[left], rend[left])
        n_headers = np.zeros(n, np.int64)
        n_headers[left] = n_left
        pos = rend.copy()
        pos[left] = pos_left
    with_headers = np.flatnonzero(n_headers) if n_headers is not None else ()
    headers: list[Headers] | None = None
    if want_headers or len(with_headers):
        found = {int(i): _headers(raw, int(pos[i]), int(rend[i]), int(n_headers[i]))
                 for i in with_headers} if n_headers is not None else {}
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


def _fields(arr: np.ndarray, starts: np.ndarray,
            rend: np.ndarray) -> tuple[np.ndarray, ...]:
    """Every record's fields, read one varint at a time for all records at once:
    (ts delta, offset delta, key length, key position, value length, value position, header
    count, where the headers start)."""
    ts_delta, pos = _varints(arr, starts + 1, rend, MAX_VARLONG_BYTES)
    off_delta, pos = _varints(arr, pos, rend, MAX_VARINT_BYTES)
    key_len, pos = _varints(arr, pos, rend, MAX_VARINT_BYTES)
    key_pos = pos
    pos = pos + np.maximum(key_len, 0)
    value_len, pos = _varints(arr, np.minimum(pos, rend), rend, MAX_VARINT_BYTES)
    value_pos = pos
    pos = pos + np.maximum(value_len, 0)
    if (key_len < -1).any() or (value_len < -1).any() or (pos >= rend).any():
        raise CorruptRecord("a record's key or value length does not fit the record")
    n_headers, pos = _varints(arr, pos, rend, MAX_VARINT_BYTES)
    if (n_headers < 0).any():
        raise CorruptRecord("negative header count in a record")
    if (pos[n_headers == 0] != rend[n_headers == 0]).any():
        raise CorruptRecord("record length does not match its fields")
    return ts_delta, off_delta, key_len, key_pos, value_len, value_pos, n_headers, pos


def _same_layout(raw: Buffer, arr: np.ndarray, run: _Stride, out: _Fields) -> bool:
    """Writes into `out` the fields of a run of equal-sized records when all of them are laid out as its
    first one: same length, key length, value length, no headers, and varints of the same
    widths for the two deltas (checked byte by byte for every record, on a (count, size)
    view of the run: a few column reads instead of a gather per field). False when they
    are not (or the first record is not a plain one): the run is then read field by field."""
    size, p = run.size, run.pos
    try:
        z, at = decode_uvarint(raw, p, 5)
        end = at + (z >> 1)
        if z & 1 or end != p + size:
            return False
        ts_at = at + 1
        z, off_at = decode_uvarint(raw, ts_at, 4)
        z, kl_at = decode_uvarint(raw, off_at, 4)
        z, k_at = decode_uvarint(raw, kl_at, 5)
        klen = (z >> 1) ^ -(z & 1)
        vl_at = k_at + max(klen, 0)
        z, v_at = decode_uvarint(raw, vl_at, 5)
        vlen = (z >> 1) ^ -(z & 1)
    except (IndexError, ProtocolError):
        return False
    # Exactly one header-count byte (0) is left after the value.
    if klen < -1 or vlen < -1 or v_at + max(vlen, 0) != end - 1 or raw[end - 1] != 0:
        return False
    rows = arr[p:p + size * run.count].reshape(run.count, size)
    # Every byte before the key and the value's length byte(s) and the header count: each
    # must equal the first record's, but for the two deltas' bytes, whose continuation bits
    # only must (so their varints are as wide).
    cols = [*range(k_at - p), *range(vl_at - p, v_at - p), size - 1]
    mask = np.full(len(cols), 0xFF, np.uint8)
    mask[ts_at - p:kl_at - p] = 0x80
    mask[at - p] = 0  # the attributes byte, which no decoder reads
    sub = rows[:, cols]
    if ((sub ^ sub[0]) & mask).any():
        return False
    at = slice(run.first, run.first + run.count)
    out.ts_delta[at] = _column_varint(sub, ts_at - p, off_at - p)
    out.off_delta[at] = _column_varint(sub, off_at - p, kl_at - p)
    out.key_len[at] = klen
    out.value_len[at] = vlen
    starts = np.arange(p, p + size * run.count, size, dtype=np.int64)
    np.add(starts, k_at - p, out=out.key_pos[at])
    np.add(starts, v_at - p, out=out.value_pos[at])
    return True


def _column_varint(rows: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """The zigzag varint in columns [lo, hi) of every row (all checked to be that wide)."""
    val = (rows[:, lo] & 0x7F).astype(np.int64)
    for j in range(1, hi - lo):
        val |= (rows[:, lo + j] & 0x7F).astype(np.int64) << (7 * j)
    return (val >> 1) ^ -(val & 1)

def _headers(buf: Buffer, pos: int, end: int, count: int) -> Headers:
    if count > end - pos:
        raise CorruptRecord(f"header count {count} does not fit the record")
    out: Headers = []
    try:
        for _ in range(count):
            z, pos = decode_uvarint(buf, pos, 5)
            n = (z >> 1) ^ -(z & 1)
            if n < 0 or n > end - pos:
                raise CorruptRecord("header key length does not fit the record")
            key = bytes(buf[pos:pos + n]).decode()
            pos += n
            z, pos = decode_uvarint(buf, pos, 5)
            n = (z >> 1) ^ -(z & 1)
            if n < -1 or n > end - pos:
                raise CorruptRecord("header value length does not fit the record")
            out.append((key, None if n < 0 else bytes(buf[pos:pos + n])))
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
