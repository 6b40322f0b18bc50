"""The share coordinator of one node: share groups' membership, the share-partitions this
node leads for them (Kafka's SharePartitionManager), their share sessions, and the
share-partition state of the `__share_group_state` partitions this node leads (the store,
Kafka's ShareCoordinatorShard: state_store.py).

A share-partition is served by the leader of its topic-partition. Its state lives at the
share coordinator of its key, the leader of the `__share_group_state` partition the key
hashes to, which may be another node: the share-partition leader reads the state when it
first serves the share-partition (or when its leader epoch changed) and writes a snapshot
of its window whenever the state changed (acquire, acknowledge, lock timeout, a member
leaving), through the persister (persister.py), which calls the store here or sends the
persister RPCs to the node that serves the key. Writes of one share-partition go one at a
time, each with the window as it is when it is sent, so an older window never lands after
a newer one. The topic is created when the first share group appears, so a node that never
serves one does not carry its 50 partitions; a node that finds it in the metadata registers
it then.

Share-group membership is written to `__consumer_offsets` (Kafka's share-group records) by
the group's coordinator and read back when this node becomes the leader of the group's
partition (at start and on a later leadership move), and dropped when it resigns.
"""

from __future__ import annotations

import asyncio
import contextvars
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
from odradek.coordinator.share.persister import SharePersister
from odradek.coordinator.share.sessions import ShareSessionCache
from odradek.coordinator.share.state_log import TOPIC, ShareKey, ShareSnapshot
from odradek.coordinator.share.state_store import (
    UNINITIALIZED_START_OFFSET,
    Answer,
    ShareStateStore,
)
from odradek.protocol.errors import ErrorCode, ProtocolError

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
        self.groups: dict[str, ShareGroup] = {}
        self.partitions: dict[ShareKey, SharePartition] = {}
        # key -> (state epoch, leader epoch) the share-partition was read with
        self.epochs: dict[ShareKey, tuple[int, int]] = {}
        self._loading: dict[ShareKey, asyncio.Future[ErrorCode]] = {}
        self._write_locks: dict[ShareKey, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

        def partition_exists(topic_id: uuid.UUID, partition: int) -> bool:
            name = topic_name(topic_id)
            info = None if name is None else topics(name)
            return info is not None and 0 <= partition < info[1]

        self.store = ShareStateStore(runtime, partition_exists)
        # the node's persister (startup wires the inter-broker channels in a cluster)
        self.persister = SharePersister(self.store, int(getattr(runtime.rm, "node_id", -1)),
                                        lambda p: None)
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

    @property
    def num_partitions(self) -> int:
        return self.store.num_partitions

    @property
    def snapshots(self) -> dict[ShareKey, ShareSnapshot]:
        """The persisted state of the keys this node coordinates."""
        return self.store.snapshots

    async def ensure_ready(self) -> ErrorCode:
        """Know `__share_group_state` (register it, and load what this node leads, when the
        metadata has it; create it on first use otherwise); COORDINATOR_NOT_AVAILABLE while
        it cannot be."""
        if self.store.num_partitions:
            return E.none
        async with self._ready_lock:
            if not self.store.num_partitions:
                info = self.topics(TOPIC)
                if info is not None:
                    n = info[1]
                elif self._create_topic is None:
                    return E.coordinator_not_available
                else:
                    n = await self._create_topic()
                self.store.register(n)
                await self.runtime.follow_leadership()
                self.start()
        return E.none

    def load_existing(self, n: int) -> int:
        """At startup, when the topic exists: register and replay what this node leads.
        Blocking (runs in a thread)."""
        self.store.register(n)
        return self.runtime.load(TOPIC, self.runtime.led_partitions(TOPIC))

    def start(self) -> None:
        """Arm the deadline timer (on the event loop, after `load_existing`)."""
        self._rearm()

    def state_partition(self, key: ShareKey) -> int:
        return self.store.state_partition(key)

    def owns(self, key: ShareKey) -> ErrorCode:
        """Whether this node coordinates the key's state (COORDINATOR_NOT_AVAILABLE if not:
        an admin path that needs the state here)."""
        code = self.store.owns(key)
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
        if group.note_initialized():
            records += gr.state_partition_metadata(group)
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

    def load_membership(self, partitions: Iterable[int] | None = None) -> int:
        """Restore share groups from `__consumer_offsets` partitions this node leads (their
        membership records; default every one led); how many records. Blocking."""
        restored: dict[str, gr.RestoredGroup] = {}
        count = 0
        ps = self.runtime.led_partitions(OFFSETS_TOPIC) if partitions is None else partitions
        for p in sorted(ps):
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

    def follow_membership(self) -> None:
        """Reload share groups when this node becomes the leader of their
        `__consumer_offsets` partition after start, and drop them when it resigns."""
        self.runtime.watch(OFFSETS_TOPIC, self._offsets_loaded, self._offsets_unloaded)

    def _offsets_loaded(self, partition: int) -> None:
        async def reload() -> None:
            try:
                n = await asyncio.to_thread(self.load_membership, [partition])
            except Exception:
                log.exception("reloading share groups of %s-%d failed", OFFSETS_TOPIC,
                              partition)
                return
            if n:
                log.info("share groups of %s-%d reloaded (%d records)", OFFSETS_TOPIC,
                         partition, n)
                self._rearm()

        task = asyncio.get_running_loop().create_task(reload(), context=contextvars.Context())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _offsets_unloaded(self, partition: int) -> None:
        for gid in [g for g in self.groups
                    if partition_for(g, self.offsets_partitions) == partition]:
            del self.groups[gid]

    # ------------------------------------------------------------------ share-partitions

    def _new_partition(self, key: ShareKey, start: int) -> SharePartition:
        return SharePartition(
            start, delivery_count_limit=self._group_int(
                key.group_id, "share.delivery.count.limit",
                "group.share.delivery.count.limit", 5),
            max_record_locks=self._group_int(
                key.group_id, "share.partition.max.record.locks",
                "group.share.partition.max.record.locks", 2000),
            lock_duration_ms=self.lock_duration_ms(key.group_id))

    def loaded(self, key: ShareKey, part: Any) -> bool:
        """Whether the share-partition is in memory for the partition's current leader
        epoch (a leadership that moved away and back reads the state again)."""
        got = self.epochs.get(key)
        return key in self.partitions and got is not None and got[1] == int(part.leader_epoch)

    async def load(self, key: ShareKey, part: Any) -> ErrorCode:
        """Read the share-partition's state from its share coordinator (once per leader
        epoch of the topic-partition `part` this node leads), or start it where
        share.auto.offset.reset says when it has none."""
        if self.loaded(key, part):
            return E.none
        pending = self._loading.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        self._loading[key] = fut
        try:
            code = await self._read(key, part)
        except BaseException:
            fut.set_result(E.coordinator_not_available)
            raise
        finally:
            self._loading.pop(key, None)
        if not fut.done():
            fut.set_result(code)
        return code

    async def _read(self, key: ShareKey, part: Any) -> ErrorCode:
        epoch = int(part.leader_epoch)
        got = await self.persister.read(key, epoch)
        if got.error != E.none:
            log.info("share-partition %s: state not read: %s %s", key,
                     ErrorCode(got.error).name, got.message or "")
            return got.error
        log_start, hw = part.log_start_offset, part.high_watermark
        if got.start_offset == UNINITIALIZED_START_OFFSET:
            sp = self._new_partition(key, log_start)
            sp.reset(self._initial_offset(key.group_id, part, log_start, hw))
            sp.version = 1  # the start offset chosen is state to write
        else:
            sp = self._new_partition(key, max(0, got.start_offset))
            sp.restore(got.start_offset, got.batches)
        self.partitions[key] = sp
        self.epochs[key] = (got.state_epoch, epoch)
        self.written_version.pop(key, None)
        return E.none

    def share_partition(self, key: ShareKey, part: Any) -> SharePartition:
        """The loaded share-partition of a group on a topic-partition this node leads
        (`part`; `load` first)."""
        sp = self.partitions[key]
        sp.lock_duration_ms = self.lock_duration_ms(key.group_id)
        sp.move_start(part.log_start_offset)
        return sp

    def forget(self, key: ShareKey) -> None:
        """Drop the share-partition from memory: the next use reads its state again."""
        self.partitions.pop(key, None)
        self.epochs.pop(key, None)
        self.written_version.pop(key, None)

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

    async def persist_changed(self, keys: Iterable[ShareKey] | None = None) -> ErrorCode:
        """Write a snapshot of every share-partition (of `keys`, the ones a request touched;
        default all) whose state changed since its last; the worst error."""
        worst = E.none
        for key in list(self.partitions if keys is None else keys):
            sp = self.partitions.get(key)
            if sp is None or self.written_version.get(key) == sp.version:
                continue
            code = await self.persist(key)
            if code != E.none:
                worst = code
        return worst

    async def persist(self, key: ShareKey) -> ErrorCode:
        lock = self._write_locks.setdefault(key, asyncio.Lock())
        async with lock:
            sp = self.partitions.get(key)
            epochs = self.epochs.get(key)
            if sp is None or epochs is None:
                return E.none  # forgotten meanwhile (fenced, or reset by an admin)
            version = sp.version
            if self.written_version.get(key) == version:
                return E.none  # a write that waited on the lock wrote it already
            start, batches = sp.snapshot()
            got = await self.persister.write(key, epochs[0], epochs[1], start, tuple(batches))
            if got.error == E.none:
                if self.partitions.get(key) is sp:
                    self.written_version[key] = version
            elif got.error in (E.fenced_state_epoch, E.fenced_leader_epoch):
                # an admin moved the start offset, or another leader took over: this window
                # is stale; the next use reads the state again
                log.info("share-partition %s: write fenced (%s); reading it again", key,
                         ErrorCode(got.error).name)
                if self.partitions.get(key) is sp:
                    self.forget(key)
            return got.error

    def persist_later(self) -> None:
        """Persist what changed in a task of its own (a timer's sweep): its writes are no
        request's writes."""
        task = asyncio.get_running_loop().create_task(self.persist_changed(),
                                                      context=contextvars.Context())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def reset_state(self, key: ShareKey, offset: int) -> Answer:
        """An admin's new start offset: InitializeShareGroupState with the next state epoch
        (fencing every leader's older window), and the share-partition read again here."""
        now = await self.persister.summary(key)
        if now.error != E.none:
            return now
        got = await self.persister.initialize(key, now.state_epoch + 1, offset)
        if got.error == E.none:
            self.forget(key)
        return got

    async def delete_state(self, key: ShareKey) -> ErrorCode:
        """A tombstone for the share-partition's state (it starts afresh on next use)."""
        got = await self.persister.delete(key)
        if got.error == E.none:
            self.forget(key)
        return got.error

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
        self.persist_later()
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
