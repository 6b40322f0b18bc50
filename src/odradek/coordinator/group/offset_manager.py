"""The offset manager (Kafka's OffsetMetadataManager): committed offsets of every group,
their commits, fetches and deletions, their expiry (offsets.retention.minutes), the
transactional offsets waiting for their transaction's marker, and the lag the node reports.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from odradek.coordinator import offsets_topic as ot
from odradek.coordinator.group.api import (
    Group,
    GroupConfig,
    OffsetCommitEntry,
    PartitionLagInfo,
    TopicLookup,
    mono_ms,
    now_ms,
)
from odradek.coordinator.group.classic import ClassicGroup, GroupState
from odradek.coordinator.group.consumer import ConsumerGroup
from odradek.coordinator.group.lag import LagStatus, LagTracker, roll_up
from odradek.coordinator.group.offsets import (
    OFFSET_METADATA_MAX_BYTES,
    CommittedOffset,
    OffsetStore,
    Unsettled,
)
from odradek.coordinator.group.store import OffsetsTopicStore, PendingTxnOffset
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import Record, build_batch

log = logging.getLogger(__name__)
E = ErrorCode

# (key, value) of one transactional offset commit record, from
# (group, topic, partition, offset, leader epoch, metadata, commit timestamp)
OffsetRecordEncoder = Callable[[str, str, int, int, int, str, int], tuple[bytes, bytes]]


def encode_offset_record(group: str, topic: str, partition: int, offset: int,
                         leader_epoch: int, metadata: str, now: int) -> tuple[bytes, bytes]:
    """The OffsetCommit record (key v1, value v3) of one committed offset."""
    key = ot.encode_key(ot.RecordKey(ot.OFFSET_COMMIT_KEY, group, topic, partition))
    value = ot.encode_value(ot.OFFSET_COMMIT_KEY, {
        "offset": offset, "leader_epoch": leader_epoch, "metadata": metadata,
        "commit_timestamp": now})
    return key, value


class OffsetManager:
    """Mixin of GroupCoordinator: committed offsets."""

    rm: Any
    runtime: Any
    groups: dict[str, Group]
    offsets: OffsetStore
    lag: LagTracker
    store: OffsetsTopicStore
    config: GroupConfig
    topics: TopicLookup
    coordinator_error: Callable[[str], ErrorCode]
    wake_at: Callable[[str, float], None]

    # ================================================================ offsets

    def commit_offsets(self, group_id: str, generation: int, member_id: str,
                       instance_id: str | None, entries: list[OffsetCommitEntry],
                       retention_ms: int = -1, kip848_errors: bool = True
                       ) -> dict[tuple[str, int], ErrorCode]:
        """OffsetCommit: the error per (topic, partition)."""
        err = self.validate_commit(group_id, generation, member_id, instance_id, kip848_errors)
        if err != E.none:
            return {(e.topic, e.partition): err for e in entries}
        now = now_ms()
        out: dict[tuple[str, int], ErrorCode] = {}
        records: list[tuple[bytes, bytes | None]] = []
        accepted: list[tuple[tuple[str, int], CommittedOffset]] = []
        for e in entries:
            tp = (e.topic, e.partition)
            info = self.topics(e.topic)
            if info is None or not 0 <= e.partition < info[1]:
                out[tp] = E.unknown_topic_or_partition
                continue
            meta = e.metadata or ""
            if len(meta.encode()) > OFFSET_METADATA_MAX_BYTES:
                out[tp] = E.offset_metadata_too_large
                continue
            expire = now + retention_ms if retention_ms > 0 else None
            value = CommittedOffset(e.offset, e.leader_epoch, meta, now, expire)
            key = ot.encode_key(ot.RecordKey(ot.OFFSET_COMMIT_KEY, group_id, e.topic, e.partition))
            if expire is not None:
                val = ot.encode_value(ot.OFFSET_COMMIT_KEY, {
                    "offset": e.offset, "metadata": meta, "commit_timestamp": now,
                    "expire_timestamp": expire}, version=1)
            else:
                val = ot.encode_value(ot.OFFSET_COMMIT_KEY, {
                    "offset": e.offset, "leader_epoch": e.leader_epoch, "metadata": meta,
                    "commit_timestamp": now})
            records.append((key, val))
            accepted.append((tp, value))
            out[tp] = E.none
        if records:
            if group_id not in self.groups:
                self.groups[group_id] = ClassicGroup(group_id, state_timestamp_ms=now)
            werr = self.store.append(group_id, records)
            at = self._unsettled(group_id)
            for tp, value in accepted:
                if werr != E.none:
                    out[tp] = werr
                    continue
                self.offsets.put(group_id, tp, value, at)
                part = self.rm.get(tp[0], tp[1])
                if part is not None:
                    self.lag.observe(group_id, tp[0], tp[1], value.offset, part.high_watermark,
                                     now, deliberate=generation < 0 and not member_id)
        return out

    def validate_commit(self, group_id: str, generation: int, member_id: str,
                         instance_id: str | None, kip848_errors: bool) -> ErrorCode:
        if not group_id:
            return E.invalid_group_id
        if (cerr := self.coordinator_error(group_id)) != E.none:
            return cerr
        group = self.groups.get(group_id)
        if group is None:
            return E.none if generation < 0 else E.illegal_generation
        if isinstance(group, ConsumerGroup):
            if generation < 0 and not member_id:
                return E.none if not group.members else E.unknown_member_id
            member = group.members.get(member_id)
            if member is None:
                return E.unknown_member_id
            if member.classic is not None:
                # a classic member commits with its generation (its member epoch), as in a
                # classic group; the commit keeps its session alive
                if generation != member.member_epoch:
                    return E.illegal_generation
                member.deadline_ms = mono_ms() + member.classic.session_timeout_ms
                self.wake_at(group_id, member.deadline_ms)
                return E.none
            if generation != member.member_epoch:
                return E.stale_member_epoch if kip848_errors else E.illegal_generation
            return E.none
        if group.state is GroupState.DEAD:
            return E.coordinator_not_available
        if instance_id:
            known = group.static_members.get(instance_id)
            if known is not None and known != member_id:
                return E.fenced_instance_id
        if generation < 0 and group.state is GroupState.EMPTY:
            return E.none
        if group.state is GroupState.COMPLETING_REBALANCE:
            return E.rebalance_in_progress
        if member_id not in group.members:
            return E.unknown_member_id
        if generation != group.generation:
            return E.illegal_generation
        member = group.members[member_id]
        member.deadline_ms = mono_ms() + member.session_timeout_ms
        self.wake_at(group_id, member.deadline_ms)
        return E.none

    def fetch_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None,
                      member_id: str | None = None, member_epoch: int = -1,
                      require_stable: bool = False
                      ) -> tuple[ErrorCode, list[tuple[str, int, CommittedOffset | ErrorCode | None]]]:
        """OffsetFetch of one group: (error, [(topic, partition, offset, error or None)]).

        Offsets whose records are committed (`committed_offsets`). With `require_stable`
        (KIP-447, what read_committed consumers send) a partition whose offset an open
        transaction or a commit not yet replicated may still change answers
        UNSTABLE_OFFSET_COMMIT, and the client retries, as Kafka's coordinator answers."""
        if (cerr := self.coordinator_error(group_id)) != E.none:
            return cerr, []
        group = self.groups.get(group_id)
        if member_id is not None and isinstance(group, ConsumerGroup):
            member = group.members.get(member_id)
            if member is None:
                return E.unknown_member_id, []
            if member_epoch != member.member_epoch:
                return E.stale_member_epoch, []
        committed = self.committed_offsets(group_id)
        wanted = (sorted(committed) if topics is None
                  else [(topic, p) for topic, parts in topics for p in parts])
        unstable = self._unstable(group_id) if require_stable else None
        out: list[tuple[str, int, CommittedOffset | ErrorCode | None]] = []
        for tp in wanted:
            if unstable is not None and unstable(tp):
                out.append((tp[0], tp[1], E.unstable_offset_commit))
            else:
                out.append((tp[0], tp[1], committed.get(tp)))
        return E.none, out

    def _offsets_partition(self, group_id: str) -> Any:
        """The group's `__consumer_offsets` partition here (None: not hosted)."""
        return self.rm.get(ot.TOPIC, self.store.partition_for(group_id))

    def _unstable(self, group_id: str) -> Callable[[tuple[str, int]], bool]:
        part = self._offsets_partition(group_id)
        unsettled = (set() if part is None
                     else self.offsets.unsettled(group_id, part.high_watermark))
        return lambda tp: tp in unsettled or self.store.txn.is_pending((group_id, *tp))

    def committed_offsets(self, group_id: str) -> dict[tuple[str, int], CommittedOffset]:
        """The group's offsets whose records are committed in `__consumer_offsets`: what
        reads serve (offsets.OffsetStore)."""
        part = self._offsets_partition(group_id)
        if part is None:
            return self.offsets.get(group_id)
        return self.offsets.committed(group_id, part.high_watermark)

    def _unsettled(self, group_id: str) -> Unsettled:
        """Where the group's record just appended stands: None once committed (at once on
        a partition without followers in its ISR), else (its end, the high watermark)."""
        part = self._offsets_partition(group_id)
        if part is None or part.solo:
            return None
        end, high_watermark = part.log_end_offset, part.high_watermark
        return None if high_watermark >= end else (end, high_watermark)

    def delete_offsets(self, group_id: str, topics: list[tuple[str, list[int]]]
                       ) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]:
        if (cerr := self.coordinator_error(group_id)) != E.none:
            return cerr, {}
        group = self.groups.get(group_id)
        if group is None:
            return E.group_id_not_found, {}
        if isinstance(group, ClassicGroup) and group.state is GroupState.DEAD:
            return E.group_id_not_found, {}
        if isinstance(group, ClassicGroup):
            if group.protocol_type not in (None, "", "consumer") and group.members:
                return E.non_empty_group, {}
            subscribed = group.subscribed_topics() or set()
        else:
            subscribed = group.subscribed_topics()
        out: dict[tuple[str, int], ErrorCode] = {}
        records = []
        for topic, parts in topics:
            for p in parts:
                if topic in subscribed:
                    out[(topic, p)] = E.group_subscribed_to_topic
                    continue
                out[(topic, p)] = E.none
                if (topic, p) in self.offsets.get(group_id):
                    records.append((ot.encode_key(ot.RecordKey(
                        ot.OFFSET_COMMIT_KEY, group_id, topic, p)), None))
        werr = self.store.append(group_id, records)
        if werr != E.none:
            return werr, {}
        at = self._unsettled(group_id) if records else None
        for (topic, p), code in out.items():
            if code == E.none:
                self.offsets.remove(group_id, (topic, p), at)
                self.lag.forget(group_id, topic, p)
        return E.none, out

    def expire_offsets(self, now: int) -> int:
        """offsets.retention.minutes: expire offsets (and then groups) as Kafka does."""
        removed = 0
        for gid in list(self.offsets.groups()):
            group = self.groups.get(gid)
            if isinstance(group, ConsumerGroup):
                if group.members:
                    continue
                empty_since: int | None = group.state_timestamp_ms
                subscribed = None
            elif isinstance(group, ClassicGroup):
                if group.state is GroupState.EMPTY:
                    empty_since = group.state_timestamp_ms if group.protocol_type else None
                    subscribed = None
                elif group.state is GroupState.STABLE and group.protocol_type == "consumer":
                    empty_since = None
                    subscribed = group.subscribed_topics()
                else:
                    continue
            else:
                empty_since, subscribed = None, None
            expired = self.offsets.expired(gid, now, self.config.offsets_retention_ms,
                                           empty_since, subscribed)
            if not expired:
                continue
            records: list[tuple[bytes, bytes | None]] = [
                (ot.encode_key(ot.RecordKey(ot.OFFSET_COMMIT_KEY, gid, t, p)), None)
                for t, p in expired]
            if self.store.append(gid, records) != E.none:
                continue
            at = self._unsettled(gid)
            for tp in expired:
                self.offsets.remove(gid, tp, at)
                self.lag.forget(gid, tp[0], tp[1])
            removed += len(expired)
            log.info("removed %d expired offsets of group %r", len(expired), gid)
        for gid, g in list(self.groups.items()):
            if self.offsets.has_offsets(gid):
                continue
            if isinstance(g, ClassicGroup) and g.state is GroupState.EMPTY:
                g.transition(GroupState.DEAD, now)
                self.store.append(gid, [(ot.encode_key(ot.RecordKey(ot.GROUP_METADATA_KEY, gid)),
                                         None)])
                del self.groups[gid]
        return removed

    # ================================================================ lag

    def group_lag(self, group_id: str) -> tuple[LagStatus, list[PartitionLagInfo]]:
        """Lag of every partition the group committed or is assigned, and the roll-up."""
        now = now_ms()
        group = self.groups.get(group_id)
        owners: dict[tuple[str, int], str] = {}
        if isinstance(group, ClassicGroup):
            owners = group.assigned()
        elif isinstance(group, ConsumerGroup):
            for m in group.members.values():
                for t, ps in m.assigned.items():
                    for p in ps:
                        owners[(t, p)] = m.member_id
        committed = self.offsets.get(group_id)
        rows = []
        for tp in sorted(set(committed) | set(owners)):
            part = self.rm.get(tp[0], tp[1])
            leo = part.high_watermark if part is not None else -1
            c = committed.get(tp)
            off = c.offset if c is not None else -1
            lag = max(0, leo - off) if off >= 0 and leo >= 0 else -1
            window = self.lag.get(group_id, tp[0], tp[1])
            if window is None or lag < 0:
                status = LagStatus.OK
                lag_ms = 0
            else:
                status = window.evaluate(lag, now)
                lag_ms = window.lag_age_ms(lag, now)
            rows.append(PartitionLagInfo(tp[0], tp[1], off, leo, lag, lag_ms, status,
                                         owners.get(tp)))
        return roll_up([r.status for r in rows]), rows
    # ------------------------------------------------------ transactional offsets

    def append_txn_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                           offsets: dict[tuple[str, int], tuple[int, int, str]],
                           encode: OffsetRecordEncoder) -> ErrorCode:
        """TxnOffsetCommit's write: the offsets as one transactional batch of the producer in
        the group's partition; they wait there until the transaction's marker
        (`complete_txn_offsets`)."""
        if (cerr := self.coordinator_error(group_id)) != E.none:
            return cerr
        if not offsets:
            return E.none
        now = now_ms()
        records = [Record(-1, now, *encode(group_id, t, p, off, lep, meta, now))
                   for (t, p), (off, lep, meta) in offsets.items()]
        batch = build_batch(records, producer_id=producer_id, producer_epoch=producer_epoch,
                            transactional=True)
        info = self.runtime.append_transactional(ot.TOPIC, self.store.partition_for(group_id),
                                                 batch)
        if info is None:
            return E.coordinator_not_available
        for i, ((t, p), (off, lep, meta)) in enumerate(offsets.items()):
            self.store.txn.add(producer_id, (group_id, t, p), PendingTxnOffset(
                {"offset": off, "leader_epoch": lep, "metadata": meta, "commit_timestamp": now},
                now, info.first_offset + i))
        return E.none

    def complete_txn_offsets(self, producer_id: int, commit: bool) -> int:
        """The transaction's marker is in `__consumer_offsets`: its offsets become the groups'
        committed ones (commit) or are dropped (abort); how many were applied."""
        applied = self.store.txn.complete(producer_id, commit)
        for (group_id, t, p), pending in applied:
            try:
                v = pending.value
                self.offsets.put(group_id, (t, p), CommittedOffset(
                    int(v["offset"]), int(v.get("leader_epoch", -1)), v.get("metadata") or "",
                    int(v.get("commit_timestamp", pending.timestamp))))
            except Exception:
                log.exception("making transactional offsets of group %r visible failed",
                              group_id)
        return len(applied)

    def pending_txn_offsets(self) -> int:
        """Offsets waiting for the marker of an open transaction."""
        return self.store.txn.pending_count()
