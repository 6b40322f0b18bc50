"""Writing coordinator records to `__consumer_offsets` and reading them back at start.

Writes go through the coordinator runtime to the replica manager like a producer's
(validated, offsets assigned, appended to the page cache): that is the only disk work done
on the event loop. Replay reads whole partitions, in a thread.

Offsets committed in a transaction (TxnOffsetCommit) are transactional records: they are
held per producer id until the transaction's marker, applied on COMMIT and dropped on
ABORT, the same way at replay as at runtime (`TxnOffsets`, Kafka's pending transactional
offset commits). A committed transactional offset does not replace a plain commit written
after it in the log (Kafka's "olderThan" rule).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from odradek.coordinator.offsets_topic import (
    OFFSET_COMMIT_KEY,
    TOPIC,
    RecordKey,
    decode_key,
    decode_value,
    partition_for,
)
from odradek.protocol.errors import ErrorCode, ProtocolError
from odradek.protocol.records import ControlRecordType, control_marker, decode_records

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

    def complete(self, producer_id: int, commit: bool,
                 only: Callable[[OffsetKey], bool] | None = None
                 ) -> list[tuple[OffsetKey, PendingTxnOffset]]:
        """The marker of `producer_id`'s transaction: on commit the offsets that become the
        group's committed ones; on abort nothing (they are dropped). `only` limits it to the
        keys of the partition whose marker it is (a replay of one partition)."""
        if only is None:
            entries = self.pending.pop(producer_id, None)
        else:
            held = self.pending.get(producer_id, {})
            entries = {k: v for k, v in held.items() if only(k)}
            for k in entries:
                del held[k]
            if not held:
                self.pending.pop(producer_id, None)
        if not entries or not commit:
            return []
        out = []
        for key, p in entries.items():
            if p.record_offset > self.applied_at.get(key, -1):
                self.applied_at[key] = p.record_offset
                out.append((key, p))
        return out

    def is_pending(self, key: OffsetKey) -> bool:
        """Whether an open transaction holds an offset of `key` (OffsetFetch's
        require_stable answers UNSTABLE_OFFSET_COMMIT for it, KIP-447)."""
        return any(key in entries for entries in self.pending.values())

    def pending_count(self) -> int:
        return sum(len(v) for v in self.pending.values())

    def drop(self, forget: Callable[[OffsetKey], bool]) -> None:
        """Forget pending and applied entries of the keys `forget` picks (an unloaded
        partition's groups: its replay brings them back)."""
        for pid in list(self.pending):
            entries = self.pending[pid]
            for key in [k for k in entries if forget(k)]:
                del entries[key]
            if not entries:
                del self.pending[pid]
        for key in [k for k in self.applied_at if forget(k)]:
            del self.applied_at[key]


def offset_record_key(key: OffsetKey) -> RecordKey:
    return RecordKey(OFFSET_COMMIT_KEY, key[0], key[1], key[2])


class OffsetsTopicStore:
    def __init__(self, runtime: Any, num_partitions: int) -> None:
        self.runtime = runtime
        self.num_partitions = num_partitions
        self.txn = TxnOffsets()

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def append(self, group_id: str, records: list[tuple[bytes, bytes | None]]) -> ErrorCode:
        """Append (key, value) records of one group in one batch; the error if it failed."""
        if not records:
            return ErrorCode.none
        result = self.runtime.append(TOPIC, self.partition_for(group_id), records)
        if result.error == ErrorCode.none and self.txn.pending:
            self._note_plain_commits(records, result.base_offset)
        if result.error != ErrorCode.none:
            log.warning("writing %d records of group %r to %s failed: %s", len(records), group_id,
                        TOPIC, ErrorCode(result.error).name.upper())
            # Kafka maps storage errors of the coordinator to retriable coordinator errors
            if result.error in (ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error):
                return ErrorCode.not_coordinator  # the partition is not (usably) led here
            if result.error in (ErrorCode.unknown_topic_or_partition,
                                ErrorCode.not_enough_replicas,
                                ErrorCode.not_enough_replicas_after_append,
                                ErrorCode.request_timed_out):
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
            yield from self._replay_partition(p)

    def drop_partition(self, partition: int) -> None:
        """The partition is unloaded: its groups' transactional offsets go too."""
        self.txn.drop(self._in_partition(partition))

    def _in_partition(self, partition: int) -> Callable[[OffsetKey], bool]:
        return lambda key: self.partition_for(key[0]) == partition

    def _replay_partition(self, p: int) -> Iterator[tuple[RecordKey, dict[str, Any] | None, int]]:
        for header, view in self.runtime.replay(TOPIC, p):
            if header.is_control:
                ctype = control_marker(view)[0]
                if ctype not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
                    continue
                here = self._in_partition(p)
                for key, pending in self.txn.complete(header.producer_id,
                                                      ctype == ControlRecordType.COMMIT, here):
                    yield offset_record_key(key), pending.value, pending.timestamp
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
                                TOPIC, p, rec.offset, exc)
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
