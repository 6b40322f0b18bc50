"""Kafka's LogValidator: what a leader checks of a produce request's records before appending.

Once per batch, from its 61-byte header, without decoding records and without copying them:

- framing, CRC, magic 2, the client-batch rules (`protocol.produce.validate_produce_batch`,
  one header unpack for the single batch of produce v3+; `records.validate_batches` else);
- the compression the request's version allows: ZSTD needs Produce v7+ (Kafka's
  ProduceRequest.validateRecords), UNSUPPORTED_COMPRESSION_TYPE below;
- size: a batch over the topic's max.message.bytes (the broker's message.max.bytes unless the
  topic overrides it) is MESSAGE_TOO_LARGE, records over segment.bytes RECORD_LIST_TOO_LARGE;
- compacted topics refuse a record without key (INVALID_RECORD): the one check that reads
  into the records (their keys only), and only on compacted topics;
- message.timestamp.before.max.ms / after.max.ms (CreateTime topics, when set below their
  unbounded default): INVALID_TIMESTAMP. Kafka looks at every record's timestamp; the header
  gives the first record's and the largest, which bound them for a client's batch;
- message.timestamp.type=LogAppendTime: the batch is stamped with the broker's clock (the one
  copy the produce path makes, as Kafka rewrites those batches too).

The producer-state check (idempotence, transactions) is not here: it runs in `Log.append_as_leader`,
under the log's lock, next to where the batch's producer state is recorded.
"""

from __future__ import annotations

import struct
import time

from crc32c import crc32c

from odradek.protocol.errors import ErrorCode, InvalidRecord, KafkaError
from odradek.protocol.produce import validate_produce_batch
from odradek.protocol.records import (
    ATTR_TIMESTAMP_TYPE,
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    BatchHeader,
    validate_batches,
)
from odradek.storage.cleaner.batches import keyless_record_indexes
from odradek.storage.config import LONG_MAX, LogConfig

__all__ = ["ZSTD_MIN_PRODUCE_VERSION", "ValidatedRecords", "stamp_log_append_time",
           "validate_records"]

# Kafka: "Produce requests with version < 7 are not allowed to use ZStandard compression"
ZSTD_MIN_PRODUCE_VERSION = 7
# produce v3+ carries exactly one batch per partition
SINGLE_BATCH_MIN_PRODUCE_VERSION = 3
LOG_APPEND_TIME = "LogAppendTime"


# What validate_records returns: the batches to append, in order, as (batch, header): views
# into the request (or, for LogAppendTime, the stamped copies); and the LogAppendTime stamped
# on them, -1 for none. A plain tuple: this runs once per partition of every produce request.
ValidatedRecords = tuple[list[tuple[memoryview, BatchHeader]], int]


def validate_records(records: memoryview | None, config: LogConfig, produce_version: int,
                     topic: str = "", partition: int = -1,
                     now_ms: int | None = None) -> ValidatedRecords:
    """Check a produce request's records for `topic`-`partition` (named in error messages);
    raises KafkaError (the partition's error code) or ProtocolError (framing the checks could
    not follow: CORRUPT_MESSAGE)."""
    if records is None:
        raise InvalidRecord("produce request without records")
    size = len(records)
    if size == 0:
        raise InvalidRecord("produce request without records")
    allow_zstd = produce_version >= ZSTD_MIN_PRODUCE_VERSION
    if produce_version >= SINGLE_BATCH_MIN_PRODUCE_VERSION:
        headers = validate_produce_batch(records, allow_zstd)
    else:
        headers = validate_batches(records, allow_zstd=allow_zstd)
    max_bytes = config.max_message_bytes
    for h in headers:
        if h.batch_length + 12 > max_bytes:
            raise KafkaError(ErrorCode.message_too_large,
                             f"batch of {h.size} bytes exceeds max.message.bytes {max_bytes}")
    if size > config.segment_bytes:
        raise KafkaError(ErrorCode.record_list_too_large,
                         f"records of {size} bytes exceed segment.bytes {config.segment_bytes}")
    # the policy is a list of "compact"/"delete": a substring test is the same test
    if "compact" in config.cleanup_policy:
        _check_keys(records, headers, f"{topic}-{partition}")
    stamp = config.message_timestamp_type == LOG_APPEND_TIME
    if not stamp and (config.message_timestamp_before_max_ms != LONG_MAX
                      or config.message_timestamp_after_max_ms != LONG_MAX):
        _check_timestamps(headers, config, _now(now_ms), f"{topic}-{partition}")
    if len(headers) == 1:
        batches = [(records, headers[0])]
    else:
        batches = []
        pos = 0
        for h in headers:
            end = pos + h.batch_length + 12
            batches.append((records[pos:end], h))
            pos = end
    if not stamp:
        return batches, -1
    append_time = _now(now_ms)
    return [stamp_log_append_time(b, append_time) for b, _ in batches], append_time


def _now(now_ms: int | None) -> int:
    return int(time.time() * 1000) if now_ms is None else now_ms


def _check_keys(records: memoryview, headers: list[BatchHeader], topic_partition: str) -> None:
    # every keyless record is named (KIP-467), its index counted across the request's batches
    # (one batch from produce v3; record_errors are returned from v8), so the client fails
    # exactly those; the batch is refused whole, as Kafka does
    message = ("Compacted topic cannot accept message without key in topic partition "
               f"{topic_partition}.")
    bad: list[int] = []
    pos = 0
    first = 0
    for h in headers:
        bad.extend(first + i for i in keyless_record_indexes(records[pos:pos + h.size], h))
        pos += h.size
        first += h.records_count
    if bad:
        raise InvalidRecord(
            f"{len(bad)} record(s) of the batch refused, the first at index {bad[0]}: {message}",
            tuple((i, message) for i in bad))


def _check_timestamps(headers: list[BatchHeader], config: LogConfig, now: int,
                      topic_partition: str) -> None:
    before = config.message_timestamp_before_max_ms
    after = config.message_timestamp_after_max_ms
    for h in headers:
        if now - h.base_timestamp > before:
            raise KafkaError(ErrorCode.invalid_timestamp,
                             f"Timestamp {h.base_timestamp} of a record in {topic_partition} is "
                             f"more than message.timestamp.before.max.ms={before} before {now}")
        if h.max_timestamp - now > after:
            raise KafkaError(ErrorCode.invalid_timestamp,
                             f"Timestamp {h.max_timestamp} of a record in {topic_partition} is "
                             f"more than message.timestamp.after.max.ms={after} after {now}")


def stamp_log_append_time(batch: memoryview, now_ms: int) -> tuple[memoryview, BatchHeader]:
    """A copy of the batch marked LogAppendTime with max timestamp `now_ms`, CRC redone.

    The one place the produce path copies a batch: topics with
    message.timestamp.type=LogAppendTime, as Kafka rewrites them too.
    """
    buf = bytearray(batch)
    attrs = struct.unpack_from(">h", buf, ATTRIBUTES_OFFSET)[0] | ATTR_TIMESTAMP_TYPE
    struct.pack_into(">h", buf, ATTRIBUTES_OFFSET, attrs)
    struct.pack_into(">q", buf, MAX_TIMESTAMP_OFFSET, now_ms)
    struct.pack_into(">I", buf, CRC_OFFSET, crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
    view = memoryview(buf)
    return view, BatchHeader.parse(view)
