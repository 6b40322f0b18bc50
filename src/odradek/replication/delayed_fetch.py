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
from collections.abc import Iterable

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
    __slots__ = ("_future", "_lso", "_partitions", "_unstable", "accumulated", "min_bytes",
                 "read_committed")

    def __init__(self, partitions: Iterable[Partition], min_bytes: int, accumulated: int,
                 read_committed: bool = False,
                 stable_offsets: dict[Partition, int] | None = None) -> None:
        """`stable_offsets`: for read_committed, the LSO of each partition as the fetch read
        it (default: as it is now); an LSO past it wakes the fetch."""
        self._partitions = list(partitions)
        self.min_bytes = min_bytes
        self.accumulated = accumulated
        self.read_committed = read_committed
        self._future: asyncio.Future[None] | None = None
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
        fut = self._future
        if fut is not None and not fut.done() and self.accumulated >= self.min_bytes:
            fut.set_result(None)

    def complete(self) -> None:
        """Stop waiting now (the caller reads again and answers with what is there)."""
        fut = self._future
        if fut is not None and not fut.done():
            fut.set_result(None)

    async def wait(self, max_wait_ms: int) -> bool:
        """True when min_bytes arrived, False on timeout (either way: read again)."""
        if self.accumulated >= self.min_bytes or max_wait_ms <= 0 or not self._partitions:
            return self.accumulated >= self.min_bytes
        if self.read_committed and any(p.last_stable_offset > self._lso[p]
                                       for p in self._partitions):
            return True  # a marker landed since the read: read again now
        loop = asyncio.get_running_loop()
        fut = self._future = loop.create_future()
        timer = loop.call_later(max_wait_ms / 1000.0, _resolve, fut)
        for p in self._partitions:
            p.add_watcher(self._on_append)
        _WAITING.add(self)
        try:
            await fut
        finally:
            _WAITING.discard(self)
            timer.cancel()
            for p in self._partitions:
                p.remove_watcher(self._on_append)
        return self.accumulated >= self.min_bytes


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
