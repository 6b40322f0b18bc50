"""Record batches as the cleaner reads and rewrites them.

Whole batches of a segment read in large blocks, the record-level scan of a batch body
(offset delta, timestamp delta, key, tombstone), and the rebuild of a batch from the
records it keeps (or an empty batch that keeps a producer's last offsets), recompressed
with its own codec. The cleaner (log_cleaner.py) decides what to keep; this module only
reads and writes the bytes. Also `has_keyless_record`, which the log validator uses.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterator

from crc32c import crc32c

from odradek.protocol.errors import ProtocolError
from odradek.protocol.primitives import decode_uvarint_short as _uvarint
from odradek.protocol.records import (
    ATTR_COMPRESSION_MASK,
    ATTRIBUTES_OFFSET,
    BATCH_HEADER,
    BATCH_HEADER_SIZE,
    CRC_OFFSET,
    CURRENT_MAGIC,
    LOG_OVERHEAD,
    RECORDS_OFFSET,
    BatchHeader,
    Record,
    _encode_record,
    compress,
    decompress,
)

log = logging.getLogger(__name__)

_HEADER = BATCH_HEADER  # protocol.records' one definition
_READ_BLOCK = 1024 * 1024


class _Batches:
    """Whole batches of a segment, read through a private dup of its fd in large blocks."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd = fd
        self.size = size

    def __iter__(self) -> Iterator[tuple[BatchHeader, memoryview]]:
        pos = 0
        buf = b""
        buf_start = 0
        while pos + BATCH_HEADER_SIZE <= self.size:
            off = pos - buf_start
            if off + BATCH_HEADER_SIZE > len(buf):
                buf = os.pread(self.fd, min(_READ_BLOCK, self.size - pos), pos)
                buf_start, off = pos, 0
            h = BatchHeader.parse(buf, off)
            total = h.batch_length + LOG_OVERHEAD
            if total < BATCH_HEADER_SIZE or pos + total > self.size:
                raise ProtocolError(f"bad batch framing at position {pos}")
            if off + total > len(buf):
                buf = os.pread(self.fd, max(total, min(_READ_BLOCK, self.size - pos)), pos)
                buf_start, off = pos, 0
                if len(buf) < total:
                    raise ProtocolError(f"short read at position {pos}")
            yield h, memoryview(buf)[off : off + total]
            pos += total


# (start, end) of a record's bytes (length prefix included) in the batch body, its offset delta,
# timestamp delta, key and whether it is a tombstone
_Scanned = tuple[int, int, int, int, bytes | None, bool]


def batch_body(h: BatchHeader, data: memoryview | bytes) -> bytes:
    body = bytes(data[RECORDS_OFFSET : h.size])
    codec = h.compression_id
    return decompress(codec, body) if codec else body


def scan_records(body: bytes, count: int) -> list[_Scanned]:
    """Where each record sits in a batch body, with its offset and timestamp deltas, key and
    tombstone flag: what compaction decides on, without decoding values or headers.
    (Varints of one and two bytes, nearly all of them, are read inline: this is the loop the
    cleaner spends its time in.)"""
    out: list[_Scanned] = []
    append = out.append
    n = len(body)
    pos = 0
    try:
        for _ in range(count):
            start = pos
            v = body[pos]
            if v < 0x80:
                pos += 1
            else:
                v, pos = _uvarint(body, pos)
            length = (v >> 1) ^ -(v & 1)
            end = pos + length
            if length < 6 or end > n:
                raise ProtocolError(f"record length {length} does not fit the batch")
            p = pos + 1  # after the attributes byte
            v = body[p]
            if v < 0x80:
                p += 1
            else:
                v, p = _uvarint(body, p)
            ts_delta = (v >> 1) ^ -(v & 1)
            v = body[p]
            if v < 0x80:
                p += 1
            else:
                v, p = _uvarint(body, p)
            off_delta = (v >> 1) ^ -(v & 1)
            v = body[p]
            if v < 0x80:
                p += 1
            else:
                v, p = _uvarint(body, p)
            klen = (v >> 1) ^ -(v & 1)
            key = None
            if klen >= 0:
                if p + klen > end:
                    raise ProtocolError("record key runs past the record")
                key = body[p : p + klen]
                p += klen
            append((start, end, off_delta, ts_delta, key, body[p] == 1))  # zigzag(-1) == 1
            pos = end
    except IndexError:
        raise ProtocolError("truncated record") from None
    if pos != n:
        raise ProtocolError(f"{n - pos} bytes left after the batch's {count} records")
    return out


def has_keyless_record(batch: memoryview | bytes, h: BatchHeader) -> bool:
    """Whether a (validated) batch holds a record without a key: a compacted topic refuses it
    on produce (Kafka's LogValidator). Only the keys are looked at."""
    if h.is_control:
        return False
    return any(rec[4] is None for rec in scan_records(batch_body(h, batch), h.records_count))


def keyless_record_indexes(batch: memoryview | bytes, h: BatchHeader) -> list[int]:
    """The positions in a (validated) batch of its records without a key, in order: the
    record_errors of Kafka's answer (KIP-467) when a compacted topic refuses them."""
    if h.is_control:
        return []
    return [i for i, rec in enumerate(scan_records(batch_body(h, batch), h.records_count))
            if rec[4] is None]


def encode_batch(
    h: BatchHeader, records: list[Record], base_timestamp: int, attributes: int
) -> bytes:
    """A batch with `h`'s base offset, last offset delta, producer fields, leader epoch and
    codec, holding `records` (their offsets and timestamps kept)."""
    body = b"".join(
        _encode_record(r.offset - h.base_offset, r.timestamp - base_timestamp, r.key, r.value,
                       r.headers)
        for r in records
    )
    codec = h.compression_id
    if codec:
        body = compress(codec, body)
    max_ts = h.max_timestamp if h.timestamp_type == 1 else max(r.timestamp for r in records)
    length = BATCH_HEADER_SIZE - LOG_OVERHEAD + len(body)
    header = bytearray(_HEADER.pack(
        h.base_offset, length, h.partition_leader_epoch, CURRENT_MAGIC, 0, attributes,
        h.last_offset_delta, base_timestamp, max_ts, h.producer_id, h.producer_epoch,
        h.base_sequence, len(records),
    ))
    crc = crc32c(body, crc32c(memoryview(header)[ATTRIBUTES_OFFSET:]))
    struct.pack_into(">I", header, CRC_OFFSET, crc)
    return bytes(header) + body


def empty_batch(h: BatchHeader) -> bytes:
    """`h`'s batch without records (uncompressed), keeping offsets, timestamps and producer
    fields: what Kafka leaves of a producer's last batch when compaction empties it."""
    attributes = h.attributes & ~ATTR_COMPRESSION_MASK
    length = BATCH_HEADER_SIZE - LOG_OVERHEAD
    header = bytearray(_HEADER.pack(
        h.base_offset, length, h.partition_leader_epoch, CURRENT_MAGIC, 0, attributes,
        h.last_offset_delta, h.base_timestamp, h.max_timestamp, h.producer_id, h.producer_epoch,
        h.base_sequence, 0,
    ))
    struct.pack_into(">I", header, CRC_OFFSET, crc32c(memoryview(header)[ATTRIBUTES_OFFSET:]))
    return bytes(header)


def rebuild_batch(h: BatchHeader, body: bytes, kept: list[_Scanned]) -> bytes:
    """`h`'s batch holding only the `kept` records, their bytes unchanged (recompressed with the
    batch's codec); base and last offset, timestamps base, producer fields stay."""
    new_body: bytes = b"".join(body[s:e] for s, e, *_ in kept)
    codec = h.compression_id
    if codec:
        new_body = compress(codec, new_body)
    if h.timestamp_type == 1:
        max_ts = h.max_timestamp
    else:
        max_ts = h.base_timestamp + max(rec[3] for rec in kept)
    length = BATCH_HEADER_SIZE - LOG_OVERHEAD + len(new_body)
    header = bytearray(_HEADER.pack(
        h.base_offset, length, h.partition_leader_epoch, CURRENT_MAGIC, 0, h.attributes,
        h.last_offset_delta, h.base_timestamp, max_ts, h.producer_id, h.producer_epoch,
        h.base_sequence, len(kept),
    ))
    crc = crc32c(new_body, crc32c(memoryview(header)[ATTRIBUTES_OFFSET:]))
    struct.pack_into(">I", header, CRC_OFFSET, crc)
    return bytes(header) + new_body
