"""Retention by time and size, log start offset, `.deleted` files and file.delete.delay.ms."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from odradek.protocol.errors import OffsetOutOfRange
from odradek.storage.cleaner.log_cleaner import CleanerConfig
from odradek.storage.log import Log
from odradek.storage.log_manager import LogManager
from tests.unit.storage.compaction_support import append_kv, records_of
from tests.unit.storage.support import append_values, open_log, read_all, small_config

NOW = 1_000_000


def _fill(log: Log, n: int, ts0: int = NOW - 100_000, step: int = 1_000) -> None:
    for i in range(n):
        append_values(log, [b"value-%03d" % i], [ts0 + i * step])


def test_size_retention_keeps_the_log_within_the_bound(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=400, retention_bytes=1_000, retention_ms=-1))
    for round_ in range(5):
        _fill(log, 30, ts0=NOW + round_)
        log.delete_retention_breached(now_ms=NOW)
        # Kafka's bound: deleting the oldest remaining segment would go below retention.bytes
        assert log.size_bytes - log.segments[0].size < 1_000
        assert log.log_start_offset == log.segments[0].base_offset
    assert log.log_end_offset == 150
    assert read_all(log)[-1][0].last_offset == 149


def test_time_retention_drops_old_segments_oldest_first(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=300, retention_ms=50_000))
    _fill(log, 40)  # timestamps NOW-100s .. NOW-61s, then younger ones
    _fill(log, 10, ts0=NOW - 10_000)
    before = len(log.segments)
    deleted = log.delete_retention_breached(now_ms=NOW)
    assert 0 < deleted < before
    for seg in log.segments:
        assert seg.max_timestamp >= NOW - 50_000 or seg is log.segments[0]
    assert log.segments[0].max_timestamp > NOW - 50_000
    with pytest.raises(OffsetOutOfRange):
        log.read(log.log_start_offset - 1, 100)


def test_an_expired_active_segment_is_rolled_and_deleted(tmp_path: Path) -> None:
    """Kafka: when every segment, the active one included, has expired, a new segment is
    rolled first and all the old ones go; the log start offset moves to the log end."""
    log = open_log(tmp_path, small_config(segment_bytes=300, retention_ms=1_000))
    _fill(log, 20)
    assert log.delete_retention_breached(now_ms=NOW) > 0
    assert len(log.segments) == 1 and log.segments[0].size == 0
    assert log.log_start_offset == log.log_end_offset == 20
    assert log.read(20, 100).region is None
    append_values(log, [b"next"], [NOW])
    assert read_all(log)[0][0].base_offset == 20
    # an empty active segment is never deleted
    assert log.delete_retention_breached(now_ms=NOW + 10_000_000) == 1  # the one with "next"
    assert log.delete_retention_breached(now_ms=NOW + 20_000_000) == 0


def test_segments_above_the_high_watermark_stay(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=300, retention_ms=1_000))
    _fill(log, 20)
    bases = [s.base_offset for s in log.segments]
    deleted = log.delete_retention_breached(now_ms=NOW, high_watermark=bases[2])
    assert deleted == 2 and log.log_start_offset == bases[2]


def test_no_retention_for_compact_only_and_infinite_settings(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=300, retention_ms=1, cleanup_policy="compact"))
    _fill(log, 20)
    assert log.delete_retention_breached(now_ms=NOW) == 0
    log.update_config(small_config(segment_bytes=300, retention_ms=-1, retention_bytes=-1))
    assert log.delete_retention_breached(now_ms=NOW) == 0
    log.update_config(small_config(segment_bytes=300, retention_ms=1,
                                   cleanup_policy="compact,delete"))
    assert log.delete_retention_breached(now_ms=NOW) > 0


def test_deleted_files_wait_for_file_delete_delay(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=300, retention_bytes=300, retention_ms=-1,
                                          file_delete_delay_ms=5_000))
    _fill(log, 20, ts0=NOW)
    first = log.segments[0]
    region = log.read(0, 1 << 20).region
    assert region is not None
    data = log.read_bytes(region)
    log.delete_retention_breached(now_ms=NOW)
    name = f"{first.base_offset:020d}.log"
    assert not (log.dir / name).exists()
    assert (log.dir / (name + ".deleted")).exists()
    assert os.pread(region.fd, region.size, region.position) == data  # in-flight reads work
    log.close_retired(now_ms=int(time.time() * 1000) + 4_000)
    assert (log.dir / (name + ".deleted")).exists()
    log.close_retired(now_ms=int(time.time() * 1000) + 6_000)
    assert not any(p.name.endswith(".deleted") for p in log.dir.iterdir())


def test_deleted_leftovers_are_removed_at_open(tmp_path: Path) -> None:
    cfg = small_config(segment_bytes=300, retention_bytes=300, retention_ms=-1,
                       file_delete_delay_ms=600_000)
    log = open_log(tmp_path, cfg)
    _fill(log, 20, ts0=NOW)
    log.delete_retention_breached(now_ms=NOW)
    start, end = log.log_start_offset, log.log_end_offset
    log.flush()
    assert any(p.name.endswith(".deleted") for p in log.dir.iterdir())
    # a crash: the process dies with the .deleted files still there
    log = open_log(tmp_path, cfg, log_start_offset=start)
    assert not any(p.name.endswith(".deleted") for p in log.dir.iterdir())
    assert (log.log_start_offset, log.log_end_offset) == (start, end)


def test_delete_records_moves_the_log_start(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=300))
    _fill(log, 30, ts0=NOW)
    assert log.delete_records_before(17) == 17
    assert read_all(log, 17)[0][0].base_offset == 17
    with pytest.raises(OffsetOutOfRange):
        log.read(16, 100)
    assert all(s.next_offset > 17 for s in log.segments)


def test_log_manager_cleanup_follows_live_config(tmp_path: Path) -> None:
    lm = LogManager(tmp_path, small_config(segment_bytes=300, retention_ms=-1))
    log = lm.create("t", 0)
    _fill(log, 30, ts0=NOW)
    assert lm.cleanup(now_ms=NOW + 10_000) == 0
    log.update_config(small_config(segment_bytes=300, retention_ms=5_000))  # shortened live
    assert lm.cleanup(now_ms=NOW + 10_000) > 0
    assert log.log_start_offset > 0
    lm.close()


def test_log_manager_runs_the_cleaner_and_deletes_during_it(tmp_path: Path) -> None:
    from tests.unit.storage.compaction_support import compact_config

    lm = LogManager(tmp_path, compact_config(segment_bytes=2_000))
    log = lm.create("c", 0)
    for i in range(400):
        append_kv(log, [(b"k%d" % (i % 5), b"v%d" % i)])
    cleaner = lm.start_cleaner(CleanerConfig(backoff_ms=10))
    deadline = time.monotonic() + 30
    while cleaner.passes == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert cleaner.passes > 0
    assert len(records_of(log)) < 400
    assert (tmp_path / "cleaner-offset-checkpoint").exists()
    lm.delete("c", 0)
    assert not (tmp_path / "c-0").exists()
    lm.close()
