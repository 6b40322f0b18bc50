"""The transaction markers' state machine (marker_queue.py, no I/O) and the coordinator's
two phases around it: markers grouped by leader broker, retried after leadership errors,
dropped when fenced, Complete* written only once every marker is in; a coordinator write
that fails leaves the transaction as it was."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

from odradek.coordinator.transaction.coordinator import TransactionCoordinator, TxnConfig
from odradek.coordinator.transaction.marker_channel import build_request, parse_response
from odradek.coordinator.transaction.marker_queue import (
    MarkerOutcome,
    MarkerQueue,
    PendingMarkers,
)
from odradek.coordinator.transaction.producer_ids import ProducerIdManager
from odradek.coordinator.transaction.state_log import TOPIC, TxnState
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import decode_request, encode_request
from tests.unit.coordinator.test_transaction_coordinator import (
    TXN_PARTS,
    control_batches,
    make,
    produce_txn,
)

E = ErrorCode
A, B, C = ("t", 0), ("t", 1), ("u", 0)


def entry(tid: str = "x", parts: tuple[tuple[str, int], ...] = (A, B, C)) -> PendingMarkers:
    return PendingMarkers(tid, 7, 2, True, 5, set(parts))


def test_plan_groups_by_leader_and_marks_in_flight() -> None:
    q = MarkerQueue()
    e = entry()
    q.add(e)
    leaders = {A: 1, B: 2, C: 1}
    plan = q.plan(leaders.get)
    assert {b: [(x.transactional_id, tps) for x, tps in items] for b, items in plan.items()} == {
        1: [("x", [A, C])], 2: [("x", [B])]}
    assert e.in_flight == {A, B, C}
    assert q.plan(leaders.get) == {}  # nothing twice while in flight
    assert not q.waiting()


def test_retry_after_leader_change_then_complete() -> None:
    q = MarkerQueue()
    e = entry()
    q.add(e)
    leaders = {A: 1, B: 2, C: 1}
    q.plan(leaders.get)
    assert q.on_result(e, A, E.none) == MarkerOutcome.WRITTEN
    assert q.on_result(e, B, E.not_leader_or_follower) == MarkerOutcome.RETRY
    q.on_failed(e, [C])  # the connection to broker 1 dropped
    assert q.waiting() and q.completed() == []
    leaders[B] = 3  # the metadata moved B's leadership
    plan = q.plan(leaders.get)
    assert sorted(plan) == [1, 3]
    q.on_result(e, B, E.none)
    q.on_result(e, C, E.none)
    assert q.completed() == [e]
    assert len(q) == 0


def test_no_leader_waits_and_deleted_partition_is_dropped() -> None:
    q = MarkerQueue()
    e = entry(parts=(A, B))
    q.add(e)
    plan = q.plan({A: -1}.get)  # A has no leader now, B is gone from the metadata
    assert plan == {}
    assert e.pending == {A} and q.waiting()
    q.plan({A: 4}.get)
    q.on_result(e, A, E.none)
    assert q.completed() == [e]


def test_fencing_error_stops_sending_without_completing() -> None:
    q = MarkerQueue()
    e = entry()
    q.add(e)
    q.plan({A: 1, B: 1, C: 1}.get)
    assert q.on_result(e, A, E.transaction_coordinator_fenced) == MarkerOutcome.FENCED
    assert q.get("x") is None
    assert q.on_result(e, B, E.none) == MarkerOutcome.IGNORED
    assert q.completed() == []


def test_replaced_and_cancelled_entries_ignore_late_answers() -> None:
    q = MarkerQueue()
    old = entry()
    q.add(old)
    q.plan({A: 1, B: 1, C: 1}.get)
    new = entry()
    q.add(new)
    assert q.on_result(old, A, E.none) == MarkerOutcome.IGNORED
    assert q.cancel(["x"]) == 1
    assert q.on_result(new, A, E.none) == MarkerOutcome.IGNORED
    assert q.completed() == []


def test_empty_transaction_completes_at_once() -> None:
    q = MarkerQueue()
    e = entry(parts=())
    q.add(e)
    assert q.completed() == [e]


def test_request_round_trip() -> None:
    e1, e2 = entry("x", (A, C)), PendingMarkers("y", 8, 0, False, 5, {B})
    req = build_request([(e1, [A, C]), (e2, [B])])
    back = decode_request(27, 1, memoryview(encode_request(req)), 0)
    assert [(int(m.producer_id), m.transaction_result, int(m.coordinator_epoch),
             [(t.name, list(t.partition_indexes)) for t in m.topics]) for m in back.markers] == [
        (7, True, 5, [("t", [0]), ("u", [0])]), (8, False, 5, [("t", [1])])]

    class P:
        def __init__(self, i: int, c: int) -> None:
            self.partition_index, self.error_code = i, c

    class T:
        def __init__(self, name: str, parts: list[P]) -> None:
            self.name, self.partitions = name, parts

    class M:
        def __init__(self, pid: int, topics: list[T]) -> None:
            self.producer_id, self.topics = pid, topics

    class R:
        markers = [M(7, [T("t", [P(0, 0)]), T("u", [P(0, 6)])])]

    assert parse_response(R()) == {7: {A: E.none, C: E.not_leader_or_follower}}


# ---------------------------------------------------------------- the coordinator


def test_marker_for_a_leader_elsewhere_keeps_prepare_until_written(tmp_path: Path) -> None:
    node, _ = make(tmp_path)
    leaders = {("data", 0): 1, ("data", 1): 2}  # data-1 is led by node 2, unreachable here

    async def run() -> None:
        ids = ProducerIdManager(lambda: node.controller.allocate_producer_ids(1, -1, 1000))
        tc = TransactionCoordinator(node.rm, TxnConfig(num_partitions=TXN_PARTS), ids,
                                    node.coordinator, leader_of=leaders.get)
        tc.load()
        r = tc.init_producer_id("far", 60000)
        pid, epoch = r.producer_id, r.producer_epoch
        assert tc.add_partitions("far", pid, epoch, [("data", 0), ("data", 1)]) == {
            ("data", 0): E.none, ("data", 1): E.none}
        assert produce_txn(node, pid, epoch, 0) == E.none
        assert tc.end_txn("far", pid, epoch, True) == E.none
        m = tc.txns["far"]
        # the local marker is written; the remote one is not, so the transaction is not
        # complete and the producer is told to wait
        assert control_batches(node, 0) == [2]
        assert m.state == TxnState.PREPARE_COMMIT
        assert tc.end_txn("far", pid, epoch, True) == E.concurrent_transactions
        assert tc.add_partitions("far", pid, epoch, [("data", 0)])[("data", 0)] == \
            E.concurrent_transactions
        assert tc.init_producer_id("far", 60000).error == E.concurrent_transactions
        # leadership of data-1 comes here: the retry writes the marker and completes
        leaders[("data", 1)] = 1
        for _ in range(100):
            await asyncio.sleep(0.05)
            if m.state == TxnState.COMPLETE_COMMIT:
                break
        assert m.state == TxnState.COMPLETE_COMMIT and m.partitions == set()
        assert control_batches(node, 1) == [0]
        await tc.stop()

    asyncio.run(run())
    node.close()


def test_failed_write_leaves_the_transaction_as_it_was(tmp_path: Path) -> None:
    node, tc = make(tmp_path)
    r = tc.init_producer_id("rb", 60000)
    pid, epoch = r.producer_id, r.producer_epoch
    assert tc.add_partitions("rb", pid, epoch, [("data", 0)]) == {("data", 0): E.none}
    before = dataclasses.replace(tc.txns["rb"], partitions=set(tc.txns["rb"].partitions))
    # min.insync.replicas=2 with an ISR of one: every __transaction_state append fails
    part = node.rm.get(TOPIC, tc.partition_of("rb"))
    part.log.config = dataclasses.replace(part.log.config, min_insync_replicas=2)
    assert tc.add_partitions("rb", pid, epoch, [("data", 1)]) == {
        ("data", 1): E.coordinator_not_available}
    assert tc.end_txn("rb", pid, epoch, True) == E.coordinator_not_available
    assert tc.init_producer_id("rb", 60000).error == E.coordinator_not_available
    assert tc.txns["rb"] == before  # still Ongoing with data-0 alone, same epoch
    assert control_batches(node, 0) == []  # no marker went out
    node.close()


def test_failed_consumer_group_write_reverts_the_group(tmp_path: Path) -> None:
    from odradek.coordinator.offsets_topic import TOPIC as OFFSETS
    from tests.unit.coordinator.support import Node

    node = Node(tmp_path, {"t": 4})
    coord = node.coordinator

    def hb(member: str = "", epoch: int = 0) -> Any:
        return coord.consumer_group_heartbeat("g", member, epoch, None, None, 30_000, ["t"],
                                              None, None if epoch == 0 else {}, "client", "/h")

    try:
        a = hb()
        assert a.error == E.none and a.member_epoch == 1
        before = dataclasses.replace(coord.groups["g"])
        members_before = set(coord.groups["g"].members)
        part = node.rm.get(OFFSETS, coord.store.partition_for("g"))
        part.log.config = dataclasses.replace(part.log.config, min_insync_replicas=2)
        # a second member's join cannot be written: the answer is retriable and the group
        # is as it was (no member, no epoch bump), as Kafka's runtime reverts it
        assert hb().error == E.coordinator_not_available
        g = coord.groups["g"]
        assert set(g.members) == members_before
        assert (g.group_epoch, g.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
        # a new group that cannot be written is not created
        r = coord.consumer_group_heartbeat("g2", "", 0, None, None, 30_000, ["t"], None, None,
                                           "client", "/h")
        if coord.store.partition_for("g2") == coord.store.partition_for("g"):
            assert r.error == E.coordinator_not_available and "g2" not in coord.groups
    finally:
        node.close()
