"""Writing coordinator records to `__consumer_offsets` and reading them back at start.

Writes go through the replica manager like a producer's (validated, offsets
assigned, appended to the page cache): that is the only disk work done on the
event loop. Replay reads whole partitions and runs in a thread before the
node serves requests.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from odradek.coordinator.internal_topic import committed_batches
from odradek.coordinator.offsets_topic import (
    TOPIC,
    RecordKey,
    decode_key,
    decode_value,
    partition_for,
)
from odradek.protocol.errors import ErrorCode, ProtocolError
from odradek.protocol.records import Record, build_batch, decode_records

log = logging.getLogger(__name__)



class OffsetsTopicStore:
    def __init__(self, replica_manager: Any, num_partitions: int) -> None:
        self.rm = replica_manager
        self.num_partitions = num_partitions

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def append(self, group_id: str, records: list[tuple[bytes, bytes | None]]) -> ErrorCode:
        """Append (key, value) records of one group in one batch; the error if it failed."""
        if not records:
            return ErrorCode.none
        now = int(time.time() * 1000)
        batch = build_batch([Record(-1, now, k, v) for k, v in records])
        result = self.rm.append(TOPIC, self.partition_for(group_id), memoryview(batch), -1, True)
        if result.error != ErrorCode.none:
            log.warning("writing %d records of group %r to %s failed: %s", len(records), group_id,
                        TOPIC, ErrorCode(result.error).name.upper())
            # Kafka maps storage errors of the coordinator to retriable coordinator errors
            if result.error in (ErrorCode.unknown_topic_or_partition,
                                ErrorCode.not_enough_replicas,
                                ErrorCode.not_leader_or_follower):
                return ErrorCode.coordinator_not_available
            if result.error in (ErrorCode.message_too_large, ErrorCode.record_list_too_large):
                return ErrorCode.invalid_commit_offset_size
            return ErrorCode.unknown_server_error
        return ErrorCode.none

    def replay(self) -> Iterator[tuple[RecordKey, dict[str, Any] | None, int]]:
        """(key, value or None, timestamp) of every record, partition by partition. Blocking."""
        for p in range(self.num_partitions):
            part = self.rm.get(TOPIC, p)
            if part is None:
                continue
            yield from self._replay_partition(part)

    def _replay_partition(self, part: Any) -> Iterator[tuple[RecordKey, dict[str, Any] | None, int]]:
        for header, view in committed_batches(part):
            if header.is_control:
                continue
            for rec in decode_records(header, view):
                if rec.key is None:
                    continue
                try:
                    key = decode_key(rec.key)
                    if key is None:
                        continue
                    value = decode_value(key.kind, rec.value)
                except (ProtocolError, UnicodeDecodeError) as exc:
                    log.warning("skipping unreadable record at %s-%d offset %d: %s",
                                TOPIC, part.index, rec.offset, exc)
                    continue
                yield key, value, rec.timestamp
