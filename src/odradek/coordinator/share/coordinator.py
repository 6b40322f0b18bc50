"""The share coordinator of one node: share groups' membership, the share-partitions this
node leads for them, their share sessions, and the share-partition state persisted in
`__share_group_state` (the persister, Kafka's ShareCoordinator with its snapshot records).

Every share-partition's state is written as one snapshot record, keyed by (group, topic
id, partition), to the partition of `__share_group_state` its key hashes to, whenever the
state changed (acquire, acknowledge, lock timeout, a member leaving); the compacted topic
keeps the last one. On load (the runtime replays the partitions this node leads) the
snapshots are read back and a share-partition resumes from its own on first use. The
topic is created when the first share group appears, so a node that never serves one does
not carry its 50 partitions.

What is not persisted, stated plainly: share-group membership (Kafka writes it to
`__consumer_offsets`); members re-join after a coordinator restart, as they do after a
session timeout. A share-partition is served by the leader of its topic-partition and its
state lives on the leader of its `__share_group_state` partition: both must be this node
(always so on a single node; in a cluster a share fetch for a partition whose state
partition is led elsewhere gets COORDINATOR_NOT_AVAILABLE, as the inter-broker
Read/WriteShareGroupState persister is not built).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from odradek.coordinator import offsets_topic as ot
from odradek.coordinator.offsets_topic import partition_for
from odradek.coordinator.runtime import (
    CoordinatorRuntime,
    Timer,
    ensure_internal_topic,
    internal_topic_spec,
)
from odradek.coordinator.share import group_records as gr
from odradek.coordinator.share.group import HeartbeatAnswer, ShareGroup, TopicLookup
from odradek.coordinator.share.partition import SharePartition
from odradek.coordinator.share.sessions import ShareSessionCache
from odradek.coordinator.share.state_log import (
    TOPIC,
    ShareKey,
    ShareSnapshot,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from odradek.protocol.errors import ErrorCode, ProtocolError
from odradek.protocol.records import decode_records

log = logging.getLogger(__name__)
E = ErrorCode
# the key of the one timer that fires at the earliest lock or member-session deadline
TIMER_KEY = (TOPIC, "deadlines")
OFFSETS_TOPIC = ot.TOPIC
_DURATION = re.compile(r"by_duration:P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?")


def _now() -> float:
    return time.time() * 1000


def _membership(group: ShareGroup, member_id: str) -> tuple[Any, ...]:
    """What the membership records of a heartbeat say: compared before and after."""
    m = group.members.get(member_id)
    member = None if m is None else (m.member_epoch, m.subscribed, m.rack_id,
                                     tuple(sorted((t, tuple(ps))
                                                  for t, ps in m.assignment.items())))
    return group.group_epoch, member


class ShareCoordinator:
    def __init__(self, runtime: CoordinatorRuntime, config: Any, topics: TopicLookup,
                 topic_name: Callable[[uuid.UUID], str | None],
                 group_overrides: Callable[[str], Mapping[str, str]],
                 create_topic: Callable[[], Any] | None = None,
                 offsets_partitions: int = 50) -> None:
        self.runtime = runtime
        self.config = config
        self.topics = topics
        self.topic_name = topic_name
        self.group_overrides = group_overrides
        self._create_topic = create_topic  # async: create __share_group_state, its count
        # __consumer_offsets' partition count: membership records go to the group's partition
        self.offsets_partitions = offsets_partitions
        self.num_partitions = 0  # of __share_group_state; 0 until it exists here
        self.groups: dict[str, ShareGroup] = {}
        self.partitions: dict[ShareKey, SharePartition] = {}
        self.snapshots: dict[ShareKey, ShareSnapshot] = {}
        self.sessions = ShareSessionCache(self._int("group.share.max.share.sessions", 2000))
        # key -> SharePartition.version last written
        self.written_version: dict[ShareKey, int] = {}
        self._ready_lock = asyncio.Lock()
        self._timer: Timer | None = None
        self._timer_at: float | None = None
        # called when records may have become available again (a release, a lock running
        # out, a member leaving): share fetches waiting for records look again
        self.release_watchers: set[Callable[[], None]] = set()

    # ------------------------------------------------------------------ config

    def _int(self, name: str, default: int) -> int:
        try:
            value = self.config.get(name)
        except Exception:
            value = None
        return default if value is None else int(value)

    def _group_int(self, group_id: str, name: str, broker_name: str, default: int) -> int:
        value = self.group_overrides(group_id).get(name)
        return int(value) if value is not None else self._int(broker_name, default)

    def lock_duration_ms(self, group_id: str) -> int:
        return self._group_int(group_id, "share.record.lock.duration.ms",
                               "group.share.record.lock.duration.ms", 30_000)

    def read_committed(self, group_id: str) -> bool:
        """The group's share.isolation.level (a group config; read_uncommitted by default)."""
        level = self.group_overrides(group_id).get("share.isolation.level")
        return level == "read_committed"

    def _auto_offset_reset(self, group_id: str) -> str:
        return str(self.group_overrides(group_id).get("share.auto.offset.reset") or "latest")

    # ------------------------------------------------------------------ readiness

    async def ensure_ready(self) -> ErrorCode:
        """Create and load `__share_group_state` on first use; COORDINATOR_NOT_AVAILABLE
        while it cannot be."""
        if self.num_partitions:
            return E.none
        async with self._ready_lock:
            if not self.num_partitions:
                if self._create_topic is None:
                    return E.coordinator_not_available
                n = await self._create_topic()
                self.runtime.register(TOPIC, n, self)
                self.num_partitions = n
                await self.runtime.follow_leadership()
                self.start()
        return E.none

    def load_existing(self, n: int) -> int:
        """At startup, when the topic exists: register and replay what this node leads.
        Blocking (runs in a thread)."""
        self.runtime.register(TOPIC, n, self)
        self.num_partitions = n
        return self.runtime.load(TOPIC, self.runtime.led_partitions(TOPIC))

    def start(self) -> None:
        """Arm the deadline timer (on the event loop, after `load_existing`)."""
        self._rearm()

    # ------------------------------------------------------------------ CoordinatorShard

    def replay_partition(self, partition: int) -> int:
        count = 0
        for header, batch in self.runtime.replay(TOPIC, partition):
            if header.attributes & 0x20:  # control batch
                continue
            for rec in decode_records(header, batch):
                if rec.key is None:
                    continue
                try:
                    key = decode_key(rec.key)
                    if rec.value is None:
                        self.snapshots.pop(key, None)
                    else:
                        self.snapshots[key] = decode_value(rec.value)
                except ProtocolError as e:
                    log.warning("skipping a bad record of %s-%d: %s", TOPIC, partition, e)
                    continue
                count += 1
        return count

    def unload_partition(self, partition: int) -> None:
        for d in (self.snapshots, self.partitions):
            for key in [k for k in d if self.state_partition(k) == partition]:
                del d[key]  # type: ignore[attr-defined]

    def partition_loaded(self, partition: int) -> None:
        pass

    def state_partition(self, key: ShareKey) -> int:
        return partition_for(key.coordinator_key(), self.num_partitions)

    def owns(self, key: ShareKey) -> ErrorCode:
        if not self.num_partitions:
            return E.coordinator_not_available
        code = self.runtime.error_for(TOPIC, self.state_partition(key))
        return E.coordinator_not_available if code == E.not_coordinator else code

    # ------------------------------------------------------------------ membership

    def heartbeat(self, group_id: str, member_id: str, member_epoch: int,
                  subscribed: list[str] | None, rack_id: str | None, client_id: str,
                  client_host: str) -> HeartbeatAnswer:
        group = self.groups.get(group_id)
        if group is None:
            if member_epoch != 0:
                return HeartbeatAnswer(E.unknown_member_id, f"Group {group_id} not found.",
                                       member_id, member_epoch, 0)
            group = self.groups[group_id] = ShareGroup(group_id)
        session = self._group_int(group_id, "share.session.timeout.ms",
                                  "group.share.session.timeout.ms", 45_000)
        interval = self._group_int(group_id, "share.heartbeat.interval.ms",
                                   "group.share.heartbeat.interval.ms", 5_000)
        before = _membership(group, member_id)
        answer = group.heartbeat(member_id, member_epoch, subscribed, rack_id, client_id,
                                 client_host, _now(), session, interval,
                                 self._int("group.share.max.size", 200), self.topics)
        if answer.error == E.none:
            self._write_membership(group, member_id, before)
        # a member leaving keeps its records until its share session closes (the client
        # leaves the group first and then sends its final acknowledgements) or their
        # locks run out, as in Kafka
        if answer.error == E.none and member_epoch != -1:
            self.arm(_now() + session)
        return answer

    def _write_membership(self, group: ShareGroup, member_id: str,
                          before: tuple[Any, ...]) -> None:
        """The records of what a heartbeat changed: the group epoch, the member's metadata
        and assignment, or its tombstones when it left."""
        if _membership(group, member_id) == before:
            return
        records = gr.group_records(group)
        m = group.members.get(member_id)
        if m is None:
            records += gr.member_tombstones(group.group_id, member_id)
        else:
            records += gr.member_records(group.group_id, m, self._topic_ids(m))
        self.append_offsets_records(group.group_id, records)

    def _topic_ids(self, m: Any) -> dict[str, uuid.UUID]:
        out = {}
        for t in m.assignment:
            info = self.topics(t)
            if info is not None:
                out[t] = info[0]
        return out

    def append_offsets_records(self, group_id: str, records: list[gr.Record]) -> None:
        result = self.runtime.append(OFFSETS_TOPIC,
                                     partition_for(group_id, self.offsets_partitions), records)
        if result.error != E.none:
            # the answer still goes out: membership is rebuilt by the members' heartbeats
            log.warning("share group %s: membership records not written: %s", group_id,
                        ErrorCode(result.error).name)

    def load_membership(self) -> int:
        """Restore share groups from the `__consumer_offsets` partitions this node leads
        (their membership records); how many records. Blocking."""
        restored: dict[str, gr.RestoredGroup] = {}
        count = 0
        for p in sorted(self.runtime.led_partitions(OFFSETS_TOPIC)):
            for key, value in gr.records_of(self.runtime.replay(OFFSETS_TOPIC, p)):
                try:
                    count += gr.apply(restored, key, value)
                except ProtocolError as e:
                    log.warning("skipping a bad share group record of %s-%d: %s",
                                OFFSETS_TOPIC, p, e)
        deadline = _now() + self._int("group.share.session.timeout.ms", 45_000)
        for g in gr.restore(restored, self.topic_name, deadline):
            g.refresh(self.topics)
            self.groups[g.group_id] = g
        return count

    # ------------------------------------------------------------------ share-partitions

    def share_partition(self, key: ShareKey, part: Any) -> SharePartition:
        """The share-partition of a group on a topic-partition this node leads (`part`):
        from its persisted snapshot, else started where share.auto.offset.reset says."""
        sp = self.partitions.get(key)
        log_start, hw = part.log_start_offset, part.high_watermark
        if sp is None:
            sp = SharePartition(
                log_start, delivery_count_limit=self._group_int(
                    key.group_id, "share.delivery.count.limit",
                    "group.share.delivery.count.limit", 5),
                max_record_locks=self._group_int(
                    key.group_id, "share.partition.max.record.locks",
                    "group.share.partition.max.record.locks", 2000),
                lock_duration_ms=self.lock_duration_ms(key.group_id))
            snap = self.snapshots.get(key)
            if snap is not None:
                sp.restore(snap.start_offset, snap.batches)
            else:
                sp.reset(self._initial_offset(key.group_id, part, log_start, hw))
                sp.version = 1  # the start offset chosen is state to write
            self.partitions[key] = sp
        sp.lock_duration_ms = self.lock_duration_ms(key.group_id)
        sp.move_start(log_start)
        return sp

    def _initial_offset(self, group_id: str, part: Any, log_start: int, hw: int) -> int:
        reset = self._auto_offset_reset(group_id)
        if reset == "earliest":
            return log_start
        m = _DURATION.fullmatch(reset)
        if m is not None:
            days, hours, minutes, seconds = (float(g) if g else 0.0 for g in m.groups())
            ago = ((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000
            # the first record at most that old (ListOffsets by timestamp), else the end
            found = part.log.offset_for_timestamp(int(time.time() * 1000 - ago))
            return min(int(found[0]), hw) if found is not None else hw
        return hw  # latest

    def persist_changed(self, keys: Iterable[ShareKey] | None = None) -> ErrorCode:
        """Write a snapshot of every share-partition (of `keys`, the ones a request touched;
        default all) whose state changed since its last."""
        worst = E.none
        for key in self.partitions if keys is None else keys:
            sp = self.partitions.get(key)
            if sp is None or self.written_version.get(key) == sp.version:
                continue
            code = self.persist(key, sp)
            if code != E.none:
                worst = code
        return worst

    def persist(self, key: ShareKey, sp: SharePartition) -> ErrorCode:
        start, batches = sp.snapshot()
        code = self.write_snapshot(key, ShareSnapshot(0, start, tuple(batches),
                                                      int(time.time() * 1000)))
        if code == E.none:
            self.written_version[key] = sp.version
        return code

    def write_snapshot(self, key: ShareKey, snap: ShareSnapshot) -> ErrorCode:
        return self._write(key, snap)

    def delete_state(self, key: ShareKey) -> ErrorCode:
        """A tombstone for the share-partition's state (it starts afresh on next use)."""
        code = self._write(key, None)
        if code == E.none:
            self.partitions.pop(key, None)
            self.written_version.pop(key, None)
        return code

    def _write(self, key: ShareKey, snap: ShareSnapshot | None) -> ErrorCode:
        if self.owns(key) != E.none:
            return E.coordinator_not_available
        value = None if snap is None else encode_value(snap)
        result = self.runtime.append(TOPIC, self.state_partition(key),
                                     [(encode_key(key), value)])
        if result.error != E.none:
            return ErrorCode(result.error)
        if snap is None:
            self.snapshots.pop(key, None)
        else:
            self.snapshots[key] = snap
        return E.none

    # ------------------------------------------------------------------ timers

    def arm(self, at_ms: float) -> None:
        """Make sure the deadline timer fires by `at_ms` (a new lock or member session)."""
        if self._timer is not None and not self._timer.cancelled() \
                and self._timer_at is not None and self._timer_at <= at_ms:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = at_ms
        self._timer = self.runtime.scheduler.call_later(
            TIMER_KEY, max(0.0, at_ms - _now()) / 1000, self._fire)

    def _fire(self) -> None:
        self._timer = self._timer_at = None
        try:
            self.sweep()
        finally:
            self._rearm()

    def _rearm(self) -> None:
        deadlines = [d for d in (g.next_deadline() for g in self.groups.values())
                     if d is not None]
        deadlines += [d for d in (sp.next_lock_deadline() for sp in self.partitions.values())
                      if d is not None]
        if deadlines:
            self.arm(min(deadlines))

    def notify_released(self) -> None:
        for wake in list(self.release_watchers):
            wake()

    def sweep(self) -> None:
        """Expire members whose session ended (their records are released) and acquisition
        locks that ran out, then persist what changed. Runs at the earliest deadline."""
        now = _now()
        released = 0
        for group in list(self.groups.values()):
            gone = group.expire(now, self.topics)
            if gone:
                self.append_offsets_records(group.group_id, gr.group_records(group) + [
                    r for m in gone for r in gr.member_tombstones(group.group_id, m)])
            for member_id in gone:
                log.info("share group %s: member %s session expired", group.group_id,
                         member_id)
                self.sessions.drop_member(group.group_id, member_id)
                for key, sp in self.partitions.items():
                    if key.group_id == group.group_id:
                        released += sp.release_member(member_id)
        for sp in self.partitions.values():
            deadline = sp.next_lock_deadline()
            if deadline is not None and deadline <= now:
                released += sp.expire_locks(now)
        self.persist_changed()
        if released:
            self.notify_released()


async def create_state_topic(runtime: CoordinatorRuntime, config: Any, image: Callable[[], Any],
                             create_topics: Any, live_brokers: Callable[[], int]) -> int:
    """Create `__share_group_state` (Kafka's share.coordinator.state.topic.* configs)."""
    def get(name: str, default: int) -> int:
        try:
            value = config.get(name)
        except Exception:
            value = None
        return default if value is None else int(value)

    spec = internal_topic_spec(
        TOPIC, get("share.coordinator.state.topic.num.partitions", 50),
        get("share.coordinator.state.topic.replication.factor", 3), live_brokers(),
        {"segment.bytes": str(get("share.coordinator.state.topic.segment.bytes", 104857600))})
    return await ensure_internal_topic(image, create_topics, spec)
