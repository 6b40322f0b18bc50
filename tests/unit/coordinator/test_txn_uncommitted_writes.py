"""Finding 14 (issue 15): the transaction coordinator acts on a state only once its record is
committed in `__transaction_state`, and a write lost with the leadership leaves the last
committed state. Over real logs: the coordinator's partition is given a second replica
that does not fetch, so its high watermark moves only when the test says so."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from odradek.coordinator.transaction.state_log import TOPIC, TxnState
from odradek.protocol.errors import ErrorCode
from tests.unit.coordinator.support import (
    OFFSETS_PARTITIONS,
    SILENT_FOLLOWER,
    follower_catches_up,
    with_silent_follower,
)
from tests.unit.coordinator.test_transaction_coordinator import (
    coordinator,
    make,
    produce_txn,
)

E = ErrorCode
FOLLOWER = SILENT_FOLLOWER


def replicated(node: Any, tc: Any, tid: str) -> Any:
    """Give the id's `__transaction_state` partition a silent follower in its ISR."""
    return with_silent_follower(node, TOPIC, tc.partition_of(tid))


def lose_leadership(part: Any) -> None:
    part.make_follower(FOLLOWER, part.leader_epoch + 1, part.partition_epoch + 1,
                       list(part.replicas), list(part.isr))


def producer(tc: Any) -> tuple[int, int]:
    r = tc.init_producer_id("t", 60000)
    assert r.error == E.none
    return r.producer_id, r.producer_epoch


def add(tc: Any, pid: int, epoch: int, partition: int = 0) -> None:
    assert tc.add_partitions("t", pid, epoch, [("data", partition)]) == {
        ("data", partition): E.none}


def with_data(node: Any, tc: Any) -> tuple[int, int, Any, int]:
    """A transaction with a batch in data-0 (all committed): its producer, data-0, its end."""
    pid, epoch = producer(tc)
    add(tc, pid, epoch)
    assert produce_txn(node, pid, epoch, 0) == E.none
    data = node.rm.get("data", 0)
    return pid, epoch, data, data.log_end_offset


async def settle() -> None:
    for _ in range(5):  # the purgatory finishes on the next loop turns
        await asyncio.sleep(0)


def test_partitions_take_data_only_once_the_addition_is_committed(tmp_path: Path) -> None:
    node, tc = make(tmp_path)

    async def main() -> None:
        pid, epoch = producer(tc)
        part = replicated(node, tc, "t")
        add(tc, pid, epoch)
        # written, not committed: the partition does not expect the transaction yet
        assert produce_txn(node, pid, epoch, 0) == E.invalid_txn_state
        first_end = part.log_end_offset
        # a retry of the addition writes nothing and is not verified before the commit
        add(tc, pid, epoch)
        assert part.log_end_offset == first_end
        assert produce_txn(node, pid, epoch, 0) == E.invalid_txn_state
        # the verification asked of this coordinator answers from the committed state
        assert tc.add_partitions("t", pid, epoch, [("data", 0)], verify_only=True) == {
            ("data", 0): E.invalid_txn_state}
        # a further addition goes on top, in log order
        add(tc, pid, epoch, 1)
        # EndTxn and InitProducerId wait for the records (Kafka's pending state)
        assert tc.end_txn("t", pid, epoch, True) == E.concurrent_transactions
        assert tc.init_producer_id("t", 60000).error == E.concurrent_transactions
        waiting = asyncio.ensure_future(tc.committed("t"))
        await settle()
        assert not waiting.done()
        # the first record committed, not the second: data-0 is in, data-1 not yet
        assert part.update_follower_fetch(FOLLOWER, first_end, int(time.time() * 1000)) is None
        await settle()
        assert not waiting.done()
        assert tc.add_partitions("t", pid, epoch, [("data", 0), ("data", 1)],
                                 verify_only=True) == {("data", 0): E.none,
                                                       ("data", 1): E.invalid_txn_state}
        assert produce_txn(node, pid, epoch, 0) == E.none
        assert produce_txn(node, pid, epoch, 0, partition=1) == E.invalid_txn_state
        follower_catches_up(part)
        await settle()
        assert await waiting == E.none
        assert produce_txn(node, pid, epoch, 0, partition=1) == E.none
        node.close()

    asyncio.run(main())


def test_stacked_writes_lost_together_leave_the_last_committed_state(
        tmp_path: Path) -> None:
    node, tc = make(tmp_path)

    async def main() -> None:
        pid, epoch = producer(tc)
        part = replicated(node, tc, "t")
        add(tc, pid, epoch)
        first_end = part.log_end_offset
        add(tc, pid, epoch, 1)
        assert part.update_follower_fetch(FOLLOWER, first_end, int(time.time() * 1000)) is None
        await settle()
        lose_leadership(part)
        await settle()
        m = tc.txns["t"]
        # the first record committed, the second was lost
        assert m.state == TxnState.ONGOING and m.partitions == {("data", 0)}
        assert "t" not in tc.uncommitted
        assert produce_txn(node, pid, epoch, 0, partition=1) == E.invalid_txn_state
        node.close()

    asyncio.run(main())


def test_a_write_lost_with_the_leadership_leaves_the_committed_state(tmp_path: Path) -> None:
    """Partition seed 318 in small: a transaction's AddPartitionsToTxn record is written but
    never committed, the coordinator's leadership moves. The partition must not take the
    transaction's data, and the coordinator's state is the committed one."""
    node, tc = make(tmp_path)

    async def main() -> None:
        pid, epoch = producer(tc)
        # an earlier transaction of the same epoch had the partition, and ended
        add(tc, pid, epoch)
        assert produce_txn(node, pid, epoch, 0) == E.none
        assert tc.end_txn("t", pid, epoch, False) == E.none
        data = node.rm.get("data", 0)
        lso_after_first = data.last_stable_offset
        assert lso_after_first == data.log_end_offset
        part = replicated(node, tc, "t")
        add(tc, pid, epoch)
        waiting = asyncio.ensure_future(tc.committed("t"))
        lose_leadership(part)
        await settle()
        assert await waiting == E.not_coordinator
        m = tc.txns["t"]
        assert m.state == TxnState.COMPLETE_ABORT and m.partitions == set()
        # the same epoch's next transaction was never verified: its batch is refused
        assert produce_txn(node, pid, epoch, 2) == E.invalid_txn_state
        assert data.last_stable_offset == lso_after_first == data.log_end_offset
        node.close()

    asyncio.run(main())


def test_markers_wait_for_the_prepare_record(tmp_path: Path) -> None:
    node, tc = make(tmp_path)

    async def main() -> None:
        pid, epoch, data, end = with_data(node, tc)
        part = replicated(node, tc, "t")
        assert tc.end_txn("t", pid, epoch, True) == E.none
        await settle()
        # PrepareCommit is not committed: no partition has been told the outcome
        assert data.log_end_offset == end and data.last_stable_offset == 0
        follower_catches_up(part)
        await settle()
        assert data.log_end_offset == end + 1  # the commit marker
        assert data.last_stable_offset == end + 1
        follower_catches_up(part)  # CompleteCommit
        await settle()
        assert tc.txns["t"].state == TxnState.COMPLETE_COMMIT
        node.close()

    asyncio.run(main())


def test_a_lost_prepare_sends_no_marker_and_a_new_coordinator_decides(tmp_path: Path) -> None:
    node, tc = make(tmp_path)

    async def main() -> None:
        pid, epoch, data, end = with_data(node, tc)
        part = replicated(node, tc, "t")
        assert tc.end_txn("t", pid, epoch, True) == E.none
        lose_leadership(part)
        await settle()
        assert data.log_end_offset == end  # no marker went out
        assert tc.txns["t"].state == TxnState.ONGOING
        node.close()

    asyncio.run(main())


def test_a_timed_out_wait_keeps_the_write_pending_while_led_here(tmp_path: Path) -> None:
    node, tc = make(tmp_path)

    async def main() -> None:
        pid, epoch = producer(tc)
        part = replicated(node, tc, "t")
        add(tc, pid, epoch)
        u = tc.uncommitted._queues["t"]
        tc.uncommitted._settle("t", u)  # what the purgatory's timeout calls
        await settle()
        assert tc.uncommitted._queues.get("t") is u  # still led here: the record may commit
        assert produce_txn(node, pid, epoch, 0) == E.invalid_txn_state
        follower_catches_up(part)
        await settle()
        assert "t" not in tc.uncommitted
        assert produce_txn(node, pid, epoch, 0) == E.none
        node.close()

    asyncio.run(main())


def test_replay_after_the_write_committed_elsewhere(tmp_path: Path) -> None:
    """A coordinator that loads the partition finds what its log holds (a committed
    addition is in the transaction, and its partitions' leaders here are verified)."""
    node, tc = make(tmp_path)

    async def main() -> None:
        pid, epoch = producer(tc)
        add(tc, pid, epoch, 1)
        again = coordinator(node)
        assert again.txns["t"].state == TxnState.ONGOING
        assert node.rm.get("data", 1).log.producer_state.is_verified(pid, epoch)
        node.close()

    asyncio.run(main())


def test_txn_offset_commit_v5_writes_once_its_addition_is_committed(tmp_path: Path) -> None:
    """KIP-890 part 2: TxnOffsetCommit v5 adds the group's partition itself; its offsets go
    into `__consumer_offsets` only once that addition is committed."""
    node, tc = make(tmp_path)
    gc = node.coordinator

    async def main() -> None:
        pid, epoch = producer(tc)
        part = replicated(node, tc, "t")
        call = asyncio.ensure_future(tc.commit_offsets_v5(
            "t", pid, epoch, "g", {("data", 0): (3, -1, "m")}, -1, "", None,
            OFFSETS_PARTITIONS))
        await settle()
        assert not call.done() and gc.pending_txn_offsets() == 0
        follower_catches_up(part)
        assert await call == E.none
        assert gc.pending_txn_offsets() == 1
        node.close()

    asyncio.run(main())


def test_end_txn_answers_once_the_transaction_is_complete(tmp_path: Path) -> None:
    """EndTxn's answer waits for the markers and the committed CompleteCommit (bounded), so
    the client's next transaction does not meet CONCURRENT_TRANSACTIONS."""
    node, tc = make(tmp_path)

    async def main() -> None:
        pid, epoch, data, end = with_data(node, tc)
        part = replicated(node, tc, "t")
        answer = asyncio.ensure_future(tc.runtime.durably(
            lambda: tc.end_txn("t", pid, epoch, True)))
        await settle()
        assert not answer.done()
        follower_catches_up(part)  # PrepareCommit: the marker goes, CompleteCommit is written
        await settle()
        assert data.log_end_offset == end + 1
        assert tc.txns["t"].state == TxnState.COMPLETE_COMMIT and "t" in tc.uncommitted
        assert not answer.done()
        follower_catches_up(part)
        assert await answer == E.none
        # the next transaction starts at once
        add(tc, pid, epoch)
        node.close()

    asyncio.run(main())


def test_describe_and_list_show_the_committed_state(tmp_path: Path) -> None:
    """DescribeTransactions and ListTransactions show a change once its record is committed
    (Kafka shows a state once its write completed); an id whose first record is not
    committed is not found yet."""
    node, tc = make(tmp_path)

    async def main() -> None:
        pid, epoch = producer(tc)
        part = replicated(node, tc, "t")
        add(tc, pid, epoch)
        code, shown = tc.describe("t")
        assert code == E.none and shown is not None
        assert shown.state == TxnState.EMPTY and shown.partitions == set()
        assert tc.txns["t"].state == TxnState.ONGOING  # the change is written, not shown
        assert [m.transactional_id for m in tc.list(["Empty"])] == ["t"]
        assert tc.list(["Ongoing"]) == []
        follower_catches_up(part)
        await settle()
        code, shown = tc.describe("t")
        assert shown is not None and shown.state == TxnState.ONGOING
        assert shown.partitions == {("data", 0)}
        assert [m.transactional_id for m in tc.list(["Ongoing"])] == ["t"]
        # a new id on the same partition: not found until its first record commits
        other = next(f"u{i}" for i in range(10_000)
                     if tc.partition_of(f"u{i}") == tc.partition_of("t"))
        assert tc.init_producer_id(other, 60000).error == E.none
        assert tc.describe(other) == (E.transactional_id_not_found, None)
        assert other not in {m.transactional_id for m in tc.list()}
        follower_catches_up(part)
        await settle()
        code, shown = tc.describe(other)
        assert code == E.none and shown is not None and shown.state == TxnState.EMPTY
        node.close()

    asyncio.run(main())
