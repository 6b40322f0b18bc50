"""Writing coordinator records to `__consumer_offsets` and reading them back at start.

Writes go through the replica manager like a producer's (validated, offsets
assigned, appended to the page cache): that is the only disk work done on the
event loop. Replay reads whole partitions and runs in a thread before the
node serves requests.

Offsets committed in a transaction (TxnOffsetCommit) are transactional records: they are
held per producer id until the transaction's marker, applied on COMMIT and dropped on
ABORT, the same way at replay as at runtime (`TxnOffsets`, Kafka's pending transactional
offset commits). A committed transactional offset does not replace a plain commit written
after it in the log (Kafka's "olderThan" rule).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from odradek.coordinator.internal_topic import committed_batches
from odradek.coordinator.offsets_topic import (
    OFFSET_COMMIT_KEY,
    TOPIC,
    RecordKey,
    decode_key,
    decode_value,
    partition_for,
)
from odradek.protocol.errors import ErrorCode, ProtocolError
from odradek.protocol.records import ControlRecordType, Record, build_batch, decode_records
from odradek.storage.producer_state import control_marker

log = logging.getLogger(__name__)

# (group, topic, partition)
OffsetKey = tuple[str, str, int]


@dataclass(slots=True)
class PendingTxnOffset:
    value: dict[str, Any]  # the OffsetCommit value as decoded/encoded (offset, leader_epoch, ...)
    timestamp: int
    record_offset: int  # where its record sits in `__consumer_offsets`


class TxnOffsets:
    """Transactional offset commits waiting for their transaction's marker, by producer id."""

    def __init__(self) -> None:
        self.pending: dict[int, dict[OffsetKey, PendingTxnOffset]] = {}
        # log offset of the newest applied commit record of each key: a transactional offset
        # that is older in the log than a plain commit does not replace it
        self.applied_at: dict[OffsetKey, int] = {}

    def note_plain(self, key: OffsetKey, record_offset: int) -> None:
        if record_offset > self.applied_at.get(key, -1):
            self.applied_at[key] = record_offset

    def add(self, producer_id: int, key: OffsetKey, pending: PendingTxnOffset) -> None:
        self.pending.setdefault(producer_id, {})[key] = pending

    def complete(self, producer_id: int, commit: bool) -> list[tuple[OffsetKey, PendingTxnOffset]]:
        """The marker of `producer_id`'s transaction: on commit the offsets that become the
        group's committed ones; on abort nothing (they are dropped)."""
        entries = self.pending.pop(producer_id, None)
        if not entries or not commit:
            return []
        out = []
        for key, p in entries.items():
            if p.record_offset > self.applied_at.get(key, -1):
                self.applied_at[key] = p.record_offset
                out.append((key, p))
        return out

    def pending_count(self) -> int:
        return sum(len(v) for v in self.pending.values())


def offset_record_key(key: OffsetKey) -> RecordKey:
    return RecordKey(OFFSET_COMMIT_KEY, key[0], key[1], key[2])


class OffsetsTopicStore:
    def __init__(self, replica_manager: Any, num_partitions: int) -> None:
        self.rm = replica_manager
        self.num_partitions = num_partitions
        self.txn = TxnOffsets()

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def append(self, group_id: str, records: list[tuple[bytes, bytes | None]]) -> ErrorCode:
        """Append (key, value) records of one group in one batch; the error if it failed."""
        if not records:
            return ErrorCode.none
        now = int(time.time() * 1000)
        batch = build_batch([Record(-1, now, k, v) for k, v in records])
        result = self.rm.append(TOPIC, self.partition_for(group_id), memoryview(batch), -1, True)
        if result.error == ErrorCode.none and self.txn.pending:
            self._note_plain_commits(records, result.base_offset)
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

    def _note_plain_commits(self, records: list[tuple[bytes, bytes | None]], base: int) -> None:
        # only while transactional offsets wait: a plain commit newer than them wins
        for i, (k, _) in enumerate(records):
            try:
                key = decode_key(k)
            except (ProtocolError, UnicodeDecodeError):
                continue
            if key is not None and key.kind == OFFSET_COMMIT_KEY:
                self.txn.note_plain((key.group, key.topic or "", key.partition), base + i)

    def replay(self, partitions: Iterable[int] | None = None
               ) -> Iterator[tuple[RecordKey, dict[str, Any] | None, int]]:
        """(key, value or None, timestamp) of every record as it takes effect, partition by
        partition. Transactional offset commits take effect at their commit marker (and never
        when aborted); those of transactions still open stay in `self.txn`. Blocking."""
        for p in range(self.num_partitions) if partitions is None else partitions:
            part = self.rm.get(TOPIC, p)
            if part is None:
                continue
            yield from self._replay_partition(part)

    def _replay_partition(self, part: Any) -> Iterator[tuple[RecordKey, dict[str, Any] | None, int]]:
        for header, view in committed_batches(part):
            if header.is_control:
                ctype = control_marker(view)[0]
                if ctype not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
                    continue
                for key, p in self.txn.complete(header.producer_id,
                                                ctype == ControlRecordType.COMMIT):
                    yield offset_record_key(key), p.value, p.timestamp
                continue
            transactional = header.is_transactional
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
                if key.kind == OFFSET_COMMIT_KEY:
                    okey = (key.group, key.topic or "", key.partition)
                    if transactional:
                        if value is not None:
                            self.txn.add(header.producer_id, okey,
                                         PendingTxnOffset(value, rec.timestamp, rec.offset))
                        continue
                    self.txn.note_plain(okey, rec.offset)
                yield key, value, rec.timestamp
