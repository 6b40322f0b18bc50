"""ReplicaManager.checkpoint: files rewritten only when what they hold changed."""

from __future__ import annotations

from pathlib import Path

from odradek.replication.manager import HW_CHECKPOINT
from odradek.storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    read_offsets,
)
from tests.unit.coordinator.support import Node

FILES = (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, HW_CHECKPOINT)


def _inodes(path: Path) -> dict[str, int]:
    # atomic_write renames a fresh file over the old one: a new inode means rewritten
    return {name: (path / name).stat().st_ino for name in FILES}


def _leos(node: Node) -> dict[tuple[str, int], int]:
    return {k: lg.log_end_offset for k, lg in node.log_manager.logs.items()}


def test_checkpoint_writes_then_skips_until_something_changes(tmp_path: Path) -> None:
    node = Node(tmp_path, topics={"t": 3})
    try:
        node.produce("t", 0, 5)
        node.produce("t", 2, 1)
        node.rm.checkpoint()
        assert read_offsets(tmp_path / RECOVERY_POINT_CHECKPOINT) == _leos(node)
        hws = read_offsets(tmp_path / HW_CHECKPOINT)
        assert hws[("t", 0)] == 5 and hws[("t", 2)] == 1 and hws[("t", 1)] == 0
        first = _inodes(tmp_path)

        node.rm.checkpoint()  # nothing changed: nothing rewritten
        assert _inodes(tmp_path) == first

        node.produce("t", 1, 3)
        node.rm.checkpoint()
        again = _inodes(tmp_path)
        assert again[RECOVERY_POINT_CHECKPOINT] != first[RECOVERY_POINT_CHECKPOINT]
        assert again[HW_CHECKPOINT] != first[HW_CHECKPOINT]
        assert read_offsets(tmp_path / RECOVERY_POINT_CHECKPOINT) == _leos(node)
        assert read_offsets(tmp_path / HW_CHECKPOINT)[("t", 1)] == 3
        assert all(lg.recovery_point == lg.log_end_offset
                   for lg in node.log_manager.logs.values())
    finally:
        node.close()


def test_checkpoint_follows_a_log_flushed_elsewhere(tmp_path: Path) -> None:
    """A log appended to and flushed by someone else between two checkpoints (flush.ms, a
    roll) still has its new recovery point written."""
    node = Node(tmp_path, topics={"t": 1})
    try:
        node.rm.checkpoint()
        node.produce("t", 0, 4)
        node.log_manager.get("t", 0).flush()
        node.rm.checkpoint()
        assert read_offsets(tmp_path / RECOVERY_POINT_CHECKPOINT)[("t", 0)] == 4
    finally:
        node.close()
