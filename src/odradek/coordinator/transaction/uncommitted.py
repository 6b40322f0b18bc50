"""The transaction coordinator's records not committed yet, per transactional id.

The coordinator changes a transaction's state in memory as it appends the record to
`__transaction_state`, but acts on a state (verifies partitions for it, sends its markers)
only once that record is committed: the HW passed it. Until then other requests see the
last committed state where it matters (verification, TxnOffsetCommit), and a record lost
with the leadership puts that state back (issue 15, finding 14: a state acted on before
its record committed let a batch into a transaction no committed record knew of).

A change may be written on top of an uncommitted one: the log keeps their order, the later
commits only with the earlier, so each id's records wait in one queue.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from odradek.coordinator.runtime import WRITE_TIMEOUT_MS, CoordinatorRuntime
from odradek.coordinator.transaction.state_log import TOPIC, TxnMetadata, TxnState
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

E = ErrorCode
# what a transactional id's state records say once committed; None: the id was new
Snapshot = dict[str, Any]


def snapshot(m: TxnMetadata) -> Snapshot:
    """What a failed write puts back (Kafka's coordinators keep the last written state)."""
    snap = dict(vars(m))
    snap["partitions"] = set(m.partitions)
    return snap


def restore(m: TxnMetadata, snap: Snapshot) -> None:
    for k, v in snap.items():
        setattr(m, k, v)


@dataclass
class _Write:
    """One `__transaction_state` record not committed yet: the HW must pass `end`; `then`
    runs at its commit, `done` gets NONE then (or why it was lost)."""

    end: int
    then: list[Callable[[], None]]
    done: asyncio.Future[ErrorCode]
    state: Snapshot  # what the record says: the committed state once it is


@dataclass
class _Queue:
    """One id's records in log order, and the state committed before the first of them."""

    part: Any
    previous: Snapshot | None
    writes: list[_Write] = field(default_factory=list)

    def settle_all(self, code: ErrorCode) -> None:
        for w in self.writes:
            if not w.done.done():
                w.done.set_result(code)


class UncommittedWrites:
    """The queues of every transactional id this coordinator has records in flight for.

    `on_lost(tid, previous)` runs when the leadership of the id's partition moved before its
    records were committed: the coordinator puts the committed state back (`previous`
    None: the id was new, forget it)."""

    def __init__(self, replica_manager: Any, runtime: CoordinatorRuntime,
                 partition_of: Callable[[str], int],
                 on_lost: Callable[[str, Snapshot | None], None]) -> None:
        self.rm = replica_manager
        self.runtime = runtime
        self.partition_of = partition_of
        self.on_lost = on_lost
        self._queues: dict[str, _Queue] = {}

    def __contains__(self, tid: str) -> bool:
        """Whether a state record of `tid` is not committed yet (Kafka's pending
        transition: EndTxn and InitProducerId wait)."""
        return tid in self._queues

    def track(self, m: TxnMetadata, previous: Snapshot | None, end: int,
              then: Callable[[], None] | None) -> None:
        """`m`'s record was appended and ends at offset `end`: `then()` at its commit, at
        once when it is committed already (an unreplicated partition, or no event loop yet:
        a blocking start-up step, before any client can have seen the state)."""
        tid = m.transactional_id
        thens = [] if then is None else [then]
        q = self._queues.get(tid)
        if q is None:
            part = self.rm.get(TOPIC, self.partition_of(tid))
            if part is None or part.solo or part.high_watermark >= end:
                for t in thens:
                    t()
                return
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                for t in thens:
                    t()
                return
            q = self._queues[tid] = _Queue(part, previous)
            first = True
        else:
            loop = asyncio.get_running_loop()
            first = False
        w = _Write(end, thens, loop.create_future(), snapshot(m))
        q.writes.append(w)
        self.runtime.note_settled(w.done)
        if first:
            self._watch(tid, q)

    def after_committed(self, tid: str, then: Callable[[], None]) -> None:
        """`then()` once the id's records written so far are committed (now when they are);
        the current request's answer waits for it."""
        q = self._queues.get(tid)
        if q is None:
            then()
            return
        w = q.writes[-1]
        w.then.append(then)
        self.runtime.note_settled(w.done)

    def committed_view(self, m: TxnMetadata) -> tuple[TxnState, set[tuple[str, int]]]:
        """The transaction's state and partitions as last committed."""
        q = self._queues.get(m.transactional_id)
        if q is None:
            return m.state, m.partitions
        if q.previous is None:
            return TxnState.EMPTY, set()
        return q.previous["state"], q.previous["partitions"]

    def committed_metadata(self, m: TxnMetadata) -> TxnMetadata | None:
        """The transaction as last committed (None: the id's first record is not committed
        yet): what DescribeTransactions and ListTransactions show, as Kafka shows a state
        only once its write completed."""
        q = self._queues.get(m.transactional_id)
        if q is None:
            return m
        if q.previous is None:
            return None
        return TxnMetadata(**{**q.previous, "partitions": set(q.previous["partitions"])})

    async def committed(self, tid: str) -> ErrorCode:
        """NONE once the id's last state record is committed (at once when it is), else why
        not: NOT_COORDINATOR (lost with the leadership), COORDINATOR_NOT_AVAILABLE (not in
        the ISR in time)."""
        q = self._queues.get(tid)
        if q is None:
            return E.none
        try:
            return await asyncio.wait_for(asyncio.shield(q.writes[-1].done),
                                          WRITE_TIMEOUT_MS / 1000)
        except TimeoutError:
            return E.coordinator_not_available

    def drop(self, tid: str) -> None:
        """The id's partition was unloaded: its waiters hear NOT_COORDINATOR."""
        q = self._queues.pop(tid, None)
        if q is not None:
            q.settle_all(E.not_coordinator)

    def _watch(self, tid: str, q: _Queue) -> None:
        if self._queues.get(tid) is not q or not q.writes:
            return
        self.rm.delay_produce([(q.part, q.writes[0].end, q.part.leader_epoch)],
                              WRITE_TIMEOUT_MS, lambda _errors: self._settle(tid, q))

    def _settle(self, tid: str, q: _Queue) -> None:
        """The HW moved past the first record, the leadership moved, or the wait timed out."""
        if self._queues.get(tid) is not q:
            return  # unloaded meanwhile
        part = q.part
        if part.is_leader:
            # still led here, so the records stay in the log: each commits once the ISR has
            # it (or shrinks to those that do); act on those committed, wait for the rest
            while q.writes and part.high_watermark >= q.writes[0].end:
                w = q.writes.pop(0)
                if not q.writes:
                    del self._queues[tid]
                else:
                    q.previous = w.state
                for then in w.then:
                    try:
                        then()
                    except Exception:
                        log.exception("acting on transaction %r's committed state failed",
                                      tid)
                if not w.done.done():
                    w.done.set_result(E.none)
            if q.writes:
                try:
                    self.runtime.scheduler.call_later((TOPIC, self.partition_of(tid)), 0.0,
                                                      self._watch, tid, q)
                except RuntimeError:
                    pass
            return
        # the leadership moved before the records were committed: they may be truncated
        # away; this node no longer coordinates the id (its unload follows), and meanwhile
        # the state is what was committed
        del self._queues[tid]
        self.on_lost(tid, q.previous)
        log.info("transaction %r: %d state write(s) to %s-%d were not committed before the "
                 "leadership moved; its last committed state stands", tid, len(q.writes),
                 TOPIC, self.partition_of(tid))
        q.settle_all(E.not_coordinator)
