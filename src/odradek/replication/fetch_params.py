"""What a fetch asks of the ReplicaManager (Kafka's FetchParams and FetchIsolation).

One shape for a consumer's fetch and a follower's: `replica_id` (-1 for a consumer, the node id
of a follower) decides how far it may read.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from typing import Any

__all__ = ["INLINE_READ_BYTES", "READ_COMMITTED", "FetchIsolation", "FetchParams",
           "FetchTopic", "FetchTopicResult"]

READ_COMMITTED = 1  # the request's isolation_level
# Records up to this size are read into the response (one pread) instead of being sent with
# os.sendfile: a small fetch (a consumer at the head of the log) then leaves in the same
# writelines as the other responses of its loop pass, where a FileRegion costs a send task,
# a drain wait and a sendfile plus a send per partition.
INLINE_READ_BYTES = 32 * 1024

# (name, or None for a topic id this node does not know; topic id;
#  [(partition, fetch offset, partition max bytes, current leader epoch)])
FetchTopic = tuple[str | None, uuid.UUID, list[tuple[int, int, int, int]]]
# (name or "", topic id, [protocol.fetch.FetchPartitionResponse])
FetchTopicResult = tuple[str, uuid.UUID, list[Any]]


class FetchIsolation(enum.IntEnum):
    """How far a fetch may read: a follower to the log end, a consumer to the high watermark,
    a read_committed consumer to the last stable offset."""
    LOG_END = 0
    HIGH_WATERMARK = 1
    TXN_COMMITTED = 2


@dataclass(frozen=True, slots=True)
class FetchParams:
    replica_id: int  # -1: a consumer; >= 0: the follower node fetching
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int  # the request's: 0 read_uncommitted, 1 read_committed
    # the request names topics by id (Fetch v13+): an unknown one is UNKNOWN_TOPIC_ID
    topic_ids: bool = False

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0

    @property
    def isolation(self) -> FetchIsolation:
        if self.replica_id >= 0:
            return FetchIsolation.LOG_END
        if self.isolation_level == READ_COMMITTED:
            return FetchIsolation.TXN_COMMITTED
        return FetchIsolation.HIGH_WATERMARK
