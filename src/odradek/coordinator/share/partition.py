"""One share-partition (KIP-932, Kafka's SharePartition), sans-I/O: which records of one
topic-partition a share group has in flight, and in what state.

The window runs from the share-partition start offset (SPSO, `start_offset`) to the
share-partition end offset (SPEO, `end_offset`, the last offset ever acquired; `start - 1`
while nothing is in flight). Below the SPSO every record is done (acknowledged or archived);
above the SPEO no record has been handed out yet. Inside the window each offset has a state:

    AVAILABLE ──acquire──> ACQUIRED ──accept──────────> ACKNOWLEDGED
        ^                     │      ──reject / gap────> ARCHIVED
        └──release / lock timeout (delivery count below the limit)
                              └──release / lock timeout at the limit──> ARCHIVED

Acquiring a record adds one to its delivery count and locks it to one member until
`now + lock_duration_ms`; a release or an expired lock of a record already delivered
`delivery_count_limit` times archives it instead of making it available again (Kafka's
`group.share.delivery.count.limit`). At most `max_record_locks` offsets are in the window
(Kafka's `group.share.partition.max.record.locks`). The SPSO moves past every leading offset
that is done, and the window forgets them.

Acknowledgements are validated whole before anything changes (Kafka rolls a failed
acknowledgement back): an offset not acquired by the member is INVALID_RECORD_STATE, an
offset past what was ever acquired is INVALID_REQUEST. Clocks are passed in (`now`, ms),
so every rule is a plain unit test.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum

from odradek.protocol.errors import ErrorCode

E = ErrorCode


class RecordState(IntEnum):
    """Kafka's RecordState ids, which are also the delivery states persisted in
    `__share_group_state` (ACQUIRED is never persisted: a lock does not outlive its node)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AckType(IntEnum):
    """The acknowledge types of ShareFetch/ShareAcknowledge (renew is Kafka 4.2, KIP-1222)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


DONE = frozenset({RecordState.ACKNOWLEDGED, RecordState.ARCHIVED})


@dataclass(slots=True)
class InFlight:
    state: RecordState
    delivery_count: int
    member_id: str | None = None
    lock_deadline: float | None = None  # ms, while ACQUIRED


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    """A run of acquired offsets with one delivery count (ShareFetch's AcquiredRecords)."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AckBatch:
    """One acknowledgement batch: `types` has one entry for the whole range or one per
    offset, as on the wire."""

    first_offset: int
    last_offset: int
    types: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class StateBatch:
    """A run of offsets with one persisted state and delivery count (WriteShareGroupState's
    StateBatch)."""

    first_offset: int
    last_offset: int
    state: RecordState
    delivery_count: int


class AckError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class SharePartition:
    def __init__(self, start_offset: int, *, delivery_count_limit: int = 5,
                 max_record_locks: int = 2000, lock_duration_ms: int = 30_000) -> None:
        if start_offset < 0:
            raise ValueError(f"start offset {start_offset} < 0")
        if delivery_count_limit < 1 or max_record_locks < 1 or lock_duration_ms < 1:
            raise ValueError("limits must be positive")
        self.start_offset = start_offset
        self.end_offset = start_offset - 1
        self.delivery_count_limit = delivery_count_limit
        self.max_record_locks = max_record_locks
        self.lock_duration_ms = lock_duration_ms
        self.records: dict[int, InFlight] = {}
        # (deadline, first, last) of every lock handed out, earliest first: the lock timer
        # and expire_locks look here instead of at every record
        self._locks: list[tuple[float, int, int]] = []
        # bumps on every change a persister must write (Kafka's state epoch is per leader; this
        # one tells the caller whether there is something new to write)
        self.version = 0

    # ------------------------------------------------------------------ views

    def in_flight_count(self) -> int:
        return self.end_offset - self.start_offset + 1

    def next_fetch_offset(self) -> int:
        """Where a fetch for this share-partition should read from: the first available
        record in the window, else past its end."""
        for offset in range(self.start_offset, self.end_offset + 1):
            if self.records[offset].state is RecordState.AVAILABLE:
                return offset
        return self.end_offset + 1

    def can_acquire(self) -> bool:
        """Kafka's canAcquireRecords: a released record can always be taken again; new ones
        only while the window holds fewer than `max_record_locks` offsets."""
        return (self.next_fetch_offset() <= self.end_offset
                or self.in_flight_count() < self.max_record_locks)

    def state_of(self, offset: int) -> RecordState | None:
        """The state of an offset; None past the window's end. Below the SPSO every record
        is done: reported as ARCHIVED or ACKNOWLEDGED is not known any more, so as ARCHIVED."""
        if offset < self.start_offset:
            return RecordState.ARCHIVED
        rec = self.records.get(offset)
        return rec.state if rec else None

    def next_lock_deadline(self) -> float | None:
        """The earliest acquisition lock deadline, from the heap of locks handed out
        (entries whose records were acknowledged, released or renewed since are dropped
        here, lazily)."""
        heap = self._locks
        while heap:
            deadline, first, last = heap[0]
            for offset in range(max(first, self.start_offset), last + 1):
                rec = self.records.get(offset)
                if rec is not None and rec.lock_deadline == deadline:
                    return deadline
            heapq.heappop(heap)
        return None

    # ------------------------------------------------------------------ acquire

    def acquire(self, member_id: str, fetched: Iterable[tuple[int, int] | tuple[int, int, bool]],
                max_records: int, now: float, *, record_limit: bool = False
                ) -> list[AcquiredRange]:
        """Acquire for `member_id` what it may take of the fetched batches (their (first,
        last) offsets, in order, as read from the log from `next_fetch_offset()`): released
        records in the window, then new records past its end. New batches are taken whole
        (a batch's range may include offsets compaction removed; the client acknowledges
        them as GAP), stopping once `max_records` are taken or the window is full. A batch
        given as (first, last, False) is not to be delivered (an aborted transaction's under
        read_committed): its records are archived as they enter the window. With
        `record_limit` (ShareFetch v2's record-limit acquire mode) `max_records` is strict:
        a new batch is cut at the limit."""
        taken: list[tuple[int, int, int]] = []  # (first, last, delivery count), in order
        deadline = now + self.lock_duration_ms
        changed = False
        n = 0  # records taken
        for item in fetched:
            if n >= max_records:
                break
            first, last = item[0], item[1]
            if len(item) > 2 and not item[2]:  # type: ignore[misc]
                changed |= self._archive_batch(first, last)
                continue
            first = max(first, self.start_offset)
            # released records inside the window: one by one, up to max_records
            for offset in range(first, min(last, self.end_offset) + 1):
                if n >= max_records:
                    break
                rec = self.records[offset]
                if rec.state is RecordState.AVAILABLE:
                    rec.state, rec.member_id, rec.lock_deadline = (
                        RecordState.ACQUIRED, member_id, deadline)
                    rec.delivery_count += 1
                    taken.append((offset, offset, rec.delivery_count))
                    n += 1
            # new records past the window's end: the whole batch, capped by the lock limit
            lo = max(first, self.end_offset + 1)
            hi = min(last, self.start_offset + self.max_record_locks - 1)
            if record_limit:
                hi = min(hi, lo + max_records - n - 1)
            if lo > hi or n >= max_records:
                continue
            if lo != self.end_offset + 1:  # the log skipped offsets: they are not records
                for offset in range(self.end_offset + 1, lo):
                    self.records[offset] = InFlight(RecordState.ARCHIVED, 0)
                self.end_offset = lo - 1
            records = self.records
            for offset in range(lo, hi + 1):
                records[offset] = InFlight(RecordState.ACQUIRED, 1, member_id, deadline)
            taken.append((lo, hi, 1))
            n += hi - lo + 1
            self.end_offset = hi
        if taken or changed:
            self.version += 1
        self._advance()
        ranges = _ranges(taken)
        for r in ranges:
            heapq.heappush(self._locks, (deadline, r.first_offset, r.last_offset))
        return ranges

    def _archive_batch(self, first: int, last: int) -> bool:
        """Archive a batch that is not to be delivered: its records in the window that are
        available, and its new records (while the window has room)."""
        changed = False
        for offset in range(max(first, self.start_offset), min(last, self.end_offset) + 1):
            rec = self.records[offset]
            if rec.state is RecordState.AVAILABLE:
                rec.state = RecordState.ARCHIVED
                changed = True
        lo = max(first, self.end_offset + 1)
        hi = min(last, self.start_offset + self.max_record_locks - 1)
        if hi < lo:
            return changed
        for offset in range(self.end_offset + 1, hi + 1):
            # offsets the log skipped before the batch, and the batch's own
            self.records[offset] = InFlight(RecordState.ARCHIVED, 0)
        self.end_offset = hi
        return True

    # ------------------------------------------------------------------ acknowledge

    def acknowledge(self, member_id: str, batches: Sequence[AckBatch], now: float,
                    *, renew_allowed: bool = True) -> None:
        """Apply a member's acknowledgements, all or nothing; raises AckError with Kafka's
        code (and changes nothing) when one of them is not valid."""
        plan: list[tuple[int, AckType]] = []
        for b in batches:
            plan.extend(self._validate(member_id, b, renew_allowed))
        for offset, ack in plan:
            rec = self.records[offset]
            if ack is AckType.RENEW:
                rec.lock_deadline = now + self.lock_duration_ms
                heapq.heappush(self._locks, (rec.lock_deadline, offset, offset))
                continue
            if ack is AckType.ACCEPT:
                rec.state = RecordState.ACKNOWLEDGED
            elif ack is AckType.RELEASE:
                rec.state = self._released_state(rec)
            else:  # REJECT, GAP
                rec.state = RecordState.ARCHIVED
            rec.member_id = rec.lock_deadline = None
        if plan:
            self.version += 1
        self._advance()

    def _validate(self, member_id: str, b: AckBatch,
                  renew_allowed: bool) -> list[tuple[int, AckType]]:
        first, last = b.first_offset, b.last_offset
        if first < 0 or last < first:
            raise AckError(E.invalid_request, f"bad acknowledgement range {first}-{last}")
        width = last - first + 1
        if len(b.types) not in (1, width):
            raise AckError(E.invalid_request,
                           f"{len(b.types)} acknowledge types for {width} offsets")
        kinds = []
        for t in b.types:
            if t not in AckType._value2member_map_ or (t == AckType.RENEW and not renew_allowed):
                raise AckError(E.invalid_request, f"invalid acknowledge type {t}")
            kinds.append(AckType(t))
        if last < self.start_offset:
            raise AckError(E.invalid_record_state,
                           f"offsets {first}-{last} are before the share-partition start "
                           f"offset {self.start_offset}")
        if last > self.end_offset:
            raise AckError(E.invalid_request,
                           f"offsets {first}-{last} are past the acquired records "
                           f"(end offset {self.end_offset})")
        plan = []
        # offsets before the SPSO were done by a lock timeout in between: skipped, as Kafka
        for offset in range(max(first, self.start_offset), last + 1):
            rec = self.records[offset]
            if rec.state is not RecordState.ACQUIRED:
                raise AckError(E.invalid_record_state,
                               f"offset {offset} is {rec.state.name}, not acquired")
            if rec.member_id != member_id:
                raise AckError(E.invalid_record_state,
                               f"offset {offset} is acquired by another member")
            plan.append((offset, kinds[0] if len(kinds) == 1 else kinds[offset - first]))
        return plan

    # ------------------------------------------------------------------ timeouts, members

    def expire_locks(self, now: float) -> int:
        """Release every record whose acquisition lock has run out; how many."""
        n = 0
        heap = self._locks
        while heap and heap[0][0] <= now:
            _, first, last = heapq.heappop(heap)
            for offset in range(max(first, self.start_offset), last + 1):
                rec = self.records.get(offset)
                if rec is not None and rec.lock_deadline is not None \
                        and rec.lock_deadline <= now:
                    rec.state = self._released_state(rec)
                    rec.member_id = rec.lock_deadline = None
                    n += 1
        if n:
            self.version += 1
            self._advance()
        return n

    def release_member(self, member_id: str) -> int:
        """Release what a member holds (it left the group or closed its share session)."""
        n = 0
        for rec in self.records.values():
            if rec.state is RecordState.ACQUIRED and rec.member_id == member_id:
                rec.state = self._released_state(rec)
                rec.member_id = rec.lock_deadline = None
                n += 1
        if n:
            self.version += 1
            self._advance()
        return n

    def move_start(self, offset: int) -> None:
        """The log's start moved past the SPSO (retention, DeleteRecords): the records below
        it are gone, so the window starts there (Kafka's updateCacheAndOffsets)."""
        if offset <= self.start_offset:
            return
        for o in range(self.start_offset, min(offset, self.end_offset + 1)):
            del self.records[o]
        self.start_offset = offset
        self.end_offset = max(self.end_offset, offset - 1)
        self.version += 1
        self._advance()

    def reset(self, offset: int) -> None:
        """An admin's AlterShareGroupOffsets: the window starts afresh at `offset`."""
        self.records.clear()
        self._locks.clear()
        self.start_offset = offset
        self.end_offset = offset - 1
        self.version += 1

    # ------------------------------------------------------------------ persistence

    def snapshot(self) -> tuple[int, list[StateBatch]]:
        """(SPSO, state batches) to persist: runs of (state, delivery count) across the
        window. An acquired record is written as released (available, or archived at the
        delivery limit), since its lock dies with the node that holds it: reading it back is
        a lock timeout, and its delivery count stays, so the limit still holds."""
        out: list[StateBatch] = []
        for offset in range(self.start_offset, self.end_offset + 1):
            rec = self.records[offset]
            state = (self._released_state(rec) if rec.state is RecordState.ACQUIRED
                     else rec.state)
            prev = out[-1] if out else None
            if (prev is not None and prev.state is state
                    and prev.delivery_count == rec.delivery_count):
                out[-1] = StateBatch(prev.first_offset, offset, state, rec.delivery_count)
            else:
                out.append(StateBatch(offset, offset, state, rec.delivery_count))
        return self.start_offset, out

    def restore(self, start_offset: int, batches: Iterable[StateBatch]) -> None:
        """Rebuild the window from a snapshot (what a new leader reads back)."""
        self.records.clear()
        self._locks.clear()
        self.start_offset = start_offset
        self.end_offset = start_offset - 1
        for b in sorted(batches, key=lambda b: b.first_offset):
            for offset in range(max(b.first_offset, start_offset), b.last_offset + 1):
                for gap in range(self.end_offset + 1, offset):  # never written: done
                    self.records[gap] = InFlight(RecordState.ARCHIVED, 0)
                state = (RecordState.AVAILABLE if b.state is RecordState.ACQUIRED
                         else RecordState(b.state))
                self.records[offset] = InFlight(state, b.delivery_count)
                self.end_offset = offset
        self._advance()

    # ------------------------------------------------------------------ internals

    def _released_state(self, rec: InFlight) -> RecordState:
        return (RecordState.ARCHIVED if rec.delivery_count >= self.delivery_count_limit
                else RecordState.AVAILABLE)

    def _advance(self) -> None:
        while self.start_offset <= self.end_offset:
            rec = self.records[self.start_offset]
            if rec.state not in DONE:
                return
            del self.records[self.start_offset]
            self.start_offset += 1


def _ranges(taken: list[tuple[int, int, int]]) -> list[AcquiredRange]:
    """Merge ascending (first, last, delivery count) runs that touch and share a count."""
    out: list[AcquiredRange] = []
    run: list[int] | None = None
    for first, last, count in taken:
        if run is not None and run[1] + 1 == first and run[2] == count:
            run[1] = last
            continue
        if run is not None:
            out.append(AcquiredRange(run[0], run[1], run[2]))
        run = [first, last, count]
    if run is not None:
        out.append(AcquiredRange(run[0], run[1], run[2]))
    return out
