"""Fetch long-poll: wait until enough bytes arrived or max_wait_ms elapsed.

A fetch that found fewer than `min_bytes` registers one watcher on each of its
partitions. Appends add their size to a shared tally; the first append that
takes the tally to `min_bytes` resolves one future, so many appends cost one
wake-up. The handler then reads again and answers with what is there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from odradek.replication.partition import Partition


class DelayedFetch:
    __slots__ = ("_future", "_partitions", "accumulated", "min_bytes")

    def __init__(self, partitions: Iterable[Partition], min_bytes: int, accumulated: int) -> None:
        self._partitions = list(partitions)
        self.min_bytes = min_bytes
        self.accumulated = accumulated
        self._future: asyncio.Future[None] | None = None

    def _on_append(self, partition: Partition, size: int) -> None:
        self.accumulated += size
        fut = self._future
        if fut is not None and not fut.done() and self.accumulated >= self.min_bytes:
            fut.set_result(None)

    async def wait(self, max_wait_ms: int) -> bool:
        """True when min_bytes arrived, False on timeout (either way: read again)."""
        if self.accumulated >= self.min_bytes or max_wait_ms <= 0 or not self._partitions:
            return self.accumulated >= self.min_bytes
        loop = asyncio.get_running_loop()
        fut = self._future = loop.create_future()
        timer = loop.call_later(max_wait_ms / 1000.0, _resolve, fut)
        for p in self._partitions:
            p.add_watcher(self._on_append)
        try:
            await fut
        finally:
            timer.cancel()
            for p in self._partitions:
                p.remove_watcher(self._on_append)
        return self.accumulated >= self.min_bytes


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
