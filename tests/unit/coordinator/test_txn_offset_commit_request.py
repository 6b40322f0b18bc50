"""TxnOffsetCommit as the transaction coordinator serves it (`commit_offsets`): the group's
checks come first, v5+ adds the offsets partition itself (KIP-890 part 2), and the offsets
become visible with the commit marker."""

from __future__ import annotations

import asyncio
from pathlib import Path

from odradek.protocol.errors import ErrorCode
from tests.unit.coordinator.support import OFFSETS_PARTITIONS
from tests.unit.coordinator.test_txn_offsets_replay import setup

E = ErrorCode


def test_txn_offset_commit_request(tmp_path: Path) -> None:
    node, tc = setup(tmp_path)
    gc = node.coordinator
    r = tc.init_producer_id("t", 60000)
    pid, epoch = r.producer_id, r.producer_epoch

    def commit(offsets: dict[tuple[str, int], tuple[int, int, str]], v5: bool,
               generation: int = -1) -> ErrorCode:
        args = ("t", pid, epoch, "g", offsets, generation, "m", None, OFFSETS_PARTITIONS)
        if v5:
            return asyncio.run(tc.commit_offsets_v5(*args))
        return tc.commit_offsets(*args)

    # before AddOffsetsToTxn (v4 and older need it): the partition is not in the transaction
    assert commit({("data", 0): (3, -1, "")}, v5=False) == E.invalid_txn_state
    assert commit({("nope", 0): (3, -1, "")}, v5=True) == E.unknown_topic_or_partition
    assert commit({("data", 0): (3, -1, "")}, v5=True, generation=4) == E.illegal_generation
    assert gc.pending_txn_offsets() == 0
    assert commit({("data", 0): (3, -1, "m")}, v5=True) == E.none
    assert gc.pending_txn_offsets() == 1 and gc.offsets.get("g") == {}
    assert tc.end_txn("t", pid, epoch, True) == E.none
    assert gc.pending_txn_offsets() == 0
    assert {tp: (c.offset, c.metadata) for tp, c in gc.offsets.get("g").items()} == {
        ("data", 0): (3, "m")}
    node.close()
