"""The transaction coordinator: transactional ids, their producer ids and epochs, and the
two-phase end of each transaction.

Every state change is a record in `__transaction_state` (compacted, keyed by transactional
id) written before the change is acted on, and acted on only once committed (uncommitted.py),
so a restart replays the log and finishes what
was decided: a transaction found in PrepareCommit/PrepareAbort gets its markers written
and completes; an Ongoing one is aborted when its timeout passes. All of it runs on the
event loop: writes are page-cache appends through the partitions, as produce does.

It is a shard of the coordinator runtime (coordinator/runtime.py): the runtime loads a
`__transaction_state` partition when this node becomes its leader (then the half-ended
transactions of that partition are finished), unloads it when the node resigns, writes its
records and runs the timeout sweep.

Ending a transaction is Kafka's two phases: EndTxn (or a timeout, or a new producer
instance) writes PrepareCommit/PrepareAbort, the marker channel (marker_channel.py) writes a
COMMIT/ABORT marker into every partition of the transaction, at its current leader wherever
that is (WriteTxnMarkers), and once every marker is in its ISR the coordinator writes
CompleteCommit/CompleteAbort. Until then the producer's next requests get
CONCURRENT_TRANSACTIONS and retry. Offsets committed in a transaction (TxnOffsetCommit)
become visible to the group coordinator with the commit marker in `__consumer_offsets`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from odradek.coordinator.deadlines import DeadlineTimer
from odradek.coordinator.offsets_topic import TOPIC as OFFSETS_TOPIC
from odradek.coordinator.runtime import CoordinatorRuntime
from odradek.coordinator.transaction.config import TxnConfig
from odradek.coordinator.transaction.marker_channel import TxnMarkerChannelManager
from odradek.coordinator.transaction.marker_queue import LeaderOf, PendingMarkers
from odradek.coordinator.transaction.producer_ids import ProducerIdManager
from odradek.coordinator.transaction.state_log import (
    TOPIC,
    TxnMetadata,
    TxnState,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for,
)
from odradek.coordinator.transaction.txn_offsets import TxnOffsetCommits
from odradek.coordinator.transaction.uncommitted import (
    Snapshot,
    UncommittedWrites,
    restore,
    snapshot,
)
from odradek.protocol.errors import ErrorCode, ProtocolError
from odradek.protocol.records import decode_records

log = logging.getLogger(__name__)

E = ErrorCode
MAX_EPOCH = 32767
S = TxnState
TIMEOUT_JOB = "txn-timeouts"
# the deadline timer's own scheduler key: never a partition's, so no unload cancels it
DEADLINE_KEY = ("txn-deadlines", TOPIC)
# how soon a CompleteCommit/CompleteAbort write that failed is tried again
COMPLETE_RETRY_S = 0.1
# how soon a timed-out transaction whose last change is not committed yet is looked at again
UNCOMMITTED_RECHECK_MS = 100
_PREPARED = (S.PREPARE_COMMIT, S.PREPARE_ABORT)


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class InitResult:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


class TransactionCoordinator(TxnOffsetCommits):
    def __init__(self, replica_manager: Any, config: TxnConfig, producer_ids: ProducerIdManager,
                 group_coordinator: Any = None,
                 partition_exists: Callable[[str, int], bool] | None = None,
                 runtime: CoordinatorRuntime | None = None, leader_of: LeaderOf | None = None,
                 channels: Any = None) -> None:
        self.rm = replica_manager
        self.config = config
        self.producer_ids = producer_ids
        # the group coordinator (its public API only): TxnOffsetCommit writes and markers
        self.groups = group_coordinator
        if runtime is None:
            runtime = getattr(group_coordinator, "runtime", None) or CoordinatorRuntime(
                replica_manager)
        self.runtime = runtime
        self.partition_exists = partition_exists or (lambda t, p: replica_manager.get(t, p) is not None)
        self.txns: dict[str, TxnMetadata] = {}
        # the state records not committed yet, per transactional id (uncommitted.py)
        self.uncommitted = UncommittedWrites(replica_manager, runtime, self.partition_of,
                                             self._lost)
        # transactional id -> resolved once its ending transaction is complete (the
        # CompleteCommit/CompleteAbort record committed), what EndTxn's answer waits for
        self._completions: dict[str, asyncio.Future[None]] = {}
        # transaction.timeout.ms of each Ongoing transaction fires at its deadline (wall-clock
        # ms, as start_ms is persisted), not on the cleanup interval's grid
        self.deadlines = DeadlineTimer(now_ms, self._deadline_timer, self._expire_due)
        self._epochs: dict[int, TxnMetadata] | None = None  # producer id -> txn, a cache
        # where each partition's marker goes: its leader in the metadata image (a cluster), or
        # this node's own view of the partitions it hosts (default)
        self.markers = TxnMarkerChannelManager(
            replica_manager, leader_of or self._hosted_leader, self._markers_written, channels,
            on_written=self._marker_written)
        runtime.register(TOPIC, config.num_partitions, self)

    def _hosted_leader(self, tp: tuple[str, int]) -> int | None:
        part = self.rm.get(*tp)
        return None if part is None else int(part.leader)

    # ------------------------------------------------------------------ ownership

    def partition_of(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.num_partitions)

    def coordinator_error(self, transactional_id: str) -> ErrorCode:
        """NOT_COORDINATOR unless this node owns the id's partition,
        COORDINATOR_LOAD_IN_PROGRESS while it replays it."""
        return self.runtime.error_for(TOPIC, self.partition_of(transactional_id))

    def is_coordinator_for(self, transactional_id: str) -> bool:
        """The id's partition is led here, loaded or loading: what FindCoordinator answers."""
        return self.coordinator_error(transactional_id) != E.not_coordinator

    @property
    def owned(self) -> set[int]:
        return self.runtime.owned(TOPIC)

    async def on_become_leader(self, partition: int, epoch: int) -> bool:
        """Leadership of a `__transaction_state` partition moved here: load it, then finish
        its half-ended transactions."""
        return await self.runtime.on_become_leader(TOPIC, partition, epoch)

    async def on_resign(self, partition: int, epoch: int | None = None) -> bool:
        """Leadership moved away: forget the partition's transactional ids."""
        return await self.runtime.on_resign(TOPIC, partition, epoch)

    def unload_partition(self, partition: int) -> None:
        gone = [t for t in self.txns if self.partition_of(t) == partition]
        # the partition's next coordinator finds these in PrepareCommit/PrepareAbort and
        # sends their markers itself (Kafka's removeMarkersForTxnTopicPartition)
        self.markers.cancel(gone)
        for tid in gone:
            del self.txns[tid]
            self.uncommitted.drop(tid)
            self._completed(tid)
        self._epochs = None

    def partition_loaded(self, partition: int) -> None:
        self.recover(partition)
        for m in self.txns.values():
            if self.partition_of(m.transactional_id) == partition:
                self._arm_timeout(m)

    def start(self) -> None:
        """Arm the transaction deadlines; and every
        transaction.abort.timed.out.transaction.cleanup.interval.ms retry completions that
        failed, expire idle transactional ids, and abort any timed-out transaction the
        deadline timer has not (a backstop)."""
        self.deadlines.start()
        for m in self.txns.values():
            self._arm_timeout(m)
        self.runtime.scheduler.every(TIMEOUT_JOB,
                                     max(0.05, self.config.abort_check_interval_ms / 1000),
                                     self._sweep)
        self.runtime.scheduler.start()

    async def stop(self) -> None:
        self.runtime.scheduler.cancel_job(TIMEOUT_JOB)
        self.deadlines.stop()
        await self.markers.stop()

    def _sweep(self) -> None:
        self.abort_timed_out()
        self.expire_ids()

    def _deadline_timer(self, delay_s: float, fire: Callable[[], None]) -> Any:
        return self.runtime.scheduler.call_later(DEADLINE_KEY, delay_s, fire)

    def _arm_timeout(self, m: TxnMetadata) -> None:
        # Kafka aborts once `start + timeout < now`: the first whole ms past it
        if m.state == S.ONGOING and m.start_ms >= 0:
            self.deadlines.add(m.transactional_id, m.start_ms + m.timeout_ms + 1)

    def _expire_due(self, tids: list[Any], now: float) -> None:
        """The deadline timer's work: abort the due transactions still Ongoing and past
        their timeout; one that ended and began again is armed for its new deadline."""
        for tid in tids:
            m = self.txns.get(tid)
            if m is None or m.state != S.ONGOING or m.start_ms < 0:
                continue
            if self.coordinator_error(tid) != E.none:
                continue  # unloaded or loading: its next coordinator arms it
            if tid in self.uncommitted:
                # a change of it is being written: look again once that is settled
                self.deadlines.add(tid, now_ms() + UNCOMMITTED_RECHECK_MS)
                continue
            if now - m.start_ms > m.timeout_ms:
                self._abort_timed_out(m)
            else:
                self._arm_timeout(m)

    def generate_producer_id(self) -> int:
        """A fresh producer id (idempotent producers get one with epoch 0)."""
        return self.producer_ids.generate()

    # ------------------------------------------------------------------ storage

    def _coordinator_epoch(self, transactional_id: str) -> int:
        part = self.rm.get(TOPIC, self.partition_of(transactional_id))
        return int(part.leader_epoch) if part is not None else 0

    def _persist(self, m: TxnMetadata, previous: dict[str, Any] | None,
                 then: Callable[[], None] | None = None) -> ErrorCode:
        """Write `m` as it stands now; `then()` once the record is committed (the HW passed
        it: at once on an unreplicated partition). `previous` is the state before the change,
        what `m` goes back to if the write is lost. On an error nothing was written and the
        caller puts `m` back itself."""
        written_before, m.last_update_ms = m.last_update_ms, now_ms()
        value = None if m.state == S.DEAD else encode_value(m)
        r = self.runtime.append(TOPIC, self.partition_of(m.transactional_id),
                                [(encode_key(m.transactional_id), value)], m.last_update_ms)
        if r.error != E.none:
            log.warning("writing transaction %r to %s failed: %s", m.transactional_id, TOPIC,
                        ErrorCode(r.error).name.upper())
            m.last_update_ms = written_before
            # Kafka's TransactionStateManager: leadership or storage lost -> NOT_COORDINATOR,
            # anything else (min.insync.replicas, timeouts) -> COORDINATOR_NOT_AVAILABLE
            if r.error in (E.not_leader_or_follower, E.kafka_storage_error):
                return E.not_coordinator
            return E.coordinator_not_available
        self.uncommitted.track(m, previous, int(r.last_offset) + 1, then)
        return E.none

    async def committed(self, tid: str) -> ErrorCode:
        """NONE once the id's last state record is committed (the broker's KIP-890 check
        waits for it), else NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE."""
        return await self.uncommitted.committed(tid)

    def _lost(self, tid: str, previous: Snapshot | None) -> None:
        """The id's state records were lost with the leadership: the committed state stands."""
        m = self.txns.get(tid)
        if m is not None:
            if previous is None:
                del self.txns[tid]
            else:
                restore(m, previous)
            self._epochs = None

    def load(self, partitions: Iterable[int] | None = None) -> int:
        """Replay `__transaction_state` partitions (default: every one this node leads),
        owned afterwards; returns records read. Blocking: at start, before serving."""
        ps = self.runtime.led_partitions(TOPIC) if partitions is None else set(partitions)
        return int(self.runtime.load(TOPIC, ps))

    def replay_partition(self, partition: int) -> int:
        count = 0
        for tid, value in self._replay(partition):
            count += 1
            if value is None:
                self.txns.pop(tid, None)
            else:
                self.txns[tid] = value
        self._epochs = None
        for m in list(self.txns.values()):
            if m.state == S.ONGOING and self.partition_of(m.transactional_id) == partition:
                for tp in m.partitions:
                    self._verify(tp, m.producer_id, m.producer_epoch)
        return count

    def _replay(self, partition: int) -> Iterator[tuple[str, TxnMetadata | None]]:
        for header, view in self.runtime.replay(TOPIC, partition):
            if header.is_control:
                continue
            for rec in decode_records(header, view):
                if rec.key is None:
                    continue
                try:
                    tid = decode_key(rec.key)
                    if tid is None:
                        continue
                    yield tid, None if rec.value is None else decode_value(tid, rec.value)
                except (ProtocolError, ValueError) as exc:
                    log.warning("skipping unreadable %s record at offset %d: %s", TOPIC,
                                rec.offset, exc)

    def load_offsets(self) -> int:
        """Transactional offsets in `__consumer_offsets` are the group coordinator's business:
        its replay applies them at their commit marker and keeps those of open transactions
        pending, where this coordinator's markers complete them. Kept for callers; returns
        how many offsets wait for an open transaction."""
        return 0 if self.groups is None else int(self.groups.pending_txn_offsets())

    def recover(self, partition: int | None = None) -> None:
        """After load: finish the transactions a crash left half-ended (of one partition, or
        of every one)."""
        for m in list(self.txns.values()):
            if partition is not None and self.partition_of(m.transactional_id) != partition:
                continue
            if m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                self._complete(m, m.state == S.PREPARE_COMMIT)

    # ------------------------------------------------------------ verification

    def _verify(self, tp: tuple[str, int], producer_id: int, epoch: int) -> None:
        # KIP-890: a partition takes transactional data only from a producer whose
        # coordinator added it to the transaction (committed). Only its leader keeps that;
        # a follower asks when it leads
        part = self.rm.get(*tp)
        if part is not None and part.is_leader:
            part.log.producer_state.mark_verified(producer_id, epoch)

    # ------------------------------------------------------------------- apis

    def init_producer_id(self, tid: str, timeout_ms: int, producer_id: int = -1,
                         producer_epoch: int = -1) -> InitResult:
        if not tid:
            return InitResult(E.invalid_request)
        if (cerr := self.coordinator_error(tid)) != E.none:
            return InitResult(cerr)
        if timeout_ms <= 0 or timeout_ms > self.config.max_timeout_ms:
            return InitResult(E.invalid_transaction_timeout)
        m = self.txns.get(tid)
        if m is None:
            m = TxnMetadata(tid, self.producer_ids.generate(), 0, timeout_ms)
            m.state = S.EMPTY
            self.txns[tid] = m
            err = self._persist(m, None)
            if err != E.none:
                del self.txns[tid]
                return InitResult(err)
            return InitResult(E.none, m.producer_id, m.producer_epoch)
        if tid in self.uncommitted:
            return InitResult(E.concurrent_transactions)
        if producer_id >= 0:
            # KIP-360: the producer presents what it had; it must be the current one
            known = (m.producer_id, m.producer_epoch) == (producer_id, producer_epoch) or (
                m.last_producer_id == producer_id and m.last_producer_epoch == producer_epoch)
            if m.producer_id != producer_id and m.last_producer_id != producer_id:
                return InitResult(E.invalid_producer_id_mapping)
            if not known:
                return InitResult(E.producer_fenced)
        if m.state == S.ONGOING:
            # a new instance with this id fences the old one: its transaction is aborted, and
            # the new instance asks again once the abort is complete (Kafka answers
            # CONCURRENT_TRANSACTIONS meanwhile)
            err = self._abort_with_bump(m)
            if err != E.none:
                return InitResult(err)
        elif m.state in _PREPARED and self.markers.pending(tid) is None:
            self._complete(m, m.state == S.PREPARE_COMMIT)  # nothing in flight: send again
        if m.state in _PREPARED:
            return InitResult(E.concurrent_transactions)
        previous = snapshot(m)
        m.last_producer_id, m.last_producer_epoch = m.producer_id, m.producer_epoch
        if m.producer_epoch >= MAX_EPOCH - 1:
            m.producer_id, m.producer_epoch = self.producer_ids.generate(), 0
        else:
            m.producer_epoch += 1
        m.timeout_ms = timeout_ms
        m.state = S.EMPTY
        m.partitions = set()
        m.ended_by_v2 = False
        self._epochs = None
        err = self._persist(m, previous)
        if err != E.none:
            restore(m, previous)
            return InitResult(err)
        return InitResult(E.none, m.producer_id, m.producer_epoch)

    def _check(self, tid: str, producer_id: int, epoch: int) -> tuple[ErrorCode, TxnMetadata | None]:
        if (cerr := self.coordinator_error(tid)) != E.none:
            return cerr, None
        m = self.txns.get(tid)
        if m is None or m.producer_id != producer_id:
            return E.invalid_producer_id_mapping, None
        if m.producer_epoch != epoch:
            return E.producer_fenced, None
        if m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE):
            return E.concurrent_transactions, None
        # a change may go on top of an uncommitted one (CompleteCommit, most often): it is
        # acted on once both are committed
        return E.none, m

    def add_partitions(self, tid: str, producer_id: int, epoch: int,
                       partitions: list[tuple[str, int]], verify_only: bool = False
                       ) -> dict[tuple[str, int], ErrorCode]:
        err, m = self._check(tid, producer_id, epoch)
        if err != E.none or m is None:
            return dict.fromkeys(partitions, err)
        if verify_only:
            state, added = self.uncommitted.committed_view(m)
            if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE):
                return dict.fromkeys(partitions, E.concurrent_transactions)
            return {tp: E.none if (state == S.ONGOING and tp in added)
                    else E.invalid_txn_state for tp in partitions}
        unknown = [tp for tp in partitions if not self.partition_exists(*tp)]
        if unknown:
            return {tp: E.unknown_topic_or_partition if tp in unknown else E.operation_not_attempted
                    for tp in partitions}
        new = set(partitions) - m.partitions
        if new or m.state != S.ONGOING:
            previous = snapshot(m)
            if m.state != S.ONGOING:
                m.start_ms = now_ms()
                m.partitions = set()
            m.partitions |= new
            m.state = S.ONGOING
            # the partitions are in the transaction once the record is committed: only then
            # may their leaders take its batches (a write lost with the leadership must not
            # leave data in a partition its coordinator never knew of)
            err = self._persist(m, previous, lambda: self._verify_all(m, partitions))
            if err != E.none:
                restore(m, previous)  # the partitions are not in the transaction
                return dict.fromkeys(partitions, err)
            self._arm_timeout(m)
        else:
            # in the transaction already, maybe by a record not committed yet (a retry of an
            # addition whose answer was lost): verified once that is committed
            self.uncommitted.after_committed(tid, lambda: self._verify_all(m, partitions))
        return dict.fromkeys(partitions, E.none)

    def _verify_all(self, m: TxnMetadata, partitions: list[tuple[str, int]]) -> None:
        for tp in partitions:
            self._verify(tp, m.producer_id, m.producer_epoch)

    def end_txn(self, tid: str, producer_id: int, epoch: int, commit: bool) -> ErrorCode:
        if (cerr := self.coordinator_error(tid)) != E.none:
            return cerr
        m = self.txns.get(tid)
        if m is None or m.producer_id != producer_id:
            return E.invalid_producer_id_mapping
        if m.producer_epoch != epoch:
            return E.producer_fenced
        if tid in self.uncommitted:
            return E.concurrent_transactions
        if m.state == S.ONGOING:
            previous = snapshot(m)
            m.state = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
            m.ended_by_v2 = False
            # the markers go once PrepareCommit/PrepareAbort is committed (Kafka): a prepare
            # lost with the leadership must not have told any partition the outcome
            err = self._persist(m, previous, lambda: self._complete(m, commit))
            if err != E.none:
                restore(m, previous)
                return err
            self._answer_when_complete(m)
            return E.none
        # a retried EndTxn of the transaction that just ended gets its answer again
        if (m.state == S.COMPLETE_COMMIT and commit) or (m.state == S.COMPLETE_ABORT and not commit):
            return E.none
        # ... or, while its markers are being written, is told to wait (Kafka)
        if (m.state == S.PREPARE_COMMIT and commit) or (m.state == S.PREPARE_ABORT and not commit):
            return E.concurrent_transactions
        return E.invalid_txn_state

    def end_txn_v2(self, tid: str, producer_id: int, epoch: int, commit: bool) -> InitResult:
        """EndTxn v5+ (KIP-890 part 2, transaction version 2): the coordinator bumps the
        producer epoch as it ends every transaction and answers with the new producer id and
        epoch. The markers carry the bumped epoch, so anything the producer sent in the
        transaction that arrives late (a produce, a retried EndTxn once the next transaction
        runs) is fenced instead of joining the next transaction."""
        if (cerr := self.coordinator_error(tid)) != E.none:
            return InitResult(cerr)
        m = self.txns.get(tid)
        if m is None:
            return InitResult(E.invalid_producer_id_mapping)
        if tid in self.uncommitted:
            return InitResult(E.concurrent_transactions)
        retry = (m.ended_by_v2 and (producer_id, epoch) == (m.last_producer_id, m.last_producer_epoch)
                 and m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.COMPLETE_COMMIT,
                                 S.COMPLETE_ABORT))
        if retry:
            # the answer to an EndTxn that already ended this transaction was lost: give it
            # again; a retry asking for the other outcome is refused
            committed = m.state in (S.PREPARE_COMMIT, S.COMPLETE_COMMIT)
            if committed != commit:
                return InitResult(E.invalid_txn_state)
            return InitResult(E.none, m.producer_id, m.producer_epoch)
        if m.producer_id != producer_id:
            return InitResult(E.invalid_producer_id_mapping)
        if m.producer_epoch != epoch:
            return InitResult(E.producer_fenced)
        if m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE):
            return InitResult(E.concurrent_transactions)
        if m.state != S.ONGOING and commit:
            return InitResult(E.invalid_txn_state)
        # ONGOING, or an abort with no transaction open (a v2 client aborts when it cannot
        # know whether its produce added a partition): end it with the epoch bumped
        previous = snapshot(m)
        m.last_producer_id, m.last_producer_epoch = m.producer_id, m.producer_epoch
        m.producer_epoch += 1
        m.ended_by_v2 = True
        if m.state == S.ONGOING:
            m.state = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
            # the markers carry the epoch of the record: the bumped one
            marker = (m.producer_id, m.producer_epoch)
            err = self._persist(m, previous, lambda: self._complete(m, commit, marker))
            if err == E.none:
                self._answer_when_complete(m)
        else:
            m.state = S.COMPLETE_ABORT
            m.partitions = set()
            err = self._persist(m, previous)
        if err != E.none:
            restore(m, previous)
            return InitResult(err)
        if m.producer_epoch >= MAX_EPOCH:
            # the epoch is spent: the producer goes on with a fresh producer id
            m.producer_id, m.producer_epoch = self.producer_ids.generate(), 0
            self._epochs = None
            self._persist(m, previous)
        return InitResult(E.none, m.producer_id, m.producer_epoch)

    # ------------------------------------------------------------ two phases

    def _complete(self, m: TxnMetadata, commit: bool,
                  producer: tuple[int, int] | None = None) -> None:
        """The transaction is in PrepareCommit/PrepareAbort (committed): send its markers
        (with `producer`'s id and epoch, default the current); it completes in
        `_markers_written` (at once when every partition is led here alone)."""
        if self.txns.get(m.transactional_id) is not m:
            return  # unloaded meanwhile: the next coordinator finishes it
        pid, epoch = (m.producer_id, m.producer_epoch) if producer is None else producer
        self.markers.send(PendingMarkers(
            m.transactional_id, pid, epoch, commit,
            self._coordinator_epoch(m.transactional_id), set(m.partitions)))

    def _marker_written(self, tp: tuple[str, int], producer_id: int, commit: bool) -> None:
        # a marker this node appended (it leads the partition) is in the ISR: in
        # __consumer_offsets, the transaction's offsets take effect (commit) or go
        if tp[0] == OFFSETS_TOPIC and self.groups is not None:
            self.groups.complete_txn_offsets(producer_id, commit)

    def _markers_written(self, entry: PendingMarkers) -> None:
        """Every marker of the transaction is written: CompleteCommit/CompleteAbort, unless
        this node stopped coordinating it meanwhile (then the new coordinator does it)."""
        tid = entry.transactional_id
        if (self.coordinator_error(tid) != E.none
                or self._coordinator_epoch(tid) != entry.coordinator_epoch):
            return
        m = self.txns.get(tid)
        wanted = S.PREPARE_COMMIT if entry.commit else S.PREPARE_ABORT
        if m is None or m.state != wanted:
            return
        if tid in self.uncommitted:
            return
        previous = snapshot(m)
        m.state = S.COMPLETE_COMMIT if entry.commit else S.COMPLETE_ABORT
        m.partitions = set()
        if self._persist(m, previous, lambda: self._completed(tid)) != E.none:
            # Kafka retries the completion while it still coordinates the transaction
            restore(m, previous)
            try:
                self.runtime.scheduler.call_later((TOPIC, self.partition_of(tid)),
                                                  COMPLETE_RETRY_S, self._markers_written, entry)
            except RuntimeError:  # no loop (a blocking start-up step): the sweep retries
                pass

    def _answer_when_complete(self, m: TxnMetadata) -> None:
        """EndTxn's answer (the decision is committed) waits, a bounded while, for the
        transaction to complete: its markers written and CompleteCommit/CompleteAbort
        committed. Kafka answers at the decision and the client's next transaction then
        meets CONCURRENT_TRANSACTIONS and retries (librdkafka: 20 ms for AddPartitionsToTxn,
        100 ms for AddOffsetsToTxn); answering at completion saves those retries."""
        tid = m.transactional_id
        if m.state not in _PREPARED and tid not in self.uncommitted:
            return  # complete already (every partition led here alone)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        done = self._completions.get(tid)
        if done is None or done.done():
            done = self._completions[tid] = loop.create_future()
        self.runtime.note_soon(done)

    def _completed(self, tid: str) -> None:
        done = self._completions.pop(tid, None)
        if done is not None and not done.done():
            done.set_result(None)

    def _abort_with_bump(self, m: TxnMetadata) -> ErrorCode:
        """Fence the current producer and abort its transaction (timeout, or a new
        instance): the markers carry the bumped epoch so late writes of the old one fail."""
        previous = snapshot(m)
        m.ended_by_v2 = False  # the fenced producer's EndTxn is no retry to be answered
        if m.producer_epoch < MAX_EPOCH - 1:
            m.last_producer_id, m.last_producer_epoch = m.producer_id, m.producer_epoch
            m.producer_epoch += 1
        m.state = S.PREPARE_ABORT
        err = self._persist(m, previous, lambda: self._complete(m, False))
        if err != E.none:
            restore(m, previous)
            return err
        self._epochs = None
        return E.none

    def abort_timed_out(self, now: int | None = None) -> int:
        now = now_ms() if now is None else now
        n = 0
        for m in list(self.txns.values()):
            if m.transactional_id in self.uncommitted:
                continue  # its committed state acts, or its loss puts it back
            if (m.state in _PREPARED and self.markers.pending(m.transactional_id) is None
                    and self.coordinator_error(m.transactional_id) == E.none):
                self._complete(m, m.state == S.PREPARE_COMMIT)  # a completion that failed
            if m.state == S.ONGOING and m.start_ms >= 0 and now - m.start_ms > m.timeout_ms:
                self._abort_timed_out(m)
                n += 1
        return n

    def _abort_timed_out(self, m: TxnMetadata) -> None:
        log.info("aborting transaction %r (producer %d): transaction.timeout.ms %d passed",
                 m.transactional_id, m.producer_id, m.timeout_ms)
        if self._abort_with_bump(m) != E.none:
            # the PrepareAbort write failed: the cleanup sweep tries again
            log.warning("aborting timed-out transaction %r failed; retried by the sweep",
                        m.transactional_id)

    def expire_ids(self, now: int | None = None) -> int:
        now = now_ms() if now is None else now
        gone = [m for m in self.txns.values()
                if m.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
                and now - m.last_update_ms > self.config.id_expiration_ms
                and m.transactional_id not in self.uncommitted]
        for m in gone:
            previous = snapshot(m)
            m.state = S.DEAD
            if self._persist(m, previous, lambda m=m: self._forget(m)) != E.none:  # type: ignore[misc]
                restore(m, previous)
        return len(gone)

    def _forget(self, m: TxnMetadata) -> None:
        if self.txns.get(m.transactional_id) is m:
            del self.txns[m.transactional_id]
            self._epochs = None

    def epoch_of(self, producer_id: int) -> int | None:
        """The current epoch of a transactional producer id, None when unknown here."""
        epochs = self._epochs
        if epochs is None or len(epochs) != len(self.txns):
            epochs = self._epochs = {m.producer_id: m for m in self.txns.values()}
        m = epochs.get(producer_id)
        if m is None or m.producer_id != producer_id:
            self._epochs = None
            m = next((t for t in self.txns.values() if t.producer_id == producer_id), None)
        return None if m is None else m.producer_epoch

    # ---------------------------------------------------------------- describe

    def describe(self, tid: str) -> tuple[ErrorCode, TxnMetadata | None]:
        """The transaction as last committed (an uncommitted change is not shown yet)."""
        if (cerr := self.coordinator_error(tid)) != E.none:
            return cerr, None
        m = self.txns.get(tid)
        shown = None if m is None else self.uncommitted.committed_metadata(m)
        return (E.transactional_id_not_found, None) if shown is None else (E.none, shown)

    def list(self, states: list[str] | None = None, producer_ids: list[int] | None = None
             ) -> list[TxnMetadata]:
        """The transactions as last committed."""
        out = []
        for m in self.txns.values():
            shown = self.uncommitted.committed_metadata(m)
            if shown is None:
                continue
            if states and shown.state.label not in states:
                continue
            if producer_ids and shown.producer_id not in producer_ids:
                continue
            out.append(shown)
        return out
