"""Producer ids handed out by this node, in blocks reserved in the metadata log.

Each block's end is a ProducerIdsRecord (Kafka's AllocateProducerIds), so an id is never
handed out twice, across restarts and kill -9 alike: after a restart the node starts on a
fresh block and the rest of the old one is simply skipped, as in Kafka.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, allocate_block: Callable[[], tuple[int, int]]) -> None:
        """`allocate_block() -> (first id, size)` reserves a block (Controller's
        allocate_producer_ids for this node)."""
        self._allocate_block = allocate_block
        self._next = 0
        self._end = 0
        self._lock = threading.Lock()

    def generate(self) -> int:
        with self._lock:
            if self._next >= self._end:
                first, size = self._allocate_block()
                self._next, self._end = first, first + size
            pid = self._next
            self._next += 1
            return pid
