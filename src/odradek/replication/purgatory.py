"""The purgatory: requests that wait, on the event loop, for a condition or a timeout.

Kafka parks a request it cannot answer yet as a DelayedOperation in a purgatory owned by its
ReplicaManager; the operation completes when its condition holds, its timeout passes, or the
broker forces it (at shutdown). Here:

- `DelayedOperation` is that life cycle with callbacks, not a coroutine: a caught-up consumer
  parks a fetch every fetch.wait.max.ms, and a task per park costs more than the rest of the
  wait. `start` arms a timer and the operation's watches, `on_done()` is called once on the
  loop (never from inside the event that satisfied it), `cancel` disarms without calling it.
- `DelayedFetch` waits until enough bytes arrived on its partitions (min_bytes).
- `DelayedOperationPurgatory` knows which operations wait now, so the ReplicaManager can
  complete them all at shutdown. One instance per kind of operation, owned by the
  ReplicaManager: the fetch purgatory today, the produce purgatory (DelayedProduce, acks=all
  waiting for the ISR to reach its offsets) when followers exist.

A DelayedFetch registers one watcher on each of its partitions. Appends add their size to a
shared tally; the first append that takes the tally to `min_bytes` schedules one wake-up, so
many appends cost one. The fetch then reads again and answers with what is there.

A read_committed fetch (isolation_level=1) can only be given what lies below the last stable
offset, so appends inside an open transaction do not count until a marker moves the LSO past
them (as Kafka's DelayedFetch measures up to the LSO for TXN_COMMITTED); otherwise every
transactional append would wake it to answer nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Iterator

from odradek.protocol.errors import ErrorCode
from odradek.replication.partition import Partition

__all__ = ["DelayedFetch", "DelayedOperation", "DelayedOperationPurgatory", "DelayedProduce"]


class DelayedOperationPurgatory:
    """The operations of one kind waiting now (Kafka's DelayedOperationPurgatory)."""

    __slots__ = ("_waiting", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._waiting: set[DelayedOperation] = set()

    def __len__(self) -> int:
        return len(self._waiting)

    def __contains__(self, op: object) -> bool:
        return op in self._waiting

    def __iter__(self) -> Iterator[DelayedOperation]:
        return iter(list(self._waiting))

    def watch(self, op: DelayedOperation) -> None:
        self._waiting.add(op)

    def unwatch(self, op: DelayedOperation) -> None:
        self._waiting.discard(op)

    def complete_all(self) -> int:
        """Force every waiting operation to complete now (shutdown); how many there were."""
        waiting = list(self._waiting)
        for op in waiting:
            op.complete()
        return len(waiting)


class DelayedOperation:
    """Wait for `_ready()`, a timeout or `complete()`, then call `on_done()` once on the loop.

    Subclasses arm what tells them their condition may hold in `_watch` and disarm it in
    `_unwatch`; when it holds they call `_finish_soon()`."""

    __slots__ = ("_loop", "_on_done", "_purgatory", "_scheduled", "_timer")

    def __init__(self, purgatory: DelayedOperationPurgatory | None = None) -> None:
        # without a purgatory the operation works alike, but nothing can force it (tests)
        self._purgatory = purgatory
        self._on_done: Callable[[], None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._scheduled = False

    # --- what a kind of operation defines --------------------------------

    def _ready(self) -> bool:
        """Whether there is nothing to wait for (checked when parking)."""
        raise NotImplementedError

    def _watch(self) -> None:
        raise NotImplementedError

    def _unwatch(self) -> None:
        raise NotImplementedError

    # --- life cycle --------------------------------------------------------

    def start(self, max_wait_ms: int, on_done: Callable[[], None]) -> bool:
        """Park until the condition holds, max_wait_ms passed or `complete()`, then call
        `on_done()` once on the loop. False (nothing parked, `on_done` never called) when there
        is nothing to wait for: the caller completes it now."""
        if max_wait_ms <= 0 or self._ready():
            return False
        loop = self._loop = asyncio.get_running_loop()
        self._on_done = on_done
        self._scheduled = False
        self._timer = loop.call_later(max_wait_ms / 1000.0, self._finish)
        self._watch()
        if self._purgatory is not None:
            self._purgatory.watch(self)
        return True

    def _finish_soon(self) -> None:
        # not from inside the event that satisfied it (an append): the rest of its request
        # (the produce's other batches) goes first
        if self._on_done is not None and not self._scheduled and self._loop is not None:
            self._scheduled = True
            self._loop.call_soon(self._finish)

    def _finish(self) -> None:
        on_done = self._on_done
        if on_done is not None:
            self.cancel()
            on_done()

    def complete(self) -> None:
        """Stop waiting now (forced: the caller completes with what there is)."""
        self._finish_soon()

    def cancel(self) -> None:
        """Stop waiting without calling `on_done` (also what finishing does first)."""
        if self._on_done is None:
            return
        self._on_done = None
        if self._purgatory is not None:
            self._purgatory.unwatch(self)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._unwatch()


class DelayedFetch(DelayedOperation):
    """A fetch that found fewer than min_bytes: waits for appends on its partitions."""

    __slots__ = ("_log_end", "_lso", "_partitions", "_unstable", "_watcher", "accumulated",
                 "min_bytes", "read_committed")

    def __init__(self, partitions: Iterable[Partition], min_bytes: int, accumulated: int,
                 read_committed: bool = False,
                 stable_offsets: dict[Partition, int] | None = None,
                 purgatory: DelayedOperationPurgatory | None = None,
                 log_end: bool = False) -> None:
        """`stable_offsets`: for read_committed, the LSO of each partition as the fetch read
        it (default: as it is now); an LSO past it wakes the fetch. `log_end`: a follower's
        fetch, woken by appends (a consumer's is woken by the high watermark)."""
        super().__init__(purgatory)
        self._log_end = log_end
        self._partitions = list(partitions)
        self.min_bytes = min_bytes
        self.accumulated = accumulated
        self.read_committed = read_committed
        self._watcher = self._on_append  # one bound method to add and remove
        # read_committed: LSO per partition when last looked, bytes appended above it since
        self._lso: dict[Partition, int] = {}
        self._unstable: dict[Partition, int] = {}
        if read_committed:
            seen = stable_offsets or {}
            for p in self._partitions:
                self._lso[p] = seen.get(p, p.last_stable_offset)

    def _ready(self) -> bool:
        if self.accumulated >= self.min_bytes or not self._partitions:
            return True
        # read_committed: a marker landed since the read, read again now
        return self.read_committed and any(p.last_stable_offset > self._lso[p]
                                           for p in self._partitions)

    def _watch(self) -> None:
        watcher = self._watcher
        log_end = self._log_end
        for p in self._partitions:
            p.add_watcher(watcher, log_end)

    def _unwatch(self) -> None:
        watcher = self._watcher
        for p in self._partitions:
            p.remove_watcher(watcher)

    def _on_append(self, partition: Partition, size: int) -> None:
        if not size and not self._log_end and not partition.is_leader:
            # a role change: read again now (the answer is NOT_LEADER_OR_FOLLOWER or data)
            self._finish_soon()
            return
        if self.read_committed:
            lso = partition.last_stable_offset
            waiting = self._unstable.get(partition, 0) + size
            if lso <= self._lso.get(partition, lso):
                self._unstable[partition] = waiting
                return
            # the LSO moved: what was appended meanwhile may be readable now (an upper bound:
            # the fetch reads again and answers with what is really there)
            self._lso[partition] = lso
            self._unstable[partition] = 0
            size = waiting
        self.accumulated += size
        if self.accumulated >= self.min_bytes:
            self._finish_soon()

    async def wait(self, max_wait_ms: int) -> bool:
        """True when min_bytes arrived, False on timeout (either way: read again)."""
        fut = asyncio.get_running_loop().create_future()

        def done() -> None:
            if not fut.done():
                fut.set_result(None)

        if not self.start(max_wait_ms, done):
            if self.accumulated >= self.min_bytes or max_wait_ms <= 0 or not self._partitions:
                return self.accumulated >= self.min_bytes
            return True  # read_committed: a marker landed since the read
        try:
            await fut
        finally:
            self.cancel()
        return self.accumulated >= self.min_bytes


class DelayedProduce(DelayedOperation):
    """An acks=all produce whose batches are appended, waiting for the high watermark of each
    partition to pass its batch (Kafka's DelayedProduce): `waits` are (partition, required
    offset = last offset + 1, leader epoch at the append). `errors()` then says, per wait,
    NONE, NOT_LEADER_OR_FOLLOWER (leadership moved meanwhile) or REQUEST_TIMED_OUT."""

    __slots__ = ("_watcher", "waits")

    def __init__(self, waits: list[tuple[Partition, int, int]],
                 purgatory: DelayedOperationPurgatory | None = None) -> None:
        super().__init__(purgatory)
        self.waits = waits
        self._watcher = self._on_hw

    @staticmethod
    def _done(part: Partition, required: int, epoch: int) -> bool:
        return (part.high_watermark >= required or not part.is_leader
                or part.leader_epoch != epoch)

    def _ready(self) -> bool:
        return all(self._done(p, r, e) for p, r, e in self.waits)

    def _watch(self) -> None:
        for p, _, _ in self.waits:
            p.add_watcher(self._watcher)

    def _unwatch(self) -> None:
        for p, _, _ in self.waits:
            p.remove_watcher(self._watcher)

    def _on_hw(self, partition: Partition, size: int) -> None:
        if self._ready():
            self._finish_soon()

    def errors(self) -> list[ErrorCode]:
        out = []
        for p, required, epoch in self.waits:
            if not p.is_leader or p.leader_epoch != epoch:
                out.append(ErrorCode.not_leader_or_follower)
            elif p.high_watermark >= required:
                out.append(ErrorCode.none)
            else:
                out.append(ErrorCode.request_timed_out)
        return out
