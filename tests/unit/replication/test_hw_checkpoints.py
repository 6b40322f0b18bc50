"""High watermarks in one replication-offset-checkpoint per log directory (JBOD): each
directory's file names only its own partitions, a failed directory takes only its own with
it, and reading merges the online directories' files."""

from __future__ import annotations

from pathlib import Path

from odradek.replication.hw_checkpoints import HW_CHECKPOINT, HighWatermarkCheckpoints
from odradek.storage.checkpoints import read_offsets, write_offsets
from odradek.storage.log_dir_failure import channel_for


def test_each_directory_keeps_its_own_partitions(tmp_path: Path) -> None:
    d0, d1 = tmp_path / "d0", tmp_path / "d1"
    d0.mkdir()
    d1.mkdir()
    hw = HighWatermarkCheckpoints([d0, d1])
    hw.write([(d0, ("t", 0), 5), (d1, ("t", 1), 7), (d1, ("u", 0), 2)])
    assert read_offsets(d0 / HW_CHECKPOINT) == {("t", 0): 5}
    assert read_offsets(d1 / HW_CHECKPOINT) == {("t", 1): 7, ("u", 0): 2}
    assert hw.read() == {("t", 0): 5, ("t", 1): 7, ("u", 0): 2}
    # unchanged: not rewritten (same inode); a change rewrites only its directory's file
    inodes = [(d / HW_CHECKPOINT).stat().st_ino for d in (d0, d1)]
    hw.write([(d0, ("t", 0), 5), (d1, ("t", 1), 8), (d1, ("u", 0), 2)])
    assert (d0 / HW_CHECKPOINT).stat().st_ino == inodes[0]
    assert (d1 / HW_CHECKPOINT).stat().st_ino != inodes[1]
    # a partition moved to d0 (AlterReplicaLogDirs) leaves d1's file
    hw.write([(d0, ("t", 0), 5), (d0, ("t", 1), 8), (d1, ("u", 0), 2)])
    assert read_offsets(d1 / HW_CHECKPOINT) == {("u", 0): 2}


def test_a_failed_directory_takes_only_its_own_high_watermarks(tmp_path: Path) -> None:
    d0, d1, d2 = (tmp_path / f"d{i}" for i in range(3))
    for d in (d0, d1, d2):
        d.mkdir()
    hw = HighWatermarkCheckpoints([d0, d1, d2])
    hw.write([(d0, ("a", 0), 1), (d1, ("b", 0), 2), (d2, ("c", 0), 3)])
    channel_for(d0).mark_offline("test: the disk is gone")
    hw.write([(d0, ("a", 0), 9), (d1, ("b", 0), 4), (d2, ("c", 0), 3)])
    assert read_offsets(d0 / HW_CHECKPOINT) == {("a", 0): 1}  # not written while offline
    assert HighWatermarkCheckpoints([d0, d1, d2]).read() == {("b", 0): 4, ("c", 0): 3}


def test_a_single_file_of_the_old_layout_is_read_and_newer_files_win(tmp_path: Path) -> None:
    d0, d1 = tmp_path / "d0", tmp_path / "d1"
    d0.mkdir()
    d1.mkdir()
    # before: every partition's high watermark in the first directory's file
    write_offsets(d0 / HW_CHECKPOINT, {("t", 0): 3, ("t", 1): 4})
    assert HighWatermarkCheckpoints([d0, d1]).read() == {("t", 0): 3, ("t", 1): 4}
    write_offsets(d1 / HW_CHECKPOINT, {("t", 1): 6})
    assert HighWatermarkCheckpoints([d0, d1]).read() == {("t", 0): 3, ("t", 1): 6}
    (d1 / HW_CHECKPOINT).write_text("garbage")
    assert HighWatermarkCheckpoints([d0, d1]).read() == {("t", 0): 3, ("t", 1): 4}
