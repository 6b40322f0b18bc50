"""What a fetch asks of the ReplicaManager (Kafka's FetchParams and FetchIsolation).

One shape for a consumer's fetch and a follower's: `replica_id` (-1 for a consumer, the node id
of a follower) decides how far it may read.
"""

from __future__ import annotations

import uuid
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


class FetchIsolation:
    """How far a fetch may read: a follower to the log end, a consumer to the high watermark,
    a read_committed consumer to the last stable offset. (Plain ints: compared for every
    partition of every fetch.)"""
    LOG_END = 0
    HIGH_WATERMARK = 1
    TXN_COMMITTED = 2


class FetchParams:
    """A fetch request's parameters. A plain class with slots, not a frozen dataclass: one is
    built per fetch, and a frozen dataclass's __init__ costs a microsecond."""

    __slots__ = ("client_rack", "isolation", "isolation_level", "max_bytes", "max_wait_ms",
                 "min_bytes", "replica_epoch", "replica_id", "topic_ids")

    def __init__(self, replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
                 isolation_level: int, topic_ids: bool = False, client_rack: str | None = None,
                 replica_epoch: int = -1) -> None:
        self.replica_id = replica_id  # -1: a consumer; >= 0: the follower node fetching
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.isolation_level = isolation_level  # the request's: 0 read_uncommitted, 1 committed
        # the request names topics by id (Fetch v13+): an unknown one is UNKNOWN_TOPIC_ID
        self.topic_ids = topic_ids
        # the consumer's rack (Fetch v11+ carries client metadata: it may read from a
        # follower, KIP-392); None before v11 (leader only)
        self.client_rack = client_rack
        self.replica_epoch = replica_epoch  # the follower's broker epoch (Fetch v15+)
        self.isolation = (FetchIsolation.LOG_END if replica_id >= 0
                          else FetchIsolation.TXN_COMMITTED if isolation_level == READ_COMMITTED
                          else FetchIsolation.HIGH_WATERMARK)

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0
