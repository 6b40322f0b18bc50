"""One partition this node hosts: its log, role (leader or follower), leader epoch, ISR and
high watermark (Kafka's cluster.Partition).

As leader it tracks each follower's log end offset from the follower's Fetch requests, moves
the high watermark to the smallest log end offset of the (maximal) ISR, and proposes ISR
shrinks and expansions through `alter_isr` (the AlterPartition round trip the ReplicaManager
runs). As follower it appends what the leader sent as it is (offsets and epochs kept) and takes
the high watermark from the leader.

The single-replica partition (replicas = [this node], the only kind a one-node cluster has) is
`solo`: every append moves the HW to the log end, as before there were followers. That path
costs one attribute test more than it did.
"""

from __future__ import annotations

import logging
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import validate_batches

log = logging.getLogger(__name__)

# A watcher is told (partition, bytes) when what a consumer may read grew: after an append on
# a solo partition, after a high-watermark advance on a replicated one (and after a role change,
# with 0 bytes, so a waiting produce can see it lost leadership). Delayed fetches and delayed
# produces use it to wake without polling.
Watcher = Callable[["Partition", int], None]
# alter_isr(partition, proposed ISR): start an AlterPartition round trip; its answer comes back
# through Partition.on_alter_result
AlterIsr = Callable[["Partition", tuple[int, ...]], None]

NO_REPLICA_ID = -1
DEFAULT_LAG_MAX_MS = 30_000  # replica.lag.time.max.ms


class ReplicaState:
    """The leader's view of one follower (Kafka's Replica / ReplicaState)."""

    __slots__ = ("broker_epoch", "last_caught_up_ms", "last_fetch_leader_leo", "last_fetch_ms",
                 "leo")

    def __init__(self, last_caught_up_ms: int) -> None:
        self.leo = -1  # unknown until its first fetch
        self.last_caught_up_ms = last_caught_up_ms
        self.last_fetch_ms = -1
        self.last_fetch_leader_leo = -1
        self.broker_epoch = -1


class Partition:
    __slots__ = ("_cum_at_hw", "_cum_bytes", "_follower_watchers", "_unreplicated",
                 "_watchers", "alter_isr", "bytes_in", "bytes_out", "failed_fetch",
                 "failed_produce", "fetch_requests", "high_watermark", "index", "isr",
                 "isr_eligible", "isr_expands", "isr_shrinks", "lag_max_ms", "leader",
                 "leader_epoch", "local_id", "log", "messages_in", "partition_epoch",
                 "pending_isr", "produce_requests", "replica_states", "replicas",
                 "replication_bytes_out", "solo", "topic", "topic_id")

    def __init__(self, topic: str, index: int, topic_id: uuid.UUID, log: Any, *, leader: int,
                 leader_epoch: int, replicas: list[int], isr: list[int],
                 local_id: int | None = None, partition_epoch: int = 0,
                 high_watermark: int | None = None) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.local_id = leader if local_id is None else local_id
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas = list(replicas)
        self.isr = list(isr)
        # the ISR proposed to the controller and not yet answered (None: nothing in flight)
        self.pending_isr: tuple[int, ...] | None = None
        self.alter_isr: AlterIsr | None = None
        # whether a broker may join the ISR (not fenced, not shutting down: the image's view)
        self.isr_eligible: Callable[[int], bool] | None = None
        self.lag_max_ms = DEFAULT_LAG_MAX_MS
        self.replica_states: dict[int, ReplicaState] = {}
        self.solo = self._is_solo()
        leo = log.log_end_offset
        if high_watermark is None:
            # a solo leader: everything in the log is committed
            high_watermark = leo if self.solo else 0
        self.high_watermark: int = min(max(high_watermark, 0), leo)
        self._watchers: set[Watcher] = set()
        # fetches of followers: woken by every append to a replicated leader
        self._follower_watchers: set[Watcher] = set()
        # bytes appended above the HW, to tell watchers how much an HW advance made readable:
        # (end offset, running byte count) per append
        self._unreplicated: deque[tuple[int, int]] = deque()
        self._cum_bytes = 0
        self._cum_at_hw = 0
        # metrics (Kafka's BrokerTopicMetrics and ReplicaManager meters): plain ints bumped
        # where the events happen, summed per topic by the node's collector at scrape time
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.replication_bytes_out = 0
        self.produce_requests = 0
        self.failed_produce = 0
        self.fetch_requests = 0
        self.failed_fetch = 0
        self.isr_shrinks = 0
        self.isr_expands = 0

    def _isr_changed(self, new: list[int]) -> None:
        old = self.isr
        if self.is_leader and set(new) != set(old):
            if len(new) < len(old):
                self.isr_shrinks += 1
            else:
                self.isr_expands += 1

    def _is_solo(self) -> bool:
        return self.leader == self.local_id and self.replicas == [self.local_id]

    # --- offsets ---------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.leader == self.local_id

    @property
    def log_end_offset(self) -> int:
        return int(self.log.log_end_offset)

    @property
    def log_start_offset(self) -> int:
        return int(self.log.log_start_offset)

    @property
    def min_isr(self) -> int:
        return int(self.log.config.min_insync_replicas)

    @property
    def maximal_isr(self) -> list[int]:
        """The ISR the HW waits for: the current one, plus the replicas of a proposed expansion
        (Kafka's maximalIsr: a follower counts from the moment it is proposed, so once the
        controller commits it, it holds every record below the HW)."""
        pending = self.pending_isr
        if pending is None:
            return self.isr
        return self.isr + [r for r in pending if r not in self.isr]

    @property
    def last_stable_offset(self) -> int:
        # below the HW and below the first offset of the oldest open transaction
        ongoing = self.log.producer_state.ongoing
        if ongoing:
            try:
                return min(self.high_watermark, *ongoing.values())
            except RuntimeError:  # changed under a reader on another thread (the cleaner)
                return min(self.high_watermark, self.log.log_start_offset)
        return self.high_watermark

    def aborted_transactions(self, start: int, end: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of aborted transactions overlapping [start, end)."""
        return self.log.producer_state.txn_index.collect(start, end)

    def leader_epoch_error(self, current_leader_epoch: int) -> ErrorCode | None:
        """A request's current_leader_epoch checked against ours (-1: not checked): older is
        FENCED_LEADER_EPOCH, newer (we have not heard of it yet) UNKNOWN_LEADER_EPOCH."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return None
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.fenced_leader_epoch
        return ErrorCode.unknown_leader_epoch

    def last_offset_for_leader_epoch(self, current_leader_epoch: int, leader_epoch: int
                                     ) -> tuple[ErrorCode, int, int]:
        """OffsetForLeaderEpoch on the leader: (error, the largest epoch <= `leader_epoch`,
        where it ends in our log) (KIP-101/279, asked by followers before they fetch)."""
        if not self.is_leader:
            return ErrorCode.not_leader_or_follower, -1, -1
        fenced = self.leader_epoch_error(current_leader_epoch)
        if fenced is not None:
            return fenced, -1, -1
        epoch, end = self.log.epochs.end_offset_for(leader_epoch)
        return ErrorCode.none, epoch, end

    # --- roles (from the metadata image) ------------------------------------

    def make_leader(self, leader_epoch: int, partition_epoch: int, replicas: list[int],
                    isr: list[int], now_ms: int) -> bool:
        """Become (or stay) leader as the image says; True when this is a new leader epoch.
        A new epoch is recorded in the leader-epoch cache at the log end, and the followers'
        states start afresh (Kafka: those in the ISR count as caught up now)."""
        new_epoch = not self.is_leader or leader_epoch != self.leader_epoch
        if not new_epoch and partition_epoch >= self.partition_epoch:
            self._isr_changed(isr)  # the controller changed our ISR (a fenced follower)
        self.leader = self.local_id
        self.replicas = list(replicas)
        if new_epoch or partition_epoch >= self.partition_epoch:
            self.isr = list(isr)
            self.partition_epoch = partition_epoch
            self.pending_isr = None
        if new_epoch:
            self.leader_epoch = leader_epoch
            # KIP-890: verifications asked in an earlier leadership are not this one's (the
            # markers of those transactions may have gone to another leader)
            self.log.producer_state.clear_verifications()
            if leader_epoch >= 0:
                self.log.epochs.assign(leader_epoch, self.log.log_end_offset)
            self.replica_states = {r: ReplicaState(now_ms if r in isr else -1)
                                   for r in replicas if r != self.local_id}
            self._reset_unreplicated()
        else:
            for r in replicas:
                if r != self.local_id and r not in self.replica_states:
                    self.replica_states[r] = ReplicaState(-1)
            for r in list(self.replica_states):
                if r not in replicas:
                    del self.replica_states[r]
        self.solo = self._is_solo()
        if self.solo:
            self.high_watermark = self.log.log_end_offset
        else:
            self.maybe_increment_hw()
        self._notify(0)
        return new_epoch

    def make_follower(self, leader: int, leader_epoch: int, partition_epoch: int,
                      replicas: list[int], isr: list[int]) -> bool:
        """Follow `leader` as the image says; True when the leader or its epoch changed (the
        fetcher must truncate and start again). The HW stays: the leader will tell."""
        changed = self.is_leader or leader != self.leader or leader_epoch != self.leader_epoch
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas = list(replicas)
        self.isr = list(isr)
        self.pending_isr = None
        self.replica_states = {}
        self.solo = False
        self._reset_unreplicated()
        if changed:
            self.log.producer_state.clear_verifications()
            self._notify(0)  # a delayed produce learns it lost leadership
        return changed

    def update_isr(self, isr: list[int], partition_epoch: int) -> None:
        """The image's ISR for our leader epoch (a PartitionChangeRecord): the truth, unless an
        older partition epoch than what we hold."""
        if partition_epoch < self.partition_epoch:
            return
        self._isr_changed(isr)
        self.isr = list(isr)
        self.partition_epoch = partition_epoch
        self.pending_isr = None
        if self.is_leader and not self.solo:
            self.maybe_increment_hw()

    # --- leader: followers, ISR and HW ------------------------------------

    def update_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int,
                              broker_epoch: int = -1) -> ErrorCode | None:
        """A follower fetched at `fetch_offset` (so its log ends there): record it, expand the
        ISR if it caught up, move the HW. An error when this node does not lead the partition
        or the replica is not one of its replicas."""
        if not self.is_leader:
            return ErrorCode.not_leader_or_follower
        state = self.replica_states.get(replica_id)
        if state is None:
            return ErrorCode.not_leader_or_follower
        leader_leo = self.log.log_end_offset
        # Kafka's rule: caught up now if it reached our log end; else caught up as of its
        # previous fetch if it reached the log end we had then
        if fetch_offset >= leader_leo:
            state.last_caught_up_ms = now_ms
        elif fetch_offset >= state.last_fetch_leader_leo >= 0:
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        state.leo = fetch_offset
        state.last_fetch_ms = now_ms
        state.last_fetch_leader_leo = leader_leo
        if broker_epoch >= 0:
            state.broker_epoch = broker_epoch
        if replica_id not in self.isr:
            self._maybe_expand_isr(replica_id, state)
        self.maybe_increment_hw()
        return None

    def _maybe_expand_isr(self, replica_id: int, state: ReplicaState) -> None:
        if self.pending_isr is not None or self.alter_isr is None:
            return
        if self.isr_eligible is not None and not self.isr_eligible(replica_id):
            return
        epoch_start = self.log.epochs.start_offset_of(self.leader_epoch)
        if state.leo >= self.high_watermark and (epoch_start is None or state.leo >= epoch_start):
            self._propose((*self.isr, replica_id))

    def out_of_sync_replicas(self, now_ms: int) -> list[int]:
        """ISR followers that have not caught up to our log end within replica.lag.time.max.ms."""
        leo = self.log.log_end_offset
        out = []
        for r in self.isr:
            if r == self.local_id:
                continue
            state = self.replica_states.get(r)
            if state is None or (state.leo != leo and now_ms - state.last_caught_up_ms > self.lag_max_ms):
                out.append(r)
        return out

    def maybe_shrink_isr(self, now_ms: int) -> bool:
        """Propose an ISR without the lagging followers; True when a proposal went out."""
        if not self.is_leader or self.solo or self.pending_isr is not None or self.alter_isr is None:
            return False
        out = self.out_of_sync_replicas(now_ms)
        if not out:
            return False
        self._propose(tuple(r for r in self.isr if r not in out))
        return True

    def _propose(self, isr: tuple[int, ...]) -> None:
        self.pending_isr = isr
        assert self.alter_isr is not None
        self.alter_isr(self, isr)

    def on_alter_result(self, error: ErrorCode, leader_epoch: int = -1,
                        partition_epoch: int = -1, isr: list[int] | None = None) -> bool:
        """The controller's answer to our proposal. Adopted only when it is for our leader epoch
        and newer than the partition epoch we hold (else the image has moved on: dropped). An
        error clears the proposal; the next fetch or lag check proposes again."""
        if self.pending_isr is None:
            return False
        if error != ErrorCode.none:
            self.pending_isr = None
            return False
        if (not self.is_leader or leader_epoch != self.leader_epoch
                or partition_epoch <= self.partition_epoch or isr is None):
            if partition_epoch <= self.partition_epoch:
                self.pending_isr = None
            return False
        self._isr_changed(isr)
        self.isr = list(isr)
        self.partition_epoch = partition_epoch
        self.pending_isr = None
        self.maybe_increment_hw()
        return True

    def maybe_increment_hw(self) -> bool:
        """HW = the smallest log end offset of the maximal ISR; never back, and not at all while
        the ISR is below min.insync.replicas (KIP-966)."""
        if not self.is_leader:
            return False
        leo = self.log.log_end_offset
        if self.solo:
            new = leo
        else:
            if len(self.isr) < self.min_isr:
                return False
            new = leo
            states = self.replica_states
            for r in self.maximal_isr:
                if r == self.local_id:
                    continue
                state = states.get(r)
                follower_leo = state.leo if state is not None else -1
                if follower_leo < new:
                    new = follower_leo
        if new <= self.high_watermark:
            return False
        self.high_watermark = new
        self._notify(self._bytes_below(new))
        return True

    def _bytes_below(self, hw: int) -> int:
        q = self._unreplicated
        cum = self._cum_at_hw
        while q and q[0][0] <= hw:
            cum = q.popleft()[1]
        made = cum - self._cum_at_hw
        self._cum_at_hw = cum
        return made

    def _reset_unreplicated(self) -> None:
        self._unreplicated.clear()
        self._cum_at_hw = self._cum_bytes

    def _notify(self, size: int) -> None:
        if self._watchers:
            for watcher in tuple(self._watchers):
                watcher(self, size)

    # --- produce ---------------------------------------------------------

    def check_acks(self, acks: int) -> None:
        if acks == -1:
            min_isr = self.log.config.min_insync_replicas
            if len(self.isr) < min_isr:
                raise KafkaError(ErrorCode.not_enough_replicas,
                                 f"{len(self.isr)} in-sync replicas, min.insync.replicas is "
                                 f"{min_isr}")

    def append_records_to_leader(self, batch: memoryview, header: Any,
                                 log_append_time_ms: int | None) -> Any:
        """Append one validated client batch as leader, after the producer-state check; returns
        the storage AppendInfo (for a retried idempotent batch, the offsets it was first given,
        and nothing appended)."""
        if header.producer_id < 0:  # no producer state to check: one call less
            info = self.log.append(batch, header, self.leader_epoch, log_append_time_ms)
        else:
            info = self.log.append_as_leader(batch, header, self.leader_epoch,
                                             log_append_time_ms)
            if info.duplicate:
                return info
        if self.solo:
            # the produce hot path: _appended inline
            self.high_watermark = self.log.log_end_offset
            if self._watchers:
                size = len(batch)
                for watcher in tuple(self._watchers):
                    watcher(self, size)
        else:
            self._appended_replicated(len(batch))
        return info

    def append(self, batch: memoryview, header: Any, log_append_time_ms: int | None) -> Any:
        """Append one batch of the node's own (a coordinator's record or transaction marker):
        no client checks. Returns the storage AppendInfo."""
        if not self.is_leader:
            raise KafkaError(ErrorCode.not_leader_or_follower,
                             f"{self.topic}-{self.index} is led by {self.leader}")
        info = self.log.append(batch, header, self.leader_epoch, log_append_time_ms)
        self._appended(len(batch))
        return info

    def _appended(self, size: int) -> None:
        if self.solo:
            self.high_watermark = self.log.log_end_offset
            self._notify(size)
        else:
            self._appended_replicated(size)

    def _appended_replicated(self, size: int) -> None:
        self._cum_bytes += size
        self._unreplicated.append((self.log.log_end_offset, self._cum_bytes))
        if self._follower_watchers:
            for watcher in tuple(self._follower_watchers):
                watcher(self, size)
        self.maybe_increment_hw()  # an ISR of just us (min.insync.replicas=1) commits at once

    # --- follower --------------------------------------------------------

    def append_as_follower(self, records: bytes | memoryview) -> int:
        """Append the leader's batches as they are (offsets, epochs, producer state kept);
        batches already here (a resent fetch) are skipped. Returns the bytes appended."""
        view = memoryview(records)
        batches = validate_batches(view, check_crc=True, from_client=False)
        leo = self.log.log_end_offset
        todo = []
        pos = 0
        for h in batches:
            size = h.batch_length + 12
            if h.base_offset + h.last_offset_delta >= leo:
                todo.append((view[pos:pos + size], h))
            pos += size
        if not todo:
            return 0
        if todo[0][1].base_offset < leo:
            raise KafkaError(ErrorCode.corrupt_message,
                             f"a fetched batch at {todo[0][1].base_offset} straddles our log "
                             f"end {leo} in {self.topic}-{self.index}")
        self.log.append_many(todo, assign_offsets=False)
        return sum(len(b) for b, _ in todo)

    def update_follower_hw(self, leader_hw: int) -> bool:
        """The leader's HW, bounded by our log end; never back."""
        new = min(leader_hw, self.log.log_end_offset)
        if new <= self.high_watermark:
            return False
        self.high_watermark = new
        self._notify(0)
        return True

    def truncate_to(self, offset: int) -> None:
        """Cut the log at `offset` (a divergent tail); the HW follows it down if above."""
        end = self.log.log_end_offset
        if offset < end:
            # records are dropped: say so, as Kafka does, so an operator can see the divergence
            log.info("truncating %s-%d from log end %d to offset %d (leader epoch %d)",
                     self.topic, self.index, end, offset, self.leader_epoch)
        self.log.truncate_to(offset)
        leo = self.log.log_end_offset
        if self.high_watermark > leo:
            self.high_watermark = leo
        self._reset_unreplicated()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """The leader's log starts above our end: start afresh at its start."""
        self.log.truncate_fully_and_start_at(offset)
        self.high_watermark = offset
        self._reset_unreplicated()

    # --- delayed operations ------------------------------------------------

    def add_watcher(self, watcher: Watcher, log_end: bool = False) -> None:
        """`log_end`: a follower's fetch, woken by every append rather than by the HW."""
        (self._follower_watchers if log_end else self._watchers).add(watcher)

    def remove_watcher(self, watcher: Watcher) -> None:
        self._watchers.discard(watcher)
        self._follower_watchers.discard(watcher)

    def refresh_high_watermark(self) -> None:
        """After the log moved under us (truncation, recovery): a solo leader's HW is its log
        end; a replicated partition's HW is bounded by it."""
        leo = self.log.log_end_offset
        if self.solo or self.high_watermark > leo:
            self.high_watermark = leo
