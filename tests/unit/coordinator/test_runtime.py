"""The coordinator runtime over real logs: a partition is loaded when this node becomes its
leader (its records replayed), unloaded when it resigns (state and timers gone, requests
NOT_COORDINATOR), loaded again with what was written meanwhile; stale leadership events are
ignored; timers fire, and unloading cancels those of the partition."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path

import pytest

from odradek.coordinator import offsets_topic as ot
from odradek.coordinator.group.classic import GroupState, IllegalGroupTransition
from odradek.coordinator.group.coordinator import (
    GroupConfig,
    GroupCoordinator,
    JoinRequest,
    OffsetCommitEntry,
)
from odradek.coordinator.runtime import CoordinatorRuntime
from odradek.coordinator.transaction.coordinator import TransactionCoordinator, TxnConfig
from odradek.coordinator.transaction.producer_ids import ProducerIdManager
from odradek.coordinator.transaction.state_log import TOPIC as TXN_TOPIC
from odradek.coordinator.transaction.state_log import TxnState, encode_key, encode_value
from odradek.protocol.errors import ErrorCode
from tests.unit.coordinator.support import OFFSETS_PARTITIONS, Node
from tests.unit.coordinator.test_transaction_coordinator import control_batches, produce_txn
from tests.unit.coordinator.test_txn_offsets_replay import setup

E = ErrorCode
WAIT_S = 30  # a bound for a loaded machine, not a speed claim


def other_node(node: Node) -> tuple[CoordinatorRuntime, GroupCoordinator, TransactionCoordinator]:
    """Coordinators on a runtime of their own over the same logs, owning nothing yet: what
    another broker would be before leadership moves to it."""
    runtime = CoordinatorRuntime(node.rm)
    gc = GroupCoordinator(node.rm, GroupConfig(num_partitions=OFFSETS_PARTITIONS,
                                               min_session_timeout_ms=10), node.lookup,
                          node.name_of, lambda: list(node.controller.image.topics_by_name),
                          runtime)
    ids = ProducerIdManager(lambda: node.controller.allocate_producer_ids(1, -1, 1000))
    tc = TransactionCoordinator(node.rm, TxnConfig(num_partitions=1), ids, gc, None, runtime)
    return runtime, gc, tc


def committed(gc: GroupCoordinator, group: str) -> dict[tuple[str, int], int]:
    return {tp: c.offset for tp, c in gc.offsets.get(group).items()}


def test_group_partition_load_unload_reload(tmp_path: Path) -> None:
    node, _ = setup(tmp_path)
    writer = node.coordinator
    group = "moving"
    p = writer.store.partition_for(group)
    assert writer.commit_offsets(group, -1, "", None, [OffsetCommitEntry("data", 0, 5)]) == {
        ("data", 0): E.none}
    runtime, gc, _ = other_node(node)
    assert gc.owned == set() and gc.coordinator_error(group) == E.not_coordinator
    assert gc.fetch_offsets(group, None) == (E.not_coordinator, [])

    async def moves() -> None:
        # becoming the leader replays the partition
        assert await gc.on_become_leader(p, 1)
        assert gc.owned == {p} and not gc.loading
        assert gc.coordinator_error(group) == E.none
        assert committed(gc, group) == {("data", 0): 5}
        assert gc.list_groups() == [(group, "", "Empty", "classic")]

        # resigning drops the state; requests get NOT_COORDINATOR and change nothing
        assert await gc.on_resign(p, 2)
        assert gc.owned == set() and gc.groups == {} and gc.offsets.get(group) == {}
        end = node.rm.get(ot.TOPIC, p).log_end_offset
        assert gc.commit_offsets(group, -1, "", None, [OffsetCommitEntry("data", 1, 1)]) == {
            ("data", 1): E.not_coordinator}
        assert gc.fetch_offsets(group, None) == (E.not_coordinator, [])
        assert gc.heartbeat(group, 1, "m", None) == E.not_coordinator
        assert gc.delete_groups([group]) == {group: E.not_coordinator}
        assert node.rm.get(ot.TOPIC, p).log_end_offset == end

        # a leadership event older than the last one seen is stale
        assert not await gc.on_become_leader(p, 1)
        assert gc.coordinator_error(group) == E.not_coordinator

        # records written meanwhile (by the other leader) are there on the next load
        assert writer.commit_offsets(group, -1, "", None, [
            OffsetCommitEntry("data", 0, 9), OffsetCommitEntry("data", 1, 4)]) == {
            ("data", 0): E.none, ("data", 1): E.none}
        assert await gc.on_become_leader(p, 3)
        assert committed(gc, group) == {("data", 0): 9, ("data", 1): 4}
        assert runtime.epoch(ot.TOPIC, p) == 3
        # a resignation older than the current leadership is stale too
        assert not await gc.on_resign(p, 2)
        assert gc.coordinator_error(group) == E.none

    asyncio.run(moves())
    node.close()


def test_transaction_partition_load_finishes_half_ended_and_unload_forgets(
        tmp_path: Path) -> None:
    node, tc = setup(tmp_path)
    r = tc.init_producer_id("tx", 60000)
    pid, epoch = r.producer_id, r.producer_epoch
    assert tc.add_partitions("tx", pid, epoch, [("data", 0)]) == {("data", 0): E.none}
    assert produce_txn(node, pid, epoch, 0) == E.none
    # the coordinator wrote PrepareCommit and died before the markers
    m = copy.deepcopy(tc.txns["tx"])
    m.state = TxnState.PREPARE_COMMIT
    assert tc.runtime.append(TXN_TOPIC, 0, [(encode_key("tx"), encode_value(m))]).error == E.none
    assert control_batches(node, 0) == []

    _, _, other = other_node(node)
    assert other.init_producer_id("tx", 60000).error == E.not_coordinator

    async def moves() -> None:
        assert await other.on_become_leader(0, 1)
        # loaded: the transaction is completed with its markers
        assert other.txns["tx"].state == TxnState.COMPLETE_COMMIT
        assert len(control_batches(node, 0)) == 1
        assert other.describe("tx")[0] == E.none
        assert await other.on_resign(0, 2)
        assert other.txns == {}
        assert other.describe("tx") == (E.not_coordinator, None)
        assert other.end_txn("tx", pid, epoch, True) == E.not_coordinator
        assert not other.is_coordinator_for("tx")

    asyncio.run(moves())
    node.close()


def test_follow_leadership_loads_what_this_node_leads(tmp_path: Path) -> None:
    node, tc = setup(tmp_path)
    r = tc.init_producer_id("kept", 60000)
    assert node.coordinator.commit_offsets("g1", -1, "", None, [
        OffsetCommitEntry("data", 2, 11)]) == {("data", 2): E.none}
    runtime, gc, other = other_node(node)

    async def follow() -> None:
        await runtime.follow_leadership()  # node 1 leads every partition
        assert gc.owned == set(range(OFFSETS_PARTITIONS)) and other.owned == {0}
        assert committed(gc, "g1") == {("data", 2): 11}
        assert other.txns["kept"].producer_id == r.producer_id
        await runtime.follow_leadership()  # nothing moved: nothing reloaded
        assert runtime.epoch(TXN_TOPIC, 0) == node.rm.get(TXN_TOPIC, 0).leader_epoch

    asyncio.run(follow())
    node.close()


def test_timers_fire_and_unload_cancels_the_partitions_timers(tmp_path: Path) -> None:
    node = Node(tmp_path, {"t": 6}, initial_rebalance_delay_ms=600_000)
    gc = node.coordinator
    scheduler = gc.runtime.scheduler

    async def timers() -> None:
        periodic = asyncio.Event()
        scheduler.every("probe", 0.01, periodic.set)
        scheduler.start()
        await asyncio.wait_for(periodic.wait(), WAIT_S)
        once = asyncio.Event()
        gc.call_later("g", 0, once.set)
        await asyncio.wait_for(once.wait(), WAIT_S)
        assert scheduler.pending((ot.TOPIC, gc.store.partition_for("g"))) == 0  # fired: gone

        # a JoinGroup waits out the initial rebalance delay: a timer of its partition
        p = gc.store.partition_for("g")
        join = asyncio.ensure_future(gc.join_group(JoinRequest(
            "g", "", None, "client", "/127.0.0.1", 10_000, 20_000, "consumer",
            [("range", ot.encode_subscription(["t"]))], False)))
        while scheduler.pending((ot.TOPIC, p)) == 0:
            await asyncio.sleep(0)
        never = asyncio.Event()
        gc.call_later("g", 600, never.set)
        assert scheduler.pending((ot.TOPIC, p)) == 2
        assert gc.groups["g"].state is GroupState.PREPARING_REBALANCE

        assert await gc.on_resign(p, 1)
        assert scheduler.pending((ot.TOPIC, p)) == 0
        result = await asyncio.wait_for(join, WAIT_S)
        assert result.error == E.not_coordinator
        assert "g" not in gc.groups and not never.is_set()
        assert "probe" in scheduler.jobs()
        await gc.runtime.stop()
        assert not scheduler.running

    asyncio.run(timers())
    node.close()


def test_classic_group_states_move_only_along_kafkas_table() -> None:
    from odradek.coordinator.group.classic import VALID_PREVIOUS_STATES, ClassicGroup

    S = GroupState
    allowed = {(prev, nxt) for nxt, prevs in VALID_PREVIOUS_STATES.items() for prev in prevs}
    assert allowed == {
        (S.PREPARING_REBALANCE, S.EMPTY), (S.STABLE, S.PREPARING_REBALANCE),
        (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE), (S.EMPTY, S.PREPARING_REBALANCE),
        (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE), (S.COMPLETING_REBALANCE, S.STABLE),
        *((prev, S.DEAD) for prev in S)}
    for prev in S:
        for nxt in S:
            g = ClassicGroup("g", state=prev)
            if (prev, nxt) in allowed:
                g.transition(nxt, 7)
                assert (g.state, g.state_timestamp_ms) == (nxt, 7)
            else:
                with pytest.raises(IllegalGroupTransition):
                    g.transition(nxt, 7)
                assert (g.state, g.state_timestamp_ms) == (prev, -1)


def test_new_leader_loads_its_log_beyond_its_high_watermark(tmp_path: Path) -> None:
    # a follower that becomes the leader knows a HW behind its log end until its followers
    # fetch; the commits between the two were acknowledged by the old leader, so the load
    # reads to the log end (Kafka's CoordinatorLoaderImpl), not to the HW
    node, _ = setup(tmp_path)
    writer = node.coordinator
    group = "trailing"
    p = writer.store.partition_for(group)
    assert writer.commit_offsets(group, -1, "", None, [OffsetCommitEntry("data", 0, 5)]) == {
        ("data", 0): E.none}
    part = node.rm.get(ot.TOPIC, p)
    hw = part.high_watermark
    assert writer.commit_offsets(group, -1, "", None, [OffsetCommitEntry("data", 0, 8)]) == {
        ("data", 0): E.none}
    assert part.log_end_offset > hw
    part.high_watermark = hw  # the trailing HW of the new leader
    _, gc, _ = other_node(node)

    async def lead() -> None:
        assert await gc.on_become_leader(p, 1)
        assert committed(gc, group) == {("data", 0): 8}

    asyncio.run(lead())
    node.close()
