"""storage.log_validator: Kafka's LogValidator checks on a produce request's records, without
sockets; and Log.append_as_leader's producer-state check."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from odradek.protocol.errors import ErrorCode, InvalidRecord, KafkaError
from odradek.protocol.records import (
    Compression,
    Record,
    TimestampType,
    build_batch,
    validate_batches,
)
from odradek.storage.config import LogConfig
from odradek.storage.log import Log
from odradek.storage.log_validator import validate_records

NOW = 1_700_000_000_000


def batch(*values: bytes | None, key: bytes | None = b"k", ts: int = NOW,
          compression: int = Compression.NONE, **kw: int) -> memoryview:
    return memoryview(build_batch([Record(-1, ts, key, v) for v in values],
                                  compression=compression, **kw))


def code_of(records: memoryview | None, config: LogConfig = LogConfig(), version: int = 9,
            now_ms: int = NOW) -> ErrorCode:
    try:
        validate_records(records, config, version, "t", 0, now_ms)
    except KafkaError as exc:
        return exc.code
    return ErrorCode.none


@pytest.mark.parametrize("version", [3, 4, 5, 6])
def test_zstd_below_produce_v7_is_unsupported(version: int) -> None:
    assert code_of(batch(b"v", compression=Compression.ZSTD), version=version) == \
        ErrorCode.unsupported_compression_type


@pytest.mark.parametrize("version", [7, 8, 9, 12])
def test_zstd_from_produce_v7_is_accepted(version: int) -> None:
    assert code_of(batch(b"v", compression=Compression.ZSTD), version=version) == ErrorCode.none


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4])
def test_other_codecs_on_produce_v3(codec: int) -> None:
    assert code_of(batch(b"v", compression=codec), version=3) == ErrorCode.none


def test_create_time_batch_is_the_request_view_not_a_copy() -> None:
    records = batch(b"a", b"b")
    batches, append_time = validate_records(records, LogConfig(), 9, "t", 0, NOW)
    assert append_time == -1
    ((view, header),) = batches
    assert view is records
    assert header.records_count == 2


def test_one_batch_per_partition_from_v3_several_below() -> None:
    two = memoryview(bytes(batch(b"a")) + bytes(batch(b"b")))
    assert code_of(two, version=3) == ErrorCode.invalid_record
    batches, _ = validate_records(two, LogConfig(), 2, "t", 0, NOW)
    assert [h.records_count for _, h in batches] == [1, 1]
    assert [bytes(v) for v, _ in batches] == [bytes(batch(b"a")), bytes(batch(b"b"))]


def test_no_records_is_invalid() -> None:
    assert code_of(None) == ErrorCode.invalid_record
    assert code_of(memoryview(b"")) == ErrorCode.invalid_record


def test_corrupt_batch() -> None:
    raw = bytearray(batch(b"value"))
    raw[-1] ^= 0xFF
    assert code_of(memoryview(raw)) == ErrorCode.corrupt_message


def test_max_message_bytes() -> None:
    records = batch(b"x" * 1000)
    assert code_of(records, LogConfig(max_message_bytes=len(records))) == ErrorCode.none
    assert code_of(records, LogConfig(max_message_bytes=len(records) - 1)) == \
        ErrorCode.message_too_large


def test_records_over_segment_bytes() -> None:
    records = batch(b"x" * 1000)
    assert code_of(records, LogConfig(segment_bytes=len(records) - 1)) == \
        ErrorCode.record_list_too_large


@pytest.mark.parametrize("policy", ["compact", "compact,delete"])
def test_compacted_topic_refuses_keyless_records(policy: str) -> None:
    config = LogConfig(cleanup_policy=policy)
    assert code_of(batch(b"v", key=None), config) == ErrorCode.invalid_record
    assert code_of(batch(b"v"), config) == ErrorCode.none
    assert code_of(batch(b"v", key=None), LogConfig(cleanup_policy="delete")) == ErrorCode.none


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.LZ4])
def test_compacted_topic_names_each_keyless_record(compression: int) -> None:
    # KIP-467: a batch of 100 with every 10th record keyless names exactly those 10
    keys = [None if i % 10 == 3 else b"k%d" % i for i in range(100)]
    records = memoryview(build_batch([Record(-1, NOW, k, b"v") for k in keys],
                                     compression=compression))
    with pytest.raises(InvalidRecord) as info:
        validate_records(records, LogConfig(cleanup_policy="compact"), 9, "t", 0, NOW)
    assert [i for i, _ in info.value.record_errors] == [i for i in range(100) if i % 10 == 3]
    assert all("without key" in (m or "") for _, m in info.value.record_errors)
    assert "10 record" in info.value.message


def test_log_append_time_stamps_a_copy() -> None:
    records = batch(b"a", b"b", ts=NOW - 5000)
    original = bytes(records)
    batches, append_time = validate_records(
        records, LogConfig(message_timestamp_type="LogAppendTime"), 9, "t", 0, NOW)
    assert append_time == NOW
    ((view, header),) = batches
    assert bytes(records) == original  # the request's bytes are left alone
    assert header.max_timestamp == NOW
    assert header.timestamp_type == TimestampType.LOG_APPEND_TIME
    (checked,) = validate_batches(view)  # the CRC was redone
    assert checked == header


def test_timestamps_out_of_range() -> None:
    config = LogConfig(message_timestamp_before_max_ms=60_000,
                       message_timestamp_after_max_ms=1_000)
    assert code_of(batch(b"v", ts=NOW - 60_000), config) == ErrorCode.none
    assert code_of(batch(b"v", ts=NOW - 60_001), config) == ErrorCode.invalid_timestamp
    assert code_of(batch(b"v", ts=NOW + 1_000), config) == ErrorCode.none
    assert code_of(batch(b"v", ts=NOW + 1_001), config) == ErrorCode.invalid_timestamp
    # unbounded by default; and LogAppendTime replaces the producer's timestamps
    assert code_of(batch(b"v", ts=0)) == ErrorCode.none
    stamped = LogConfig(message_timestamp_type="LogAppendTime",
                        message_timestamp_before_max_ms=60_000)
    assert code_of(batch(b"v", ts=0), stamped) == ErrorCode.none


def test_append_as_leader_checks_producer_state(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig())
    try:
        now = int(time.time() * 1000)

        def idempotent(seq: int, epoch: int = 0) -> memoryview:
            return batch(b"v", ts=now, producer_id=7, producer_epoch=epoch, base_sequence=seq)

        def append(records: memoryview) -> tuple[int, bool]:
            ((view, header),), _ = validate_records(records, log.config, 9, "t", 0)
            info = log.append_as_leader(view, header, 0)
            return info.first_offset, info.duplicate

        assert append(idempotent(0)) == (0, False)
        assert append(idempotent(1)) == (1, False)
        assert append(idempotent(0)) == (0, True)  # a retry gets its first offsets back
        assert log.log_end_offset == 2
        with pytest.raises(KafkaError) as gap:
            append(idempotent(5))
        assert gap.value.code == ErrorCode.out_of_order_sequence_number
        assert append(idempotent(0, epoch=1)) == (2, False)
        with pytest.raises(KafkaError) as fenced:
            append(idempotent(2, epoch=0))
        assert fenced.value.code == ErrorCode.invalid_producer_epoch
        assert log.log_end_offset == 3
    finally:
        log.close()
