"""OffsetFetch serves an offset only once its record is committed in `__consumer_offsets`
(Kafka's coordinator reads at its last committed offset): between the append and the
commit it serves the value before; an offset whose record is lost with the leadership was
never served. Over real logs: the group's partition is given a second replica that does
not fetch, so its high watermark moves only when the test says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from odradek.coordinator.group.api import OffsetCommitEntry
from odradek.coordinator.group.offsets import CommittedOffset, OffsetStore
from odradek.coordinator.offsets_topic import TOPIC
from odradek.protocol.errors import ErrorCode
from tests.unit.coordinator.support import (
    SILENT_FOLLOWER,
    Node,
    follower_catches_up,
    with_silent_follower,
)

E = ErrorCode
FOLLOWER = SILENT_FOLLOWER


def offset(n: int) -> CommittedOffset:
    return CommittedOffset(n, -1, "", 0)


def test_store_reads_see_changes_once_committed() -> None:
    store = OffsetStore()
    store.put("g", ("t", 0), offset(5))  # committed at once
    store.put("g", ("t", 0), offset(7), (11, 10))  # record ending at 11, HW 10
    store.put("g", ("t", 1), offset(1), (12, 10))
    assert store.committed("g", 10) == {("t", 0): offset(5)}
    assert store.get("g") == {("t", 0): offset(7), ("t", 1): offset(1)}  # writes build on it
    assert store.committed("g", 11) == {("t", 0): offset(7)}
    store.remove("g", ("t", 0), (13, 11))
    assert store.committed("g", 12) == {("t", 0): offset(7), ("t", 1): offset(1)}
    assert store.committed("g", 13) == {("t", 1): offset(1)}
    assert store._unsettled == {}  # nothing kept once committed


def test_store_stacked_changes_and_history_pruned_by_later_writes() -> None:
    store = OffsetStore()
    for i in range(100):  # a group committing and never reading: its history stays short
        store.put("g", ("t", 0), offset(i), (i + 1, i))
    assert len(store._unsettled["g"][("t", 0)]) == 1
    assert store.committed("g", 99) == {("t", 0): offset(98)}
    store.put("g", ("t", 0), offset(200))  # a change committed at once: all earlier are
    assert store.committed("g", 0) == {("t", 0): offset(200)}
    store.put("g", ("t", 0), offset(201), (300, 250))
    store.remove_group("g", (301, 250))
    assert store.committed("g", 250) == {("t", 0): offset(200)}
    assert store.committed("g", 301) == {}
    store.put("h", ("t", 0), offset(1), (5, 4))
    store.remove_group("h")  # unloaded: forgotten entirely
    assert store.committed("h", 0) == {} and "h" not in store._unsettled


def _replicated(node: Node, group: str) -> Any:
    return with_silent_follower(node, TOPIC, node.coordinator.store.partition_for(group))


def _fetched(node: Node, group: str) -> dict[tuple[str, int], int]:
    code, rows = node.coordinator.fetch_offsets(group, None)
    assert code == E.none
    return {(t, p): v.offset for t, p, v in rows if v is not None}


def _commit(node: Node, group: str, partition: int, at: int) -> None:
    assert node.coordinator.commit_offsets(group, -1, "", None, [
        OffsetCommitEntry("data", partition, at)]) == {("data", partition): E.none}


def test_offset_fetch_serves_committed_records_only(tmp_path: Path) -> None:
    node = Node(tmp_path, {"data": 2})
    try:
        _commit(node, "g", 0, 5)  # the partition alone in its ISR: committed at once
        part = _replicated(node, "g")
        _commit(node, "g", 0, 9)
        _commit(node, "g", 1, 3)
        assert _fetched(node, "g") == {("data", 0): 5}
        code, rows = node.coordinator.fetch_offsets("g", [("data", [0, 1])])
        assert code == E.none and [(p, v and v.offset) for _, p, v in rows] == [(0, 5), (1, None)]
        follower_catches_up(part)
        assert _fetched(node, "g") == {("data", 0): 9, ("data", 1): 3}
        # OffsetDelete: the offset is served until the tombstone is committed
        assert node.coordinator.delete_offsets("g", [("data", [1])]) == (
            E.none, {("data", 1): E.none})
        assert _fetched(node, "g") == {("data", 0): 9, ("data", 1): 3}
        follower_catches_up(part)
        assert _fetched(node, "g") == {("data", 0): 9}
    finally:
        node.close()


def test_offset_lost_with_the_leadership_was_never_served(tmp_path: Path) -> None:
    node = Node(tmp_path, {"data": 1})
    try:
        _commit(node, "g", 0, 5)
        part = _replicated(node, "g")
        _commit(node, "g", 0, 9)
        assert _fetched(node, "g") == {("data", 0): 5}
        # the leadership moves before the record commits: the node unloads the partition
        part.make_follower(FOLLOWER, part.leader_epoch + 1, part.partition_epoch + 1,
                           list(part.replicas), list(part.isr))
        node.coordinator.unload_partition(node.coordinator.store.partition_for("g"))
        assert node.coordinator.offsets.committed("g", part.high_watermark) == {}
    finally:
        node.close()


def test_require_stable_answers_unstable_while_an_offset_may_change(tmp_path: Path) -> None:
    """KIP-447: OffsetFetch with require_stable (read_committed consumers) answers
    UNSTABLE_OFFSET_COMMIT for a partition whose offset an open transaction holds or whose
    commit is not yet replicated; without it, the committed offset."""
    from odradek.coordinator.group.offset_manager import encode_offset_record

    node = Node(tmp_path, {"data": 3})
    gc = node.coordinator
    try:
        _commit(node, "g", 0, 5)
        _commit(node, "g", 1, 6)
        assert gc.append_txn_offsets("g", 4000, 0, {("data", 0): (8, -1, "")},
                                     encode_offset_record) == E.none
        wanted = [("data", [0, 1, 2])]

        def rows(stable: bool) -> list[object]:
            code, out = gc.fetch_offsets("g", wanted, require_stable=stable)
            assert code == E.none
            return [v if isinstance(v, ErrorCode) else v and v.offset for _, _, v in out]

        assert rows(False) == [5, 6, None]
        assert rows(True) == [E.unstable_offset_commit, 6, None]
        code, every = gc.fetch_offsets("g", None, require_stable=True)
        assert code == E.none
        assert [(p, v if isinstance(v, ErrorCode) else v and v.offset) for _, p, v in every] == [
            (0, E.unstable_offset_commit), (1, 6)]
        assert gc.complete_txn_offsets(4000, True) == 1
        assert rows(True) == [8, 6, None]
        # a plain commit not yet replicated: unstable too, until the follower has it
        part = _replicated(node, "g")
        _commit(node, "g", 2, 4)
        assert rows(False) == [8, 6, None]
        assert rows(True) == [8, 6, E.unstable_offset_commit]
        follower_catches_up(part)
        assert rows(True) == [8, 6, 4]
    finally:
        node.close()
