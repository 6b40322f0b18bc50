"""Produce request decoding and response encoding by hand (the hot path).

Request layout by version:
  v0-2:  acks int16, timeout_ms int32, [topic string, [partition int32, records bytes]]
  v3-8:  transactional_id nullable string first
  v9+:   flexible: compact strings/arrays/bytes and tagged fields after every struct
  v12:   same wire format as v11 (KIP-890 semantics only)
  v13:   topics by id (uuid) instead of name, in the request and the response (Kafka 4.1, KIP-516)

Records stay memoryviews into the request frame: nothing of a batch is read here, except by
`validate_produce_batch`, the single-batch (v3+) fast path of `records.validate_batches`.

The non-flexible versions (v0-v8, what librdkafka sends up to Kafka 2.x brokers and the
Java client below v9) are read with struct calls at running offsets, no Reader; anything
the fast path does not expect (a null array, a short buffer, bad UTF-8) goes to the generic
path, which gives the result or raises the error: both paths answer the same by construction
(and tests/unit/protocol/test_produce_fast.py checks it on arbitrary bytes).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import NamedTuple

from crc32c import crc32c

from odradek.protocol.errors import ProtocolError, UnsupportedVersion
from odradek.protocol.primitives import Reader, encode_uvarint
from odradek.protocol.records import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTRIBUTES_OFFSET,
    BATCH_HEADER,
    BATCH_HEADER_SIZE,
    CURRENT_MAGIC,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MIN_BATCH_LENGTH,
    BatchHeader,
    Compression,
    validate_batches,
)

__all__ = [
    "MAX_PRODUCE_VERSION",
    "PartitionResult",
    "ProduceRequest",
    "TopicData",
    "decode_produce_request",
    "encode_produce_response",
    "validate_produce_batch",
]

MAX_PRODUCE_VERSION = 13
TOPIC_ID_VERSION = 13
_FIRST_FLEXIBLE = 9

_HI = struct.Struct(">hi")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_II = struct.Struct(">ii")
_IHQ = struct.Struct(">ihq")
_Q = struct.Struct(">q")
_HII = struct.Struct(">hii")
_BATCH_HEADER = BATCH_HEADER  # protocol.records' one definition
_ZSTD = int(Compression.ZSTD)


class TopicData(NamedTuple):
    name: str  # "" from v13, which names the topic by id
    partitions: list[tuple[int, memoryview | None]]
    topic_id: uuid.UUID | None = None  # v13+


class ProduceRequest(NamedTuple):
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topics: list[TopicData]


class PartitionResult(NamedTuple):
    index: int
    error_code: int
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    record_errors: Sequence[tuple[int, str | None]] = ()
    error_message: str | None = None


def decode_produce_request(frame: memoryview | bytes, offset: int, version: int) -> ProduceRequest:
    """Decode a produce request body (after the header). Raises ProtocolError only."""
    if not 0 <= version <= MAX_PRODUCE_VERSION:
        raise UnsupportedVersion(0, version)
    if version < _FIRST_FLEXIBLE:
        fast = _decode_legacy_fast(frame, offset, version >= 3)
        if fast is not None:
            return fast
    return _decode_generic(frame, offset, version)


def _decode_generic(frame: memoryview | bytes, offset: int, version: int) -> ProduceRequest:
    r = Reader(frame, offset)
    if version >= _FIRST_FLEXIBLE:
        return _decode_flexible(r, version >= TOPIC_ID_VERSION)
    txn_id = r.nullable_string() if version >= 3 else None
    buf = r.buf
    end = r.end
    pos = r.pos
    if end - pos < 6:
        raise ProtocolError("truncated produce request")
    acks, timeout_ms = _HI.unpack_from(buf, pos)
    r.pos = pos + 6
    n_topics = r.array_len()
    topics: list[TopicData] = []
    for _ in range(n_topics or 0):
        name = r.string()
        n_parts = r.array_len()
        parts: list[tuple[int, memoryview | None]] = []
        for _ in range(n_parts or 0):
            pos = r.pos
            if end - pos < 8:
                raise ProtocolError("truncated produce partition")
            index, size = _II.unpack_from(buf, pos)
            pos += 8
            if size == -1:
                parts.append((index, None))
            else:
                if size < 0 or size > end - pos:
                    raise ProtocolError(f"records length {size} exceeds the {end - pos} bytes left")
                parts.append((index, buf[pos : pos + size]))
                pos += size
            r.pos = pos
        topics.append(TopicData(name, parts))
    return ProduceRequest(txn_id, acks, timeout_ms, topics)


def _decode_legacy_fast(frame: memoryview | bytes, pos: int, has_txn_id: bool
                        ) -> ProduceRequest | None:
    """The v0-v8 body of a well-formed request, or None: the generic path then decides."""
    buf = frame if isinstance(frame, memoryview) else memoryview(frame)
    end = len(buf)
    if pos < 0 or pos > end:
        return None
    txn_id: str | None = None
    try:
        if has_txn_id:
            if end - pos < 2:
                return None
            (n,) = _I16.unpack_from(buf, pos)
            pos += 2
            if n >= 0:
                if end - pos < n:
                    return None
                txn_id = str(buf[pos : pos + n], "utf-8")
                pos += n
            elif n != -1:
                return None
        if end - pos < 10:
            return None
        acks, timeout_ms, n_topics = _HII.unpack_from(buf, pos)
        pos += 10
        if n_topics < 0 or n_topics > end - pos:
            return None
        topics: list[TopicData] = []
        for _ in range(n_topics):
            if end - pos < 2:
                return None
            (n,) = _I16.unpack_from(buf, pos)
            pos += 2
            if n < 0 or end - pos < n + 4:
                return None
            name = str(buf[pos : pos + n], "utf-8")
            pos += n
            (n_parts,) = _I32.unpack_from(buf, pos)
            pos += 4
            if n_parts < 0 or n_parts > end - pos:
                return None
            parts: list[tuple[int, memoryview | None]] = []
            for _ in range(n_parts):
                if end - pos < 8:
                    return None
                index, size = _II.unpack_from(buf, pos)
                pos += 8
                if size == -1:
                    parts.append((index, None))
                elif 0 <= size <= end - pos:
                    parts.append((index, buf[pos : pos + size]))
                    pos += size
                else:
                    return None
            topics.append(_new_tuple(TopicData, (name, parts, None)))
    except UnicodeDecodeError:
        return None
    # tuple.__new__ straight: a NamedTuple's own __new__ is a Python frame per call
    return _new_tuple(ProduceRequest, (txn_id, acks, timeout_ms, topics))


def _decode_flexible(r: Reader, by_id: bool) -> ProduceRequest:
    txn_id = r.compact_nullable_string()
    buf = r.buf
    end = r.end
    pos = r.pos
    if end - pos < 6:
        raise ProtocolError("truncated produce request")
    acks, timeout_ms = _HI.unpack_from(buf, pos)
    r.pos = pos + 6
    n_topics = r.compact_array_len()
    topics: list[TopicData] = []
    for _ in range(n_topics or 0):
        topic_id = r.uuid() if by_id else None
        name = "" if by_id else r.compact_string()
        n_parts = r.compact_array_len()
        parts: list[tuple[int, memoryview | None]] = []
        for _ in range(n_parts or 0):
            index = r.int32()
            parts.append((index, r.compact_nullable_bytes()))
            r.skip_tagged_fields()
        r.skip_tagged_fields()
        topics.append(TopicData(name, parts, topic_id))
    r.skip_tagged_fields()
    return ProduceRequest(txn_id, acks, timeout_ms, topics)


_new_tuple = tuple.__new__


def validate_produce_batch(records: memoryview, allow_zstd: bool = True) -> list[BatchHeader]:
    """`validate_batches(records, single_batch=True, allow_zstd=...)`, faster for the batch a
    client sends (one whole magic-2 batch, CRC right): the header is unpacked once, the CRC
    checked, Kafka's LogValidator checks made inline. Anything else goes to validate_batches,
    which raises the error it raises; the records themselves are never read."""
    end = len(records)
    if end >= BATCH_HEADER_SIZE and records[MAGIC_OFFSET] == CURRENT_MAGIC:
        h = _BATCH_HEADER.unpack_from(records, 0)
        # base_offset, batch_length, leader_epoch, magic, crc, attributes, last_offset_delta,
        # base_ts, max_ts, producer_id, producer_epoch, base_sequence, records_count
        attributes = h[5]
        codec = attributes & ATTR_COMPRESSION_MASK
        count = h[12]
        if (
            h[1] + LOG_OVERHEAD == end
            and h[1] >= MIN_BATCH_LENGTH
            and (codec < _ZSTD or (codec == _ZSTD and allow_zstd))
            and not attributes & ATTR_CONTROL
            and count > 0
            and h[6] + 1 == count
            and (h[9] < 0 or h[11] >= 0)
            and crc32c(records[ATTRIBUTES_OFFSET:]) == h[4]
        ):
            # tuple.__new__ straight: BatchHeader._make is a Python frame per batch
            return [_new_tuple(BatchHeader, h)]
    return validate_batches(records, single_batch=True, allow_zstd=allow_zstd)


# --------------------------------------------------------------------------- #


def _legacy_str(out: bytearray, s: str) -> None:
    data = s.encode()
    out += _I16.pack(len(data))
    out += data


def _legacy_nullable_str(out: bytearray, s: str | None) -> None:
    if s is None:
        out += b"\xff\xff"
    else:
        _legacy_str(out, s)


def _compact_str(out: bytearray, s: str) -> None:
    data = s.encode()
    out += encode_uvarint(len(data) + 1)
    out += data


def _compact_nullable_str(out: bytearray, s: str | None) -> None:
    if s is None:
        out += b"\x00"
    else:
        _compact_str(out, s)


def encode_produce_response(
    version: int,
    topics: Sequence[tuple[str | uuid.UUID, Sequence[PartitionResult]]],
    throttle_time_ms: int = 0,
) -> bytes:
    """A produce response body (no header) for v0..v13; from v13 each topic is its id.

    v1 adds throttle_time_ms, v2 log_append_time_ms, v5 log_start_offset,
    v8 record_errors and error_message, v9 the flexible encoding; the v10+
    tagged fields (current_leader, node_endpoints) are left out (empty).
    """
    if not 0 <= version <= MAX_PRODUCE_VERSION:
        raise UnsupportedVersion(0, version)
    flexible = version >= _FIRST_FLEXIBLE
    out = bytearray()
    if flexible:
        out += encode_uvarint(len(topics) + 1)
    else:
        out += _I32.pack(len(topics))
    for name, parts in topics:
        if isinstance(name, uuid.UUID):
            if version < TOPIC_ID_VERSION:
                raise ValueError(f"produce v{version} names topics, not ids")
            out += name.bytes
            out += encode_uvarint(len(parts) + 1)
        elif version >= TOPIC_ID_VERSION:
            raise ValueError(f"produce v{version} names topics by id")
        elif flexible:
            _compact_str(out, name)
            out += encode_uvarint(len(parts) + 1)
        else:
            _legacy_str(out, name)
            out += _I32.pack(len(parts))
        for p in parts:
            out += _IHQ.pack(p.index, p.error_code, p.base_offset)
            if version >= 2:
                out += _Q.pack(p.log_append_time_ms)
            if version >= 5:
                out += _Q.pack(p.log_start_offset)
            if version >= 8:
                errs = p.record_errors
                if flexible:
                    out += encode_uvarint(len(errs) + 1)
                    for batch_index, message in errs:
                        out += _I32.pack(batch_index)
                        _compact_nullable_str(out, message)
                        out += b"\x00"
                    _compact_nullable_str(out, p.error_message)
                else:
                    out += _I32.pack(len(errs))
                    for batch_index, message in errs:
                        out += _I32.pack(batch_index)
                        _legacy_nullable_str(out, message)
                    _legacy_nullable_str(out, p.error_message)
            if flexible:
                out += b"\x00"
        if flexible:
            out += b"\x00"
    if version >= 1:
        out += _I32.pack(throttle_time_ms)
    if flexible:
        out += b"\x00"
    return bytes(out)
