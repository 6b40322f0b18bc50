"""EndTxn v5 (KIP-890 part 2) against the real transaction coordinator: the epoch bump at the
end of each transaction, retries, the spent epoch, and what a late request changes (nothing)."""

from __future__ import annotations

import time
from pathlib import Path

from odradek.coordinator.transaction.coordinator import MAX_EPOCH
from odradek.coordinator.transaction.state_log import TxnState
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import Record, build_batch, iter_batches
from tests.unit.coordinator.test_txn_offsets_replay import setup

E = ErrorCode


def produce(node, pid: int, epoch: int, seq: int) -> ErrorCode:  # type: ignore[no-untyped-def]
    batch = build_batch([Record(-1, int(time.time() * 1000), None, b"v")], producer_id=pid,
                        producer_epoch=epoch, base_sequence=seq, transactional=True)
    return node.rm.append("data", 0, memoryview(batch), -1).error


def marker_epochs(node) -> list[tuple[int, int]]:  # type: ignore[no-untyped-def]
    part = node.rm.get("data", 0)
    data = part.log.read_bytes(part.log.read(0, 1 << 20).region)
    return [(h.producer_id, h.producer_epoch) for h, _ in iter_batches(data) if h.is_control]


def test_spent_epoch_moves_to_a_new_producer_id(tmp_path: Path) -> None:
    node, tc = setup(tmp_path)
    r = tc.init_producer_id("ov", 60000)
    pid = r.producer_id
    m = tc.txns["ov"]
    m.producer_epoch = MAX_EPOCH - 1  # as after 32766 transactions
    tc._persist(m, None)
    epoch = m.producer_epoch
    assert tc.add_partitions("ov", pid, epoch, [("data", 0)])[("data", 0)] == E.none
    assert produce(node, pid, epoch, 0) == E.none
    res = tc.end_txn_v2("ov", pid, epoch, True)
    assert res.error == E.none and res.producer_id != pid and res.producer_epoch == 0
    assert marker_epochs(node) == [(pid, MAX_EPOCH)]  # the old id, fenced at its last epoch
    # the retry is answered with the new id; the old id can write nothing any more
    again = tc.end_txn_v2("ov", pid, epoch, True)
    assert (again.error, again.producer_id, again.producer_epoch) == (E.none, res.producer_id, 0)
    end_before = node.rm.get("data", 0).log_end_offset
    assert produce(node, pid, epoch, 1) == E.invalid_producer_epoch
    assert node.rm.get("data", 0).log_end_offset == end_before
    # the new id runs the next transaction
    new = res.producer_id
    assert tc.add_partitions("ov", new, 0, [("data", 0)])[("data", 0)] == E.none
    assert produce(node, new, 0, 0) == E.none
    assert tc.end_txn_v2("ov", new, 0, False).producer_epoch == 1
    assert tc.txns["ov"].state == TxnState.COMPLETE_ABORT
    node.close()


def test_fenced_producer_gets_no_retry_answer(tmp_path: Path) -> None:
    node, tc = setup(tmp_path)
    r = tc.init_producer_id("fz", 60000)
    pid, e = r.producer_id, r.producer_epoch
    assert tc.add_partitions("fz", pid, e, [("data", 0)])[("data", 0)] == E.none
    assert tc.end_txn_v2("fz", pid, e, True).producer_epoch == e + 1
    assert tc.add_partitions("fz", pid, e + 1, [("data", 0)])[("data", 0)] == E.none
    # the transaction times out: aborted with a bump; the fenced producer's EndTxn is no retry
    tc.abort_timed_out(now=tc.txns["fz"].start_ms + 10**6)
    state = (tc.txns["fz"].state, tc.txns["fz"].producer_epoch)
    assert state == (TxnState.COMPLETE_ABORT, e + 2)
    assert tc.end_txn_v2("fz", pid, e + 1, False).error == E.producer_fenced
    assert tc.end_txn_v2("fz", pid, e, True).error == E.producer_fenced
    assert (tc.txns["fz"].state, tc.txns["fz"].producer_epoch) == state
    node.close()
