"""Fetch long-poll: wait until enough bytes arrived or max_wait_ms elapsed.

A fetch that found fewer than `min_bytes` registers one watcher on each of its
partitions. Appends add their size to a shared tally; the first append that
takes the tally to `min_bytes` resolves one future, so many appends cost one
wake-up. The handler then reads again and answers with what is there.

A read_committed fetch (isolation_level=1) can only be given what lies below the last stable
offset, so appends inside an open transaction do not count until a marker moves the LSO
past them (as Kafka's DelayedFetch measures up to the LSO for TXN_COMMITTED); otherwise every
transactional append would wake it to answer nothing.

`complete_all()` answers every fetch waiting now (each reads again and returns what is there),
as Kafka completes its delayed fetches at shutdown: a node that is stopping need not wait out
consumers' fetch.wait.max.ms.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from odradek.replication.partition import Partition

# the fetches waiting right now (complete_all)
_WAITING: set[DelayedFetch] = set()


def complete_all() -> int:
    """Wake every waiting fetch at once; how many there were."""
    waiting = list(_WAITING)
    for fetch in waiting:
        fetch.complete()
    return len(waiting)


class DelayedFetch:
    __slots__ = ("_loop", "_lso", "_on_done", "_partitions", "_scheduled", "_timer",
                 "_unstable", "_watcher", "accumulated", "min_bytes", "read_committed")

    def __init__(self, partitions: Iterable[Partition], min_bytes: int, accumulated: int,
                 read_committed: bool = False,
                 stable_offsets: dict[Partition, int] | None = None) -> None:
        """`stable_offsets`: for read_committed, the LSO of each partition as the fetch read
        it (default: as it is now); an LSO past it wakes the fetch."""
        self._partitions = list(partitions)
        self.min_bytes = min_bytes
        self.accumulated = accumulated
        self.read_committed = read_committed
        self._on_done: Callable[[], None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._scheduled = False
        self._watcher = self._on_append  # one bound method to add and remove
        # read_committed: LSO per partition when last looked, bytes appended above it since
        self._lso: dict[Partition, int] = {}
        self._unstable: dict[Partition, int] = {}
        if read_committed:
            seen = stable_offsets or {}
            for p in self._partitions:
                self._lso[p] = seen.get(p, p.last_stable_offset)

    def _on_append(self, partition: Partition, size: int) -> None:
        if self.read_committed:
            lso = partition.last_stable_offset
            waiting = self._unstable.get(partition, 0) + size
            if lso <= self._lso.get(partition, lso):
                self._unstable[partition] = waiting
                return
            # the LSO moved: what was appended meanwhile may be readable now (an upper bound:
            # the handler reads again and answers with what is really there)
            self._lso[partition] = lso
            self._unstable[partition] = 0
            size = waiting
        self.accumulated += size
        if self.accumulated >= self.min_bytes:
            self._finish_soon()

    def _finish_soon(self) -> None:
        # not from inside the append: the rest of its produce request is appended first
        if self._on_done is not None and not self._scheduled and self._loop is not None:
            self._scheduled = True
            self._loop.call_soon(self._finish)

    def _finish(self) -> None:
        on_done = self._on_done
        if on_done is not None:
            self.cancel()
            on_done()

    def complete(self) -> None:
        """Stop waiting now (the caller reads again and answers with what is there)."""
        self._finish_soon()

    def start(self, max_wait_ms: int, on_done: Callable[[], None]) -> bool:
        """Park until min_bytes arrived, max_wait_ms passed or `complete()`, then call
        `on_done()` once on the loop. False (and nothing parked, `on_done` never called) when
        there is nothing to wait for: read again now.

        Callbacks rather than a coroutine: a caught-up consumer parks a fetch every
        fetch.wait.max.ms, and a task per park costs more than the rest of the wait."""
        if self.accumulated >= self.min_bytes or max_wait_ms <= 0 or not self._partitions:
            return False
        if self.read_committed and any(p.last_stable_offset > self._lso[p]
                                       for p in self._partitions):
            return False  # a marker landed since the read: read again now
        loop = self._loop = asyncio.get_running_loop()
        self._on_done = on_done
        self._scheduled = False
        self._timer = loop.call_later(max_wait_ms / 1000.0, self._finish)
        watcher = self._watcher
        for p in self._partitions:
            p.add_watcher(watcher)
        _WAITING.add(self)
        return True

    def cancel(self) -> None:
        """Stop waiting without calling `on_done` (also what finishing does first)."""
        if self._on_done is None:
            return
        self._on_done = None
        _WAITING.discard(self)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        watcher = self._watcher
        for p in self._partitions:
            p.remove_watcher(watcher)

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
