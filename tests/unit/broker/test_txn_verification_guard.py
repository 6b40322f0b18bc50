"""The leader's side of KIP-890 verification with its coordinator on another node (finding
14): an answer that comes back after the transaction's marker voids it (INVALID_TXN_STATE,
nothing verified), after a leader change it sends the client to the new leader
(NOT_LEADER_OR_FOLLOWER); otherwise the partition takes the transaction's first batch.
The coordinator node is played by a stand-in channel; the partition and its log are real."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from odradek.broker.txn_verification import verify
from odradek.coordinator.transaction.state_log import TOPIC
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import BatchHeader, ControlRecordType, build_control_batch
from tests.unit.coordinator.test_transaction_coordinator import make, produce_txn

E = ErrorCode
TID = "remote-t"
PID = 4242


class Channels:
    """The coordinator node: answers NONE for the partition, after `meanwhile()`."""

    def __init__(self, meanwhile: Callable[[], None]) -> None:
        self.meanwhile = meanwhile

    async def request(self, node: int, request: Any, timeout: float) -> Any:
        await asyncio.sleep(0)
        self.meanwhile()
        t = request.transactions[0].topics[0]
        return SimpleNamespace(error_code=0, results_by_transaction=(SimpleNamespace(
            topic_results=(SimpleNamespace(name=t.name, results_by_partition=(SimpleNamespace(
                partition_index=t.partitions[0], partition_error_code=0),)),)),))


def setup(tmp_path: Path, meanwhile: Callable[[Any], None]) -> tuple[Any, Any, Any]:
    node, tc = make(tmp_path)
    # the transactional id's coordinator is "another node": this one does not own it
    tc.runtime.unload(TOPIC, [tc.partition_of(TID)])
    part = node.rm.get("data", 0)
    tc.markers.channels = Channels(lambda: meanwhile(part))
    ctx = SimpleNamespace(transaction_coordinator=tc, replica_manager=node.rm,
                          image=node.controller.image)
    return node, ctx, part


def abort_marker(part: Any) -> None:
    raw = build_control_batch(ControlRecordType.ABORT, producer_id=PID, producer_epoch=0,
                              coordinator_epoch=0, timestamp=int(time.time() * 1000))
    view = memoryview(raw)
    part.append(view, BatchHeader.parse(view), None)


def test_an_answer_after_the_marker_is_void(tmp_path: Path) -> None:
    node, ctx, _part = setup(tmp_path, abort_marker)
    code = asyncio.run(verify(ctx, TID, PID, 0, ("data", 0)))
    assert code == E.invalid_txn_state
    assert produce_txn(node, PID, 0, 0) == E.invalid_txn_state
    node.close()


def test_an_answer_after_a_leader_change_sends_the_client_on(tmp_path: Path) -> None:
    def new_epoch(p: Any) -> None:
        p.make_leader(p.leader_epoch + 1, p.partition_epoch + 1, list(p.replicas),
                      list(p.isr), int(time.time() * 1000))

    node, ctx, part = setup(tmp_path, new_epoch)
    assert asyncio.run(verify(ctx, TID, PID, 0, ("data", 0))) == E.not_leader_or_follower
    assert not part.log.producer_state.is_verified(PID, 0)
    node.close()


def test_an_answer_in_time_verifies_one_transaction(tmp_path: Path) -> None:
    node, ctx, part = setup(tmp_path, lambda p: None)
    assert asyncio.run(verify(ctx, TID, PID, 0, ("data", 0))) == E.none
    assert produce_txn(node, PID, 0, 0) == E.none
    abort_marker(part)
    # the next transaction of the epoch asks again
    assert produce_txn(node, PID, 0, 2) == E.invalid_txn_state
    node.close()
