"""What a log reads of its `.log` files when it opens (issue 22): nothing past the index
checks after a clean shutdown, and only what lies past the recovery point after a crash."""

from __future__ import annotations

import logging
from pathlib import Path

from odradek.protocol.records import iter_batches
from odradek.storage.log import Log
from tests.unit.storage.support import (
    append_values,
    assert_indexes_valid,
    read_all,
    small_config,
)

CFG = small_config(segment_bytes=1_000_000, index_interval_bytes=256)


def _fill(log: Log, n: int, tag: bytes) -> None:
    """Append n one-record batches."""
    for i in range(n):
        append_values(log, [tag + b"%04d" % i + b"." * 90])


def _batch_starts(path: Path) -> list[int]:
    data = path.read_bytes()
    starts, pos = [], 0
    for h, _ in iter_batches(data, strict=True):
        starts.append(pos)
        pos += h.size
    return starts


def test_clean_reopen_reads_only_the_index_checks(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", CFG)
    _fill(log, 200, b"a")
    leo = log.log_end_offset
    log.close()
    again = Log.open(tmp_path / "t-0", CFG, recovery_point=leo)
    assert again.bytes_recovered_at_open == 0
    # the batches after the last index entry (an index interval, plus one batch)
    assert 0 < again.bytes_checked_at_open <= 256 + 200
    assert again.producer_state.scanned_bytes == 0
    assert again.log_end_offset == leo
    again.close()


def test_crash_reopen_recovers_only_past_the_recovery_point(tmp_path: Path, caplog) -> None:
    log = Log.open(tmp_path / "t-0", CFG)
    _fill(log, 200, b"a")
    point = log.log_end_offset
    size_at_point = log.segments[-1].size
    log.close()
    log = Log.open(tmp_path / "t-0", CFG, recovery_point=point)
    _fill(log, 50, b"b")
    tail = log.segments[-1].size - size_at_point
    batches = len(read_all(log))
    # kill -9: the log is never closed; the next start has the old recovery point
    with caplog.at_level(logging.INFO, logger="odradek.storage.log"):
        crashed = Log.open(tmp_path / "t-0", CFG, recovery_point=point)
    assert crashed.bytes_recovered_at_open == tail
    assert crashed.bytes_checked_at_open <= 256 + 200  # the lead-in: one index interval
    assert crashed.log_end_offset == point + 50 and crashed.recovery_point == point + 50
    assert len(read_all(crashed)) == batches
    assert_indexes_valid(crashed)
    line = f"recovered {tail} bytes past the recovery point {point}"
    assert any(line in r.getMessage() for r in caplog.records), caplog.text
    crashed.close()
    log.close()


def test_damage_below_the_recovery_point_is_not_scanned_after_a_crash(tmp_path: Path) -> None:
    """A flipped payload byte in the flushed part of the recovery point's segment: only a
    scan could see it, and a restart after kill -9 does not scan there (Kafka's rule: what
    was flushed is trusted; `odradek storage verify` is the tool that looks)."""
    log = Log.open(tmp_path / "t-0", CFG)
    _fill(log, 200, b"a")
    point = log.log_end_offset
    seg_path = log.segments[-1].log_path
    log.close()
    log = Log.open(tmp_path / "t-0", CFG, recovery_point=point)
    _fill(log, 50, b"b")
    leo = log.log_end_offset
    data = bytearray(seg_path.read_bytes())
    data[_batch_starts(seg_path)[3] + 80] ^= 0x01  # a value byte of offset 3
    seg_path.write_bytes(bytes(data))
    crashed = Log.open(tmp_path / "t-0", CFG, recovery_point=point)
    assert crashed.log_end_offset == leo  # nothing cut: every other record is still served
    assert len(read_all(crashed)) == leo
    crashed.close()
    # the same damage found by a scan from offset 0 (what every start did before) cuts there
    log.close()
    scanned = Log.open(tmp_path / "t-0", CFG, recovery_point=0)
    assert scanned.log_end_offset == 3
    scanned.close()


def test_torn_tail_past_the_recovery_point_is_cut(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", CFG)
    _fill(log, 100, b"a")
    point = log.log_end_offset
    log.close()
    log = Log.open(tmp_path / "t-0", CFG, recovery_point=point)
    _fill(log, 20, b"b")
    leo = log.log_end_offset
    seg_path = log.segments[-1].log_path
    log.close()
    with open(seg_path, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x99" + b"\x01" * 30)  # a torn write
    crashed = Log.open(tmp_path / "t-0", CFG, recovery_point=point)
    assert crashed.log_end_offset == leo
    assert_indexes_valid(crashed)
    assert crashed.bytes_recovered_at_open > 0
    crashed.close()


def test_recovery_point_past_the_data_recovers_the_segment(tmp_path: Path) -> None:
    """A checkpoint ahead of the file (the data never reached the disk): the segment is
    scanned whole, as before, and the log ends where its batches end."""
    log = Log.open(tmp_path / "t-0", CFG)
    _fill(log, 30, b"a")
    leo = log.log_end_offset
    log.close()
    again = Log.open(tmp_path / "t-0", CFG, recovery_point=leo + 10)
    assert again.log_end_offset == leo
    assert_indexes_valid(again)
    again.close()
