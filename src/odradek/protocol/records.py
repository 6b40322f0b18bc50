"""Kafka record batches (magic 2): header view, validation, building, decoding.

Layout of the 61-byte batch header (big endian)::

    0  base_offset             int64
    8  batch_length            int32   bytes after this field
    12 partition_leader_epoch  int32
    16 magic                   int8    (at offset 16 in every message format)
    17 crc                     uint32  CRC32C over attributes..end of batch
    21 attributes              int16
    23 last_offset_delta       int32
    27 base_timestamp          int64
    35 max_timestamp           int64
    43 producer_id             int64
    51 producer_epoch          int16
    53 base_sequence           int32
    57 records_count           int32
    61 records...

Only the header is read on the hot path: `validate_batches` checks framing and
the CRC, never the records. `decode_records` is for tools, compaction and
internal topics.

Errors: a batch with magic 0 or 1 is refused with INVALID_RECORD (Kafka's
answer: `ProduceRequest.validateRecords` throws InvalidRecordException for
produce v3+ and Kafka 4 dropped the old formats altogether); a CRC mismatch
or broken framing is CORRUPT_MESSAGE (Kafka's CorruptRecordException).
"""

from __future__ import annotations

import enum
import struct
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

import cramjam
from crc32c import crc32c

from odradek.protocol.errors import (
    CorruptRecord,
    ErrorCode,
    InvalidRecord,
    KafkaError,
    ProtocolError,
)
from odradek.protocol.primitives import decode_uvarint, decode_varint, encode_varint, zigzag_decode

__all__ = [
    "ATTR_COMPRESSION_MASK",
    "ATTR_CONTROL",
    "ATTR_DELETE_HORIZON",
    "ATTR_TIMESTAMP_TYPE",
    "ATTR_TRANSACTIONAL",
    "BATCH_HEADER",
    "BATCH_HEADER_SIZE",
    "BATCH_PREFIX",
    "BatchHeader",
    "Compression",
    "ControlRecordType",
    "Record",
    "build_batch",
    "build_control_batch",
    "compress",
    "control_marker",
    "decode_control_record",
    "decode_records",
    "decompress",
    "encode_batch_prefix",
    "iter_batches",
    "patch_base_offset_and_epoch",
    "validate_batches",
]

BATCH_HEADER_SIZE = 61
# Offsets of header fields.
BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = 61
# The 12 bytes before batch_length's payload: base_offset + batch_length.
LOG_OVERHEAD = 12
# batch_length counts everything after itself: at least the rest of the header.
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD
# The prefix the broker rewrites on append (base_offset, batch_length, leader epoch);
# it lies before the CRC'd range, so patching it keeps the CRC valid.
PREFIX_SIZE = 16
CURRENT_MAGIC = 2

ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

# The magic-2 batch header, defined here once for the whole code base: storage, the cleaner,
# produce, the batch builder and the tools import it (and bind its methods locally in hot
# loops). Fields, by index of an unpack result: base_offset, batch_length,
# partition_leader_epoch, magic, crc, attributes, last_offset_delta, base_timestamp,
# max_timestamp, producer_id, producer_epoch, base_sequence, records_count.
BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
(H_BASE, H_LENGTH, H_EPOCH, H_MAGIC, H_CRC, H_ATTRS, H_LAST_DELTA, H_BASE_TS, H_MAX_TS,
 H_PID, H_PEPOCH, H_SEQ, H_COUNT) = range(13)
# base_offset, batch_length, partition_leader_epoch: the prefix the broker rewrites on append.
BATCH_PREFIX = struct.Struct(">qii")
_HEADER = BATCH_HEADER
_PREFIX = BATCH_PREFIX
_CRC = struct.Struct(">I")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_VALUE = struct.Struct(">hi")
assert BATCH_HEADER.size == BATCH_HEADER_SIZE


class Compression(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(enum.IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class ControlRecordType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @classmethod
    def parse(cls, buf: memoryview | bytes, pos: int = 0) -> BatchHeader:
        """Read the header at `pos`. Magic 0/1 -> InvalidRecord, short buffer -> CorruptRecord."""
        left = len(buf) - pos
        if left > MAGIC_OFFSET and buf[pos + MAGIC_OFFSET] != CURRENT_MAGIC:
            raise InvalidRecord(
                f"record batch magic {buf[pos + MAGIC_OFFSET]} is not supported; only magic 2"
            )
        if pos < 0 or left < BATCH_HEADER_SIZE:
            raise CorruptRecord(f"truncated record batch header ({max(left, 0)} bytes)")
        return cls._make(_HEADER.unpack_from(buf, pos))

    @property
    def compression(self) -> Compression:
        # Values 5..7 are invalid codecs; callers that need them check `attributes`.
        c = self.attributes & ATTR_COMPRESSION_MASK
        return Compression(c) if c <= 4 else Compression.NONE

    @property
    def compression_id(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return 1 if self.attributes & ATTR_TIMESTAMP_TYPE else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & ATTR_DELETE_HORIZON)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size(self) -> int:
        """Bytes this batch takes on the wire and on disk."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = ()


# --------------------------------------------------------------------------- #
# framing and validation (hot path)


def _check_frame(buf: memoryview, pos: int, end: int) -> tuple[BatchHeader, int]:
    header = BatchHeader.parse(buf, pos)
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecord(
            f"record batch size {header.size} is less than the minimum record overhead "
            f"({BATCH_HEADER_SIZE})"
        )
    batch_end = pos + header.size
    if batch_end > end:
        raise CorruptRecord(
            f"record batch at byte {pos} declares {header.size} bytes, only {end - pos} left"
        )
    return header, batch_end


def validate_batches(
    buf: memoryview | bytes,
    *,
    check_crc: bool = True,
    from_client: bool = True,
    single_batch: bool = False,
    allow_zstd: bool = True,
) -> list[BatchHeader]:
    """Check a produce request's records blob without reading records.

    Raises InvalidRecord (INVALID_RECORD) for what Kafka refuses as invalid
    (no batch, magic 0/1, more than one batch when `single_batch`, and with
    `from_client` the checks of Kafka's LogValidator for client batches:
    inconsistent count and offset range, control batches, producer id without
    sequence) and CorruptRecord (CORRUPT_MESSAGE) for broken framing or CRC.
    `single_batch` (produce v3+) and `allow_zstd` (False below produce v7:
    UNSUPPORTED_COMPRESSION_TYPE) follow Kafka's ProduceRequest.validateRecords.
    """
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    end = len(view)
    if end == 0:
        raise InvalidRecord("produce requests must have at least one record batch per partition")
    headers: list[BatchHeader] = []
    pos = 0
    while pos < end:
        if single_batch and headers:
            raise InvalidRecord("produce requests may contain exactly one record batch per partition")
        header, batch_end = _check_frame(view, pos, end)
        if not allow_zstd and header.attributes & ATTR_COMPRESSION_MASK == Compression.ZSTD:
            raise KafkaError(
                ErrorCode.unsupported_compression_type,
                "produce requests below version 7 cannot carry zstd-compressed batches",
            )
        if check_crc and crc32c(view[pos + ATTRIBUTES_OFFSET : batch_end]) != header.crc:
            raise CorruptRecord(
                f"record batch at byte {pos} is corrupt (stored crc = {header.crc}, "
                f"computed crc = {crc32c(view[pos + ATTRIBUTES_OFFSET : batch_end])})"
            )
        if header.attributes & ATTR_COMPRESSION_MASK > Compression.ZSTD:
            raise KafkaError(
                ErrorCode.unsupported_compression_type,
                f"unknown compression codec {header.attributes & ATTR_COMPRESSION_MASK}",
            )
        if from_client:
            _check_client_batch(header)
        headers.append(header)
        pos = batch_end
    return headers


def _check_client_batch(h: BatchHeader) -> None:
    count_from_offsets = h.last_offset_delta + 1
    if count_from_offsets <= 0:
        raise InvalidRecord(f"batch has an invalid offset range (last offset delta {h.last_offset_delta})")
    if h.records_count <= 0:
        raise InvalidRecord(f"invalid reported count for record batch: {h.records_count}")
    if count_from_offsets != h.records_count:
        raise InvalidRecord(
            f"inconsistent batch offset range [0, {h.last_offset_delta}] and count of records "
            f"{h.records_count}"
        )
    if h.attributes & ATTR_CONTROL:
        raise InvalidRecord("clients are not allowed to write control records")
    if h.producer_id >= 0 and h.base_sequence < 0:
        raise InvalidRecord(
            f"invalid sequence number {h.base_sequence} for producer id {h.producer_id}"
        )


def iter_batches(buf: memoryview | bytes, *, strict: bool = False) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Yield (header, view of the whole batch) without checking CRCs.

    A trailing partial batch (a fetch cut at max_bytes, a torn log tail) ends
    the iteration quietly, as Kafka's batch iterators do, unless `strict`,
    where it raises CorruptRecord.
    """
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    end = len(view)
    pos = 0
    while pos < end:
        left = end - pos
        if left < BATCH_HEADER_SIZE:
            if left > MAGIC_OFFSET and view[pos + MAGIC_OFFSET] != CURRENT_MAGIC:
                BatchHeader.parse(view, pos)  # raises InvalidRecord
            if strict:
                raise CorruptRecord(f"truncated record batch header at byte {pos}")
            return
        header = BatchHeader.parse(view, pos)
        if header.batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecord(f"record batch size {header.size} below the minimum at byte {pos}")
        if header.size > left:
            if strict:
                raise CorruptRecord(f"record batch at byte {pos} truncated")
            return
        yield header, view[pos : pos + header.size]
        pos += header.size


def batch_crc_ok(batch: memoryview | bytes) -> bool:
    """True when the stored CRC matches (batch is one whole batch)."""
    if len(batch) < BATCH_HEADER_SIZE:
        return False
    return crc32c(batch[ATTRIBUTES_OFFSET:]) == _CRC.unpack_from(batch, CRC_OFFSET)[0]


def encode_batch_prefix(base_offset: int, batch_length: int, leader_epoch: int) -> bytes:
    """The 16 bytes the broker writes in front of a batch's unchanged rest."""
    return _PREFIX.pack(base_offset, batch_length, leader_epoch)


def patch_base_offset_and_epoch(batch_prefix: memoryview | bytes, base_offset: int, leader_epoch: int) -> bytes:
    """A replacement for a batch's first 16 bytes with a new base offset and leader epoch."""
    if len(batch_prefix) < PREFIX_SIZE:
        raise CorruptRecord("batch prefix shorter than 16 bytes")
    (batch_length,) = _I32.unpack_from(batch_prefix, LENGTH_OFFSET)
    return _PREFIX.pack(base_offset, batch_length, leader_epoch)


# --------------------------------------------------------------------------- #
# compression

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
# snappy-java's SnappyOutputStream default block size, which Kafka's Java producer uses.
_XERIAL_BLOCK = 32 * 1024


def compress(codec: int, data: bytes | memoryview) -> bytes:
    if codec == Compression.NONE:
        return bytes(data)
    if codec == Compression.GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == Compression.SNAPPY:
        # Kafka's Java producer writes snappy-java's "xerial" framing; every client decodes it.
        out = bytearray(_XERIAL_HEADER.pack(_XERIAL_MAGIC, 1, 1))
        view = memoryview(data)
        for i in range(0, len(view), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(view[i : i + _XERIAL_BLOCK]))
            out += _I32.pack(len(block))
            out += block
        return bytes(out)
    if codec == Compression.LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == Compression.ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise KafkaError(ErrorCode.unsupported_compression_type, f"unknown compression codec {codec}")


def _snappy_decompress(data: bytes | memoryview) -> bytes:
    view = memoryview(data)
    if len(view) >= 16 and bytes(view[:8]) == _XERIAL_MAGIC:
        out = bytearray()
        pos = 16
        end = len(view)
        while pos < end:
            if end - pos < 4:
                raise CorruptRecord("truncated xerial snappy block length")
            (n,) = _I32.unpack_from(view, pos)
            pos += 4
            if n < 0 or n > end - pos:
                raise CorruptRecord("xerial snappy block length exceeds the data")
            out += cramjam.snappy.decompress_raw(view[pos : pos + n])
            pos += n
        return bytes(out)
    return bytes(cramjam.snappy.decompress_raw(view))


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    try:
        if codec == Compression.NONE:
            return bytes(data)
        if codec == Compression.GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == Compression.SNAPPY:
            return _snappy_decompress(data)
        if codec == Compression.LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == Compression.ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except KafkaError:
        raise
    except Exception as exc:  # cramjam raises its own DecompressionError, and ValueError/OSError
        raise CorruptRecord(f"cannot decompress {Compression(codec).name} records: {exc}") from None
    raise KafkaError(ErrorCode.unsupported_compression_type, f"unknown compression codec {codec}")


# --------------------------------------------------------------------------- #
# records (not the hot path)


def decode_records(header: BatchHeader, batch: memoryview | bytes) -> list[Record]:
    """Decode every record of one whole batch (decompressing if needed)."""
    view = batch if isinstance(batch, memoryview) else memoryview(batch)
    if len(view) < header.size or header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecord("record batch shorter than its declared size")
    body: memoryview | bytes = view[RECORDS_OFFSET : header.size]
    codec = header.attributes & ATTR_COMPRESSION_MASK
    if codec != Compression.NONE:
        body = decompress(codec, body)
    count = header.records_count
    if count < 0 or count > len(body):
        # A record takes at least 7 bytes; a count above the bytes present is a lie.
        raise CorruptRecord(f"record count {count} does not fit the batch")
    log_append = bool(header.attributes & ATTR_TIMESTAMP_TYPE)
    try:
        records, pos = _decode_record_list(body, count, header, log_append)
    except ProtocolError as exc:
        raise CorruptRecord(f"malformed record: {exc}") from None
    if pos != len(body):
        raise CorruptRecord(f"{len(body) - pos} bytes left after the batch's {count} records")
    return records


def _take(buf: memoryview | bytes, pos: int, n: int, end: int) -> tuple[bytes | None, int]:
    if n == -1:
        return None, pos
    if n < 0 or n > end - pos:
        raise ProtocolError(f"length {n} exceeds the {end - pos} bytes left")
    return bytes(buf[pos : pos + n]), pos + n


def _decode_record_list(
    body: memoryview | bytes, count: int, header: BatchHeader, log_append: bool
) -> tuple[list[Record], int]:
    end = len(body)
    pos = 0
    base_offset = header.base_offset
    base_ts = header.base_timestamp
    out: list[Record] = []
    for _ in range(count):
        length_z, pos = decode_uvarint(body, pos, 5)
        length = zigzag_decode(length_z)
        if length < 0 or length > end - pos:
            raise ProtocolError(f"record length {length} exceeds the {end - pos} bytes left")
        rec_end = pos + length
        pos += 1  # attributes, unused
        ts_delta, pos = decode_uvarint(body, pos, 10)
        off_delta, pos = decode_uvarint(body, pos, 5)
        klen, pos = decode_uvarint(body, pos, 5)
        key, pos = _take(body, pos, zigzag_decode(klen), rec_end)
        vlen, pos = decode_uvarint(body, pos, 5)
        value, pos = _take(body, pos, zigzag_decode(vlen), rec_end)
        hcount_z, pos = decode_uvarint(body, pos, 5)
        hcount = zigzag_decode(hcount_z)
        if hcount < 0 or hcount > rec_end - pos:
            raise ProtocolError(f"header count {hcount} does not fit the record")
        headers: list[tuple[str, bytes | None]] = []
        for _h in range(hcount):
            hk_len, pos = decode_uvarint(body, pos, 5)
            hk, pos = _take(body, pos, zigzag_decode(hk_len), rec_end)
            if hk is None:
                raise ProtocolError("null header key")
            hv_len, pos = decode_uvarint(body, pos, 5)
            hv, pos = _take(body, pos, zigzag_decode(hv_len), rec_end)
            try:
                headers.append((hk.decode(), hv))
            except UnicodeDecodeError:
                raise ProtocolError("header key is not utf-8") from None
        if pos != rec_end:
            raise ProtocolError("record length does not match its fields")
        ts = header.max_timestamp if log_append else base_ts + zigzag_decode(ts_delta)
        out.append(Record(base_offset + zigzag_decode(off_delta), ts, key, value, headers))
    return out, pos


def _encode_record(
    offset_delta: int, ts_delta: int, key: bytes | memoryview | None,
    value: bytes | memoryview | None, headers: Iterable[tuple[str, bytes | memoryview | None]],
) -> bytes:
    body = bytearray(b"\x00")  # attributes
    body += encode_varint(ts_delta)
    body += encode_varint(offset_delta)
    if key is None:
        body += b"\x01"  # varint -1
    else:
        body += encode_varint(len(key))
        body += key
    if value is None:
        body += b"\x01"
    else:
        body += encode_varint(len(value))
        body += value
    hs = list(headers)
    body += encode_varint(len(hs))
    for hk, hv in hs:
        kb = hk.encode()
        body += encode_varint(len(kb))
        body += kb
        if hv is None:
            body += b"\x01"
        else:
            body += encode_varint(len(hv))
            body += hv
    return encode_varint(len(body)) + bytes(body)


def _now_ms() -> int:
    return int(time.time() * 1000)


def build_batch(
    records: Sequence[Record],
    base_offset: int = 0,
    compression: int = Compression.NONE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    timestamp_type: int = TimestampType.CREATE_TIME,
    log_append_time_ms: int | None = None,
) -> bytes:
    """Build one magic-2 batch.

    A record's offset is absolute; an offset < 0 means "next in sequence"
    (base_offset + index). A timestamp < 0 means now. With timestamp_type 1
    (LogAppendTime) max_timestamp is `log_append_time_ms` (default now).
    """
    if not records:
        raise ValueError("a record batch needs at least one record")
    now = _now_ms()
    timestamps = [r.timestamp if r.timestamp >= 0 else now for r in records]
    base_ts = timestamps[0]
    parts: list[bytes] = []
    last_delta = 0
    for i, (rec, ts) in enumerate(zip(records, timestamps, strict=True)):
        delta = rec.offset - base_offset if rec.offset >= 0 else i
        if delta < last_delta and i:
            raise ValueError("record offsets must increase within a batch")
        last_delta = delta
        parts.append(_encode_record(delta, ts - base_ts, rec.key, rec.value, rec.headers))
    body = b"".join(parts)
    if compression != Compression.NONE:
        body = compress(compression, body)
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        max_ts = log_append_time_ms if log_append_time_ms is not None else now
    else:
        max_ts = max(timestamps)
    attributes = compression & ATTR_COMPRESSION_MASK
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= ATTR_TIMESTAMP_TYPE
    if transactional:
        attributes |= ATTR_TRANSACTIONAL
    if is_control:
        attributes |= ATTR_CONTROL
    batch_length = BATCH_HEADER_SIZE - LOG_OVERHEAD + len(body)
    header = bytearray(
        _HEADER.pack(
            base_offset, batch_length, partition_leader_epoch, CURRENT_MAGIC, 0, attributes,
            last_delta, base_ts, max_ts, producer_id, producer_epoch, base_sequence, len(records),
        )
    )
    crc = crc32c(body, crc32c(memoryview(header)[ATTRIBUTES_OFFSET:]))
    _CRC.pack_into(header, CRC_OFFSET, crc)
    return bytes(header) + body


def build_control_batch(
    control_type: int,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    coordinator_epoch: int = 0,
    base_offset: int = 0,
    timestamp: int = -1,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    value: bytes | None = None,
    control_version: int = 0,
) -> bytes:
    """A one-record control batch.

    The key is (version int16, type int16). For ABORT/COMMIT the value is the
    EndTxnMarker (version int16 = 0, coordinator_epoch int32) and the batch is
    transactional; other types (KRaft's LEADER_CHANGE, snapshot markers, ...)
    carry the caller's `value`.
    """
    is_txn_marker = control_type in (ControlRecordType.ABORT, ControlRecordType.COMMIT)
    if value is None and is_txn_marker:
        value = _END_TXN_VALUE.pack(0, coordinator_epoch)
    key = _CONTROL_KEY.pack(control_version, control_type)
    return build_batch(
        [Record(base_offset, timestamp, key, value, ())],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=is_txn_marker,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )


class ControlRecord(NamedTuple):
    version: int
    type: int
    coordinator_epoch: int | None  # set for ABORT/COMMIT markers


def decode_control_record(record: Record) -> ControlRecord:
    key = record.key
    if key is None or len(key) < 4:
        raise CorruptRecord("control record key shorter than 4 bytes")
    version, ctype = _CONTROL_KEY.unpack_from(key, 0)
    epoch = None
    if ctype in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        value = record.value
        if value is None or len(value) < 6:
            raise CorruptRecord("end transaction marker value shorter than 6 bytes")
        _, epoch = _END_TXN_VALUE.unpack_from(value, 0)
    return ControlRecord(version, ctype, epoch)


def control_marker(batch: bytes | memoryview) -> tuple[int, int]:
    """(control type, coordinator epoch) of a whole control batch's one record, read from the
    raw bytes without decoding the batch (control batches are never compressed); (-1, -1)
    when it cannot be read. The coordinator epoch is -1 for non-marker control records."""
    try:
        _, pos = decode_varint(batch, BATCH_HEADER_SIZE)  # record length
        _, pos = decode_varint(batch, pos + 1)  # (attributes) timestamp delta
        _, pos = decode_varint(batch, pos)  # offset delta
        key_len, pos = decode_varint(batch, pos)
        if key_len < 4 or pos + 4 > len(batch):
            return -1, -1
        ctype = _CONTROL_KEY.unpack_from(batch, pos)[1]
        value_len, pos = decode_varint(batch, pos + key_len)
        coord = -1
        if value_len >= _END_TXN_VALUE.size and pos + _END_TXN_VALUE.size <= len(batch):
            coord = _END_TXN_VALUE.unpack_from(batch, pos)[1]
        return ctype, coord
    except (ProtocolError, struct.error):
        return -1, -1
