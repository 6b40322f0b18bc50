"""The group coordinator serves only the `__consumer_offsets` partitions it owns (led and
replayed): OffsetCommit and TxnOffsetCommit for a group of another partition get
NOT_COORDINATOR, and COORDINATOR_LOAD_IN_PROGRESS while its partition is being replayed,
with no state change: nothing appended, nothing pending, nothing visible."""

from __future__ import annotations

from pathlib import Path

from odradek.coordinator import offsets_topic as ot
from odradek.coordinator.group.coordinator import OffsetCommitEntry
from odradek.protocol.errors import ErrorCode
from tests.unit.coordinator.support import OFFSETS_PARTITIONS
from tests.unit.coordinator.test_txn_offsets_replay import encode, setup

E = ErrorCode


def test_requests_for_groups_not_owned_change_nothing(tmp_path: Path) -> None:
    node, tc = setup(tmp_path)
    gc = node.coordinator
    assert gc.owned == set(range(OFFSETS_PARTITIONS)) and not gc.loading
    # two groups on different partitions
    groups = {}
    for i in range(100):
        groups.setdefault(gc.store.partition_for(f"grp-{i}"), f"grp-{i}")
    (p, g), (_, other) = list(groups.items())[:2]
    assert gc.commit_offsets(g, -1, "", None, [OffsetCommitEntry("data", 0, 5)]) == {
        ("data", 0): E.none}
    r = tc.init_producer_id("own", 60000)
    pid, epoch = r.producer_id, r.producer_epoch
    assert tc.add_offsets("own", pid, epoch, g, ot.TOPIC, OFFSETS_PARTITIONS) == E.none
    txn_before = (tc.txns["own"].state, set(tc.txns["own"].partitions))
    log_part = node.rm.get(ot.TOPIC, p)
    end_before = log_part.log_end_offset

    def attempts() -> tuple[ErrorCode, ErrorCode, ErrorCode]:
        commit = gc.commit_offsets(g, -1, "", None, [OffsetCommitEntry("data", 0, 9)])
        assert len(set(commit.values())) == 1
        txn = tc.txn_offset_commit("own", pid, epoch, g, {("data", 1): (7, -1, "")}, ot.TOPIC,
                                   OFFSETS_PARTITIONS, encode)
        return next(iter(commit.values())), txn, gc.fetch_offsets(g, None)[0]

    for change, expected in ((gc.resign, E.not_coordinator),
                             (gc.begin_loading, E.coordinator_load_in_progress)):
        change([p])
        assert attempts() == (expected,) * 3
        assert gc.is_coordinator_for(g) == (expected == E.coordinator_load_in_progress)
        assert log_part.log_end_offset == end_before  # nothing written
        assert not gc.store.txn.pending  # nothing pending
        assert (tc.txns["own"].state, set(tc.txns["own"].partitions)) == txn_before
        # the other partition's group is served all along
        assert gc.commit_offsets(other, -1, "", None, [OffsetCommitEntry("data", 2, 3)]) == {
            ("data", 2): E.none}
    assert gc.offsets.get(g) == {}  # resigned: forgotten in memory

    # the replay ends: the partition is owned again, its offsets are back from the log
    gc.load([p])
    assert gc.coordinator_error(g) == E.none
    assert {tp: c.offset for tp, c in gc.offsets.get(g).items()} == {("data", 0): 5}
    assert {tp: c.offset for tp, c in gc.offsets.get(other).items()} == {("data", 2): 3}
    assert attempts()[:2] == (E.none, E.none)
    assert tc.end_txn("own", pid, epoch, True) == E.none
    assert {tp: c.offset for tp, c in gc.offsets.get(g).items()} == {("data", 0): 9,
                                                                       ("data", 1): 7}
    node.close()
