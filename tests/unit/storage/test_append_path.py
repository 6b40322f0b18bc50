"""Log.append reads the clock only where a rule needs it: these rules still hold (a segment whose
batches have no timestamp rolls by wall-clock age, flush.ms and flush.messages still flush),
and the batch on disk is the client's batch with only its base offset and epoch patched."""

from __future__ import annotations

import threading
from pathlib import Path

from odradek.storage.segment import Segment
from tests.unit.storage.support import append_values, make_batch, open_log, read_all, small_config


def test_a_segment_without_timestamps_rolls_by_wall_clock_age(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=1 << 20, segment_ms=60_000))
    append_values(log, [b"a"])
    seg = log.active_segment
    seg.first_batch_timestamp = -1  # what a first batch without timestamps leaves
    append_values(log, [b"b"])
    assert len(log.segments) == 1  # created just now: younger than segment.ms
    seg.created_ms -= 120_000  # as if created two minutes ago
    append_values(log, [b"c"])
    assert [s.base_offset for s in log.segments] == [0, 2]
    assert log.segments[-1].created_ms > seg.created_ms  # the clock was read for the new one


def test_should_roll_reads_the_clock_itself_when_not_given_one(tmp_path: Path) -> None:
    config = small_config(segment_bytes=1 << 20, segment_ms=60_000)
    seg = Segment(tmp_path, 0, config, now_ms=0)  # created at the epoch: very old
    seg.size = 100
    seg.first_batch_timestamp = -1
    assert seg.should_roll(10, -1, 1, None, config)
    assert not seg.should_roll(10, -1, 1, 30_000, config)  # an explicit clock still wins
    seg.close()


def test_flush_ms_still_flushes_on_append(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(flush_ms=0))
    append_values(log, [b"a", b"b"])
    assert log.recovery_point == 2
    quiet = open_log(tmp_path / "quiet", small_config())
    append_values(quiet, [b"a", b"b"])
    assert quiet.recovery_point == 0  # no flush rule: appends never fsync


def test_appended_bytes_are_the_batch_with_offset_and_epoch_patched(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=1 << 20))
    append_values(log, [b"first"])
    batch, header = make_batch([b"x", b"y", b"z"])
    info = log.append(batch, header, 7)
    assert (info.first_offset, info.last_offset) == (1, 3)
    (h, data) = read_all(log, 1)[0]
    assert (h.base_offset, h.partition_leader_epoch) == (1, 7)
    assert data[16:] == bytes(batch[16:])  # CRC-covered part untouched


def test_appends_from_two_threads_keep_offsets_gapless(tmp_path: Path) -> None:
    # the cleaner's thread takes the same lock: appends under it never interleave
    log = open_log(tmp_path, small_config(segment_bytes=1 << 16))

    def work() -> None:
        for _ in range(200):
            append_values(log, [b"v", b"w"])

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    offsets = [h.base_offset for h, _ in read_all(log)]
    assert offsets == list(range(0, 800, 2))
