"""The transaction coordinator over real logs: two-phase end, markers, LSO, aborted index,
fencing, timeouts, replay and recovery of half-ended transactions."""

from __future__ import annotations

import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.coordinator.transaction.coordinator import TransactionCoordinator, TxnConfig
from odradek.coordinator.transaction.producer_ids import ProducerIdManager
from odradek.coordinator.transaction.state_log import (
    TOPIC,
    TxnMetadata,
    TxnState,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from odradek.metadata.controller_requests import CreatableTopic
from odradek.protocol.errors import ErrorCode, ProtocolError
from odradek.protocol.records import Record, build_batch, iter_batches
from tests.unit.coordinator.support import Node

E = ErrorCode
TXN_PARTS = 3


def make(tmp_path: Path) -> tuple[Node, TransactionCoordinator]:
    node = Node(tmp_path, {"data": 2})
    if TOPIC not in node.controller.image.topics_by_name:
        node.controller.create_topics([CreatableTopic(TOPIC, TXN_PARTS, 1)], False)
        import asyncio

        asyncio.run(node.rm.sync(node.controller.image))
    return node, coordinator(node)


def coordinator(node: Node) -> TransactionCoordinator:
    ids = ProducerIdManager(lambda: node.controller.allocate_producer_ids(1, -1, 1000))
    tc = TransactionCoordinator(node.rm, TxnConfig(num_partitions=TXN_PARTS), ids,
                                node.coordinator)
    tc.load()
    tc.load_offsets()
    tc.recover()
    return tc


def produce_txn(node: Node, pid: int, epoch: int, seq: int, partition: int = 0, n: int = 2) -> ErrorCode:
    batch = build_batch([Record(-1, int(time.time() * 1000), None, b"v") for _ in range(n)], producer_id=pid,
                        producer_epoch=epoch, base_sequence=seq, transactional=True)
    return node.rm.append("data", partition, memoryview(batch), -1).error


def control_batches(node: Node, partition: int) -> list[int]:
    part = node.rm.get("data", partition)
    region = part.log.read(0, 1 << 20).region
    if region is None:
        return []
    data = part.log.read_bytes(region)
    return [h.base_offset for h, _ in iter_batches(data) if h.is_control]


def test_state_log_round_trip() -> None:
    m = TxnMetadata("tx", 7, 3, 60000, TxnState.ONGOING, {("a", 0), ("b", 2)}, 10, 5)
    assert decode_key(encode_key("tx")) == "tx"
    assert decode_value("tx", encode_value(m)) == m


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=120))
def test_state_log_decoder_fuzz(data: bytes) -> None:
    try:
        decode_value("x", data)
    except ProtocolError:
        pass


def test_commit_abort_markers_lso_and_index(tmp_path: Path) -> None:
    node, tc = make(tmp_path)
    r = tc.init_producer_id("t1", 60000)
    assert r.error == E.none
    pid, epoch = r.producer_id, r.producer_epoch
    part = node.rm.get("data", 0)
    # unverified transactional data is refused (KIP-890)
    assert produce_txn(node, pid, epoch, 0) == E.invalid_txn_state
    assert tc.add_partitions("t1", pid, epoch, [("data", 0), ("data", 1)]) == {
        ("data", 0): E.none, ("data", 1): E.none}
    assert produce_txn(node, pid, epoch, 0) == E.none
    assert part.last_stable_offset == 0 and part.high_watermark == 2
    assert tc.end_txn("t1", pid, epoch, True) == E.none
    assert part.last_stable_offset == part.high_watermark == 3
    assert control_batches(node, 0) == [2]
    # as Kafka, every partition added to the transaction gets its marker, data or not
    assert control_batches(node, 1) == [0]
    # an aborted transaction goes to the index and to read_committed fetches
    tc.add_partitions("t1", pid, epoch, [("data", 0)])
    assert produce_txn(node, pid, epoch, 2) == E.none
    assert tc.end_txn("t1", pid, epoch, False) == E.none
    assert part.aborted_transactions(0, part.last_stable_offset) == [(pid, 3)]
    assert list(part.log.dir.glob("*.txnindex"))
    assert tc.txns["t1"].state == TxnState.COMPLETE_ABORT
    node.close()


def test_replay_and_recovery_of_prepared_transactions(tmp_path: Path) -> None:
    node, tc = make(tmp_path)
    r = tc.init_producer_id("t2", 60000)
    tc.add_partitions("t2", r.producer_id, r.producer_epoch, [("data", 1)])
    assert produce_txn(node, r.producer_id, r.producer_epoch, 0, partition=1) == E.none
    m = tc.txns["t2"]
    m.state = TxnState.PREPARE_COMMIT  # the decision is durable, the markers are not written
    tc._persist(m, None)
    again = coordinator(node)
    assert again.txns["t2"].state == TxnState.COMPLETE_COMMIT
    assert control_batches(node, 1) == [2]
    assert node.rm.get("data", 1).last_stable_offset == 3
    node.close()


def test_fencing_timeout_and_bad_input(tmp_path: Path) -> None:
    node, tc = make(tmp_path)
    r = tc.init_producer_id("t3", 100)
    pid, epoch = r.producer_id, r.producer_epoch
    assert tc.end_txn("t3", pid, epoch, True) == E.invalid_txn_state
    assert tc.end_txn("t3", pid + 1, epoch, True) == E.invalid_producer_id_mapping
    assert tc.add_partitions("t3", pid, epoch - 1, [("data", 0)]) == {("data", 0): E.producer_fenced}
    assert tc.add_partitions("t3", pid, epoch, [("nope", 0)]) == {
        ("nope", 0): E.unknown_topic_or_partition}
    assert tc.init_producer_id("t3", 10**9).error == E.invalid_transaction_timeout
    tc.add_partitions("t3", pid, epoch, [("data", 0)])
    assert produce_txn(node, pid, epoch, 0) == E.none
    # the timeout aborts with a bumped epoch: the old producer is fenced on the partition
    tc.abort_timed_out(now=tc.txns["t3"].start_ms + 1000)
    assert tc.txns["t3"].state == TxnState.COMPLETE_ABORT
    assert tc.txns["t3"].producer_epoch == epoch + 1
    assert produce_txn(node, pid, epoch, 2) == E.invalid_producer_epoch
    assert node.rm.get("data", 0).last_stable_offset == node.rm.get("data", 0).high_watermark
    # a new instance bumps again; the one it replaced is fenced at the coordinator
    r2 = tc.init_producer_id("t3", 60000)
    assert (r2.producer_id, r2.producer_epoch) == (pid, epoch + 2)
    assert tc.end_txn("t3", pid, epoch + 1, False) == E.producer_fenced
    node.close()


def test_transactional_offsets_follow_their_markers_across_restart(tmp_path: Path) -> None:
    from odradek.coordinator.group.offset_manager import encode_offset_record as _encode_offset
    from odradek.coordinator.offsets_topic import TOPIC as OFFSETS
    from tests.unit.coordinator.support import OFFSETS_PARTITIONS

    node, tc = make(tmp_path)
    for tid, offset, commit in (("c", 7, True), ("a", 5, False), ("o", 9, None)):
        r = tc.init_producer_id(tid, 60000)
        pid, epoch = r.producer_id, r.producer_epoch
        assert tc.add_offsets(tid, pid, epoch, "g", OFFSETS, OFFSETS_PARTITIONS) == E.none
        tp = ("data", 0 if tid != "c" else 1)
        assert tc.txn_offset_commit(tid, pid, epoch, "g", {tp: (offset, -1, "")}, OFFSETS,
                                    OFFSETS_PARTITIONS, _encode_offset) == E.none
        if commit is not None:
            assert tc.end_txn(tid, pid, epoch, commit) == E.none
    offsets = node.coordinator.offsets.get("g")
    assert {tp: v.offset for tp, v in offsets.items()} == {("data", 1): 7}
    node.close()
    again = Node(tmp_path, {"data": 2})
    tc2 = coordinator(again)
    # the group coordinator's replay alone would show 5 and 9; the markers decide
    assert {tp: v.offset for tp, v in again.coordinator.offsets.get("g").items()} == {("data", 1): 7}
    r = tc2.txns["o"]
    assert tc2.end_txn("o", r.producer_id, r.producer_epoch, True) == E.none
    assert {tp: v.offset for tp, v in again.coordinator.offsets.get("g").items()} == {
        ("data", 1): 7, ("data", 0): 9}
    again.close()


def test_timeout_fires_at_its_deadline_not_on_the_sweep(tmp_path: Path) -> None:
    """transaction.timeout.ms is a deadline of the coordinator's DeadlineTimer: armed when
    the transaction begins, fired at start + timeout with no cleanup sweep running."""
    from odradek.coordinator.deadlines import DeadlineTimer

    node, tc = make(tmp_path)
    clock = [0.0]
    armed: list[float] = []

    class Handle:
        def cancel(self) -> None:
            pass

    def call_later(delay_s: float, fire: object) -> Handle:
        armed.append(clock[0] + delay_s * 1000)
        return Handle()

    tc.deadlines = DeadlineTimer(lambda: clock[0], call_later, tc._expire_due)
    tc.deadlines.start()
    r = tc.init_producer_id("t-dl", 5000)
    pid, epoch = r.producer_id, r.producer_epoch
    assert tc.add_partitions("t-dl", pid, epoch, [("data", 0)]) == {("data", 0): E.none}
    start = tc.txns["t-dl"].start_ms
    assert tc.deadlines.armed_at == start + 5001
    # early: nothing is due
    clock[0] = start + 4000
    tc.deadlines.fire()
    assert tc.txns["t-dl"].state == TxnState.ONGOING
    # at the deadline: aborted with a bumped epoch, the old producer fenced
    clock[0] = start + 5001
    tc.deadlines.fire()
    assert tc.txns["t-dl"].state == TxnState.COMPLETE_ABORT
    assert tc.txns["t-dl"].producer_epoch == epoch + 1
    assert tc.add_partitions("t-dl", pid, epoch, [("data", 0)]) == {("data", 0): E.producer_fenced}
    assert tc.deadlines.armed_at is None
    node.close()
