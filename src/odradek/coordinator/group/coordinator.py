"""The group coordinator: classic and KIP-848 groups and their committed offsets, for the
`__consumer_offsets` partitions this node owns.

It is a shard of the coordinator runtime (coordinator/runtime.py), which loads a partition
when this node becomes its leader, unloads it when it resigns, writes its records and runs
its timers. The work is split along Kafka's seams, one mixin per module:

- loader.py — replaying a partition into groups and offsets;
- classic_protocol.py — JoinGroup/SyncGroup/Heartbeat/LeaveGroup and rebalances;
- consumer_protocol.py — KIP-848 ConsumerGroupHeartbeat;
- classic_members.py — classic members in KIP-848 groups and the online conversions
  between the protocols (rules in migration.py);
- offset_manager.py — offset commits, fetches, deletion, expiry, transactional offsets, lag.

This module holds what they share: ownership, life, sweeps and the admin requests.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from odradek.coordinator import offsets_topic as ot
from odradek.coordinator.deadlines import DeadlineTimer
from odradek.coordinator.group.api import (
    CONSUMER_STATE_NAMES,
    NEW_MEMBER_JOIN_TIMEOUT_MS,
    SWEEP_INTERVAL_S,
    Group,
    GroupConfig,
    HeartbeatResult,
    JoinRequest,
    JoinResult,
    OffsetCommitEntry,
    PartitionLagInfo,
    SyncResult,
    TopicLookup,
    mono_ms,
    now_ms,
)
from odradek.coordinator.group.assignors import ASSIGNORS
from odradek.coordinator.group.classic import ClassicGroup, GroupState
from odradek.coordinator.group.classic_members import ClassicMembers
from odradek.coordinator.group.classic_protocol import ClassicProtocol
from odradek.coordinator.group.consumer import ConsumerGroup
from odradek.coordinator.group.consumer_protocol import ConsumerProtocol
from odradek.coordinator.group.lag import LagTracker
from odradek.coordinator.group.loader import GroupLoader
from odradek.coordinator.group.offset_manager import OffsetManager
from odradek.coordinator.group.offsets import OffsetStore
from odradek.coordinator.group.store import OffsetsTopicStore
from odradek.coordinator.runtime import CoordinatorRuntime, Timer
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

E = ErrorCode
SWEEP_JOB = "group-sessions"
EXPIRY_JOB = "group-offsets-expiry"
DEADLINE_KEY = ("group-deadlines", ot.TOPIC)  # never a partition's key: no unload cancels it


class GroupCoordinator(GroupLoader, ClassicProtocol, ConsumerProtocol, ClassicMembers,
                       OffsetManager):
    def __init__(self, replica_manager: Any, config: GroupConfig, topics: TopicLookup,
                 topic_names: Callable[[uuid.UUID], str | None],
                 all_topics: Callable[[], Iterable[str]] | None = None,
                 runtime: CoordinatorRuntime | None = None) -> None:
        self.rm = replica_manager
        self.runtime = runtime if runtime is not None else CoordinatorRuntime(replica_manager)
        self.all_topics = all_topics or (lambda: ())
        self.config = config
        self.group_overrides = lambda _group_id: {}
        # sessions, revocation and join deadlines fire when due (coordinator/deadlines.py)
        self.deadlines = DeadlineTimer(mono_ms, self._deadline_timer, self.expire_due)
        self.topics = topics
        self.topic_names = topic_names
        self.store = OffsetsTopicStore(self.runtime, config.num_partitions)
        self.groups: dict[str, Group] = {}
        self.offsets = OffsetStore()
        self.lag = LagTracker()
        self.runtime.register(ot.TOPIC, config.num_partitions, self)

    # ------------------------------------------------------------ ownership

    @property
    def owned(self) -> set[int]:
        """`__consumer_offsets` partitions this node coordinates (led and replayed)."""
        return self.runtime.owned(ot.TOPIC)

    @property
    def loading(self) -> set[int]:
        """Partitions this node leads but is still replaying."""
        return self.runtime.loading(ot.TOPIC)

    def load(self, partitions: Iterable[int] | None = None) -> int:
        """Replay `__consumer_offsets` partitions (default: every one this node leads) into
        memory; they are owned afterwards. Blocking: call from a thread at start."""
        ps = self.led_partitions() if partitions is None else set(partitions)
        return int(self.runtime.load(ot.TOPIC, ps))

    def led_partitions(self) -> set[int]:
        """The `__consumer_offsets` partitions hosted and led by this node."""
        return self.runtime.led_partitions(ot.TOPIC)

    def begin_loading(self, partitions: Iterable[int]) -> None:
        """This node became the leader of these partitions: requests for their groups get
        COORDINATOR_LOAD_IN_PROGRESS until `load(partitions)` has replayed them."""
        self.runtime.begin_loading(ot.TOPIC, partitions)

    def resign(self, partitions: Iterable[int]) -> None:
        """This node no longer leads these partitions: forget their groups and offsets
        (Kafka's onResignation); their requests get NOT_COORDINATOR."""
        self.runtime.unload(ot.TOPIC, partitions)

    async def on_become_leader(self, partition: int, epoch: int) -> bool:
        """Leadership of a `__consumer_offsets` partition moved here: load it."""
        return await self.runtime.on_become_leader(ot.TOPIC, partition, epoch)

    async def on_resign(self, partition: int, epoch: int | None = None) -> bool:
        """Leadership of a `__consumer_offsets` partition moved away: unload it."""
        return await self.runtime.on_resign(ot.TOPIC, partition, epoch)

    def unload_partition(self, partition: int) -> None:
        """The runtime unloads the partition: waiting JoinGroup/SyncGroup requests of its
        groups are answered NOT_COORDINATOR, their groups and offsets forgotten."""
        for gid in [g for g in self.groups if self.store.partition_for(g) == partition]:
            g = self.groups.pop(gid)
            if isinstance(g, ClassicGroup):
                self._fail_waiters(g)
        for gid in self.offsets.groups():
            if self.store.partition_for(gid) == partition:
                self.offsets.remove_group(gid)
                self.lag.forget(gid)
        self.store.drop_partition(partition)

    def partition_loaded(self, partition: int) -> None:
        """Nothing waits on a replayed partition: sessions restart from the replay, and their
        deadlines go to the deadline timer."""
        for gid, g in self.groups.items():
            if self.store.partition_for(gid) == partition:
                for m in g.members.values():
                    self.wake_at(gid, m.deadline_ms)

    def is_coordinator_for(self, group_id: str) -> bool:
        """This node is the group's coordinator (its `__consumer_offsets` partition is led
        here), loaded or still loading: what FindCoordinator answers."""
        p = self.store.partition_for(group_id)
        return p in self.owned or p in self.loading

    def coordinator_error(self, group_id: str) -> ErrorCode:
        """Kafka's coordinator checks for a request about a group: COORDINATOR_LOAD_IN_PROGRESS
        while its partition is being replayed, NOT_COORDINATOR when another node (or none)
        leads it, NONE when this node serves it."""
        return self.runtime.error_for(ot.TOPIC, self.store.partition_for(group_id))

    def call_later(self, group_id: str, delay_s: float, fn: Callable[..., Any],
                   *args: Any) -> Timer:
        """A timer of the group, cancelled when its partition is unloaded."""
        key = (ot.TOPIC, self.store.partition_for(group_id))
        return self.runtime.scheduler.call_later(key, delay_s, fn, *args)

    def wake_at(self, group_id: str, deadline_ms: float) -> None:
        """Check `group_id` when monotonic time reaches `deadline_ms` (a member's session,
        revocation or join deadline was set)."""
        self.deadlines.add(group_id, deadline_ms)

    def expire_due(self, group_ids: list[Any], mono: float) -> None:
        """The deadline timer's work: expire what ran out by `mono` in these groups, then
        queue each group's next deadline (the timer keeps only a key's earliest)."""
        for gid in group_ids:
            g = self.groups.get(gid)
            if isinstance(g, ClassicGroup):
                self._sweep_classic(g, mono)
            elif g is not None:
                self._sweep_consumer(g, mono)
            else:
                continue
            later = [d for d in _deadlines(g) if d > mono]
            if later:
                self.wake_at(gid, min(later))

    def _deadline_timer(self, delay_s: float, fire: Callable[[], None]) -> Timer:
        return self.runtime.scheduler.call_later(DEADLINE_KEY, delay_s, fire)

    # ------------------------------------------------------------------ life

    def start(self) -> None:
        """Start the timers: session sweeps, and offset expiry from the first sweep on."""
        scheduler = self.runtime.scheduler
        self.deadlines.start()
        # a backstop, not the clock of sessions: deadlines fire on their own timer
        scheduler.every(SWEEP_JOB, SWEEP_INTERVAL_S, lambda: self.sweep(mono_ms()))
        scheduler.every(EXPIRY_JOB, self.config.offsets_retention_check_interval_ms / 1000,
                        lambda: self.expire_offsets(now_ms()), first_delay_s=SWEEP_INTERVAL_S)
        scheduler.start()

    async def stop(self) -> None:
        """Stop the timers and answer every waiting JoinGroup/SyncGroup NOT_COORDINATOR."""
        scheduler = self.runtime.scheduler
        for job in (SWEEP_JOB, EXPIRY_JOB):
            scheduler.cancel_job(job)
        self.deadlines.stop()
        for p in range(self.store.num_partitions):
            scheduler.cancel_all((ot.TOPIC, p))
        for g in self.groups.values():
            if isinstance(g, ClassicGroup):
                self._fail_waiters(g)

    @staticmethod
    def _fail_waiters(g: ClassicGroup) -> None:
        GroupCoordinator._fail_waiters_with(g, E.not_coordinator)

    @staticmethod
    def _fail_waiters_with(g: ClassicGroup, code: ErrorCode) -> None:
        """Answer every waiting JoinGroup and SyncGroup of `g` with `code`."""
        if g.join_timer is not None:
            g.join_timer.cancel()
            g.join_timer = None
        for m in g.members.values():
            if m.awaiting_join:
                m.join_waiter.set_result(JoinResult(code, m.member_id))
            if m.awaiting_sync:
                m.sync_waiter.set_result(SyncResult(code))

    def sweep(self, mono: float) -> None:
        """Expire the sessions (and revocation deadlines) that ran out by `mono`."""
        for g in list(self.groups.values()):
            if isinstance(g, ClassicGroup):
                self._sweep_classic(g, mono)
            else:
                self._sweep_consumer(g, mono)

    # ================================================================ admin

    def describe_group(self, group_id: str) -> tuple[ErrorCode, Group | None]:
        if (cerr := self.coordinator_error(group_id)) != E.none:
            return cerr, None
        return E.none, self.groups.get(group_id)

    def list_groups(self, states: set[str] | None = None,
                    types: set[str] | None = None) -> list[tuple[str, str, str, str]]:
        """(group id, protocol type, state, type) of every group."""
        out = []
        for gid, g in self.groups.items():
            if isinstance(g, ClassicGroup):
                if g.state is GroupState.DEAD:
                    continue
                row = (gid, g.protocol_type or "", g.state.value, "classic")
            else:
                row = (gid, "consumer", CONSUMER_STATE_NAMES[g.state], "consumer")
            if states and row[2].lower() not in states:
                continue
            if types and row[3] not in types:
                continue
            out.append(row)
        return out

    def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        out: dict[str, ErrorCode] = {}
        for gid in group_ids:
            if (cerr := self.coordinator_error(gid)) != E.none:
                out[gid] = cerr
                continue
            g = self.groups.get(gid)
            if g is None or (isinstance(g, ClassicGroup) and g.state is GroupState.DEAD):
                out[gid] = E.group_id_not_found
                continue
            if g.members:
                out[gid] = E.non_empty_group
                continue
            records: list[tuple[bytes, bytes | None]] = [
                (ot.encode_key(ot.RecordKey(ot.OFFSET_COMMIT_KEY, gid, t, p)), None)
                for t, p in self.offsets.get(gid)]
            if isinstance(g, ClassicGroup):
                records.append((ot.encode_key(ot.RecordKey(ot.GROUP_METADATA_KEY, gid)), None))
            else:
                records.extend(self._consumer_tombstones(g))
            err = self.store.append(gid, records)
            if err != E.none:
                out[gid] = err
                continue
            self.offsets.remove_group(gid, self._unsettled(gid))
            self.lag.forget(gid)
            del self.groups[gid]
            log.info("deleted group %r", gid)
            out[gid] = E.none
        return out


__all__ = ["ASSIGNORS", "CONSUMER_STATE_NAMES", "NEW_MEMBER_JOIN_TIMEOUT_MS", "ConsumerGroup",
           "GroupConfig", "GroupCoordinator", "HeartbeatResult", "JoinRequest", "JoinResult",
           "OffsetCommitEntry", "PartitionLagInfo", "SyncResult", "mono_ms", "now_ms"]


def _deadlines(g: Group) -> list[float]:
    # every deadline a group's sweep acts on: sessions, KIP-848 revocations, and the joins of
    # classic members still pending
    out = [m.deadline_ms for m in g.members.values()]
    if isinstance(g, ClassicGroup):
        out += g.pending_members.values()
    else:
        out += [d for m in g.members.values()
                for d in (m.revoke_deadline_ms, m.sync_deadline_ms) if d is not None]
    return out
