"""The transaction markers still to be written, as a state machine without I/O (the bookkeeping
of Kafka's TransactionMarkerChannelManager and its TransactionMarkerRequestCompletionHandler).

A transaction in PrepareCommit/PrepareAbort has one `PendingMarkers`: the partitions whose
leader has not yet acknowledged its marker. `plan(leader_of)` groups the partitions not in
flight by their current leader (one request per broker) and marks them in flight; the
answers come back through `on_result` / `on_failed`; `completed()` hands over the
transactions whose every marker is written, and the coordinator then writes
CompleteCommit/CompleteAbort. What to do with each per-partition error is a table:

- NONE: written.
- leadership or replication trouble (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
  NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR, a lost
  connection): sent again, to the leader the metadata names by then.
- INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED: a newer coordinator or producer
  epoch owns the transaction; this coordinator stops sending its markers and leaves the
  transaction to it.
- a partition the metadata no longer has (deleted): nothing left to mark.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from odradek.protocol.errors import ErrorCode

__all__ = ["FENCING", "RETRIABLE", "MarkerOutcome", "MarkerQueue", "PendingMarkers"]

log = logging.getLogger(__name__)

E = ErrorCode
TP = tuple[str, int]
# what leader_of answers for a partition whose leader is not known right now
NO_LEADER = -1

RETRIABLE = frozenset({E.not_leader_or_follower, E.unknown_topic_or_partition,
                       E.not_enough_replicas, E.not_enough_replicas_after_append,
                       E.request_timed_out, E.kafka_storage_error, E.leader_not_available,
                       E.fenced_leader_epoch, E.unknown_leader_epoch})
FENCING = frozenset({E.invalid_producer_epoch, E.transaction_coordinator_fenced})


class MarkerOutcome:
    WRITTEN = "written"
    RETRY = "retry"
    FENCED = "fenced"
    IGNORED = "ignored"  # an answer for markers no longer wanted (cancelled, replaced)


@dataclass(eq=False)
class PendingMarkers:
    """The markers of one transaction: who, which result, and what is left."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    pending: set[TP]
    in_flight: set[TP] = field(default_factory=set)
    attempts: int = 0

    @property
    def done(self) -> bool:
        return not self.pending and not self.in_flight


LeaderOf = Callable[[TP], "int | None"]


class MarkerQueue:
    """Every transaction's markers still to write, keyed by transactional id."""

    def __init__(self) -> None:
        self.entries: dict[str, PendingMarkers] = {}
        self._done: list[PendingMarkers] = []

    def __len__(self) -> int:
        return len(self.entries)

    def add(self, entry: PendingMarkers) -> None:
        """Markers to send; they replace any still pending for the same transactional id
        (answers for the old ones are then ignored)."""
        self.entries[entry.transactional_id] = entry
        if entry.done:
            self._finish(entry)

    def get(self, transactional_id: str) -> PendingMarkers | None:
        return self.entries.get(transactional_id)

    def is_current(self, entry: PendingMarkers) -> bool:
        return self.entries.get(entry.transactional_id) is entry

    def cancel(self, transactional_ids: Iterable[str]) -> int:
        """Stop sending the markers of these transactions (their coordinator partition was
        unloaded: the next coordinator sends them)."""
        n = 0
        for tid in transactional_ids:
            if self.entries.pop(tid, None) is not None:
                n += 1
        return n

    def plan(self, leader_of: LeaderOf) -> dict[int, list[tuple[PendingMarkers, list[TP]]]]:
        """The partitions to send now, grouped by leader broker (in flight from here on).
        Partitions with no known leader wait; deleted ones are dropped."""
        by_broker: dict[int, list[tuple[PendingMarkers, list[TP]]]] = {}
        for entry in list(self.entries.values()):
            ready: dict[int, list[TP]] = {}
            for tp in sorted(entry.pending - entry.in_flight):
                leader = leader_of(tp)
                if leader is None:
                    log.info("transaction %r: %s-%d is gone, no marker to write",
                             entry.transactional_id, tp[0], tp[1])
                    entry.pending.discard(tp)
                elif leader >= 0:
                    ready.setdefault(leader, []).append(tp)
            for broker, tps in ready.items():
                entry.in_flight.update(tps)
                by_broker.setdefault(broker, []).append((entry, tps))
            if ready:
                entry.attempts += 1
            if entry.done:
                self._finish(entry)
        return by_broker

    def on_result(self, entry: PendingMarkers, tp: TP, error: ErrorCode) -> str:
        """One partition's answer."""
        entry.in_flight.discard(tp)
        if not self.is_current(entry):
            return MarkerOutcome.IGNORED
        if error == E.none:
            entry.pending.discard(tp)
            if entry.done:
                self._finish(entry)
            return MarkerOutcome.WRITTEN
        if error in FENCING:
            log.info("transaction %r: marker for %s-%d refused (%s); a newer coordinator or "
                     "producer epoch owns it, its markers are no longer sent here",
                     entry.transactional_id, tp[0], tp[1], ErrorCode(error).name.upper())
            del self.entries[entry.transactional_id]
            return MarkerOutcome.FENCED
        if error not in RETRIABLE:
            # Kafka treats these as a broken invariant; here they are logged and retried, so
            # the transaction is not left half-ended by one odd answer
            log.error("transaction %r: marker for %s-%d failed with %s; retrying",
                      entry.transactional_id, tp[0], tp[1], ErrorCode(error).name.upper())
        return MarkerOutcome.RETRY

    def on_failed(self, entry: PendingMarkers, tps: Iterable[TP]) -> None:
        """The request did not get an answer (connection lost, timeout): all go again."""
        entry.in_flight.difference_update(tps)

    def waiting(self) -> bool:
        """Some marker is neither written nor in flight: a retry is due."""
        return any(e.pending - e.in_flight for e in self.entries.values())

    def completed(self) -> list[PendingMarkers]:
        """The transactions whose every marker is written since the last call."""
        done, self._done = self._done, []
        return done

    def _finish(self, entry: PendingMarkers) -> None:
        if self.entries.get(entry.transactional_id) is entry:
            del self.entries[entry.transactional_id]
            self._done.append(entry)
