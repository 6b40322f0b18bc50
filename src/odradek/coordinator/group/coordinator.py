"""The group coordinator: classic and KIP-848 groups, committed offsets, timers.

The asyncio driver around the state in classic.py/consumer.py. A JoinGroup
or SyncGroup that must wait is answered through a Future; session timeouts
are found by a sweep, rebalance deadlines by loop timers. Every state change
that must survive a restart is appended to `__consumer_offsets` before the
answer goes out (a page-cache append, nothing else touches the disk here).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from odradek.coordinator import offsets_topic as ot
from odradek.coordinator.group.assignors import ASSIGNORS
from odradek.coordinator.group.classic import ClassicGroup, ClassicMember, GroupState
from odradek.coordinator.group.consumer import ConsumerGroup, ConsumerMember
from odradek.coordinator.group.lag import LagStatus, LagTracker, roll_up
from odradek.coordinator.group.offsets import (
    OFFSET_METADATA_MAX_BYTES,
    CommittedOffset,
    OffsetStore,
)
from odradek.coordinator.group.store import OffsetsTopicStore
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

E = ErrorCode
SWEEP_INTERVAL_S = 0.1
# a new member that never completes its first join is dropped after this (Kafka's value)
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000


def now_ms() -> int:
    return int(time.time() * 1000)


def mono_ms() -> float:
    return time.monotonic() * 1000


@dataclass(slots=True)
class GroupConfig:
    num_partitions: int = 50
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    offsets_retention_ms: int = 10_080 * 60_000
    offsets_retention_check_interval_ms: int = 600_000
    consumer_session_timeout_ms: int = 45_000
    consumer_heartbeat_interval_ms: int = 5_000
    consumer_assignors: list[str] = field(default_factory=lambda: ["uniform", "range"])

    @classmethod
    def from_broker_config(cls, config: Any) -> GroupConfig:
        def get(name: str, default: int) -> int:
            try:
                value = config.get(name)
            except Exception:
                value = None
            if value is None:
                value = config.values.get(name, default) if hasattr(config, "values") else default
            return int(value)

        assignors = default = ["uniform", "range"]
        raw = getattr(config, "values", {}).get("group.consumer.assignors")
        if raw:
            assignors = [a.strip().rsplit(".", 1)[-1].replace("Assignor", "").lower()
                         for a in raw.split(",") if a.strip()] or default
        return cls(
            num_partitions=get("offsets.topic.num.partitions", 50),
            initial_rebalance_delay_ms=get("group.initial.rebalance.delay.ms", 3000),
            min_session_timeout_ms=get("group.min.session.timeout.ms", 6000),
            max_session_timeout_ms=get("group.max.session.timeout.ms", 1_800_000),
            offsets_retention_ms=get("offsets.retention.minutes", 10_080) * 60_000,
            offsets_retention_check_interval_ms=get("offsets.retention.check.interval.ms",
                                                    600_000),
            consumer_session_timeout_ms=get("group.consumer.session.timeout.ms", 45_000),
            consumer_heartbeat_interval_ms=get("group.consumer.heartbeat.interval.ms", 5_000),
            consumer_assignors=assignors,
        )


@dataclass(slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool


@dataclass(slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass(slots=True)
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(slots=True)
class OffsetCommitEntry:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


@dataclass(slots=True)
class HeartbeatResult:
    """ConsumerGroupHeartbeat's answer; assignment is topic name -> partitions."""
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: dict[str, list[int]] | None = None


@dataclass(slots=True)
class PartitionLagInfo:
    topic: str
    partition: int
    committed: int  # -1: none
    log_end_offset: int
    lag: int
    lag_ms: int
    status: LagStatus
    member_id: str | None = None


Group = ClassicGroup | ConsumerGroup

# TopicInfo lookup: name -> (topic id, partition count) or None
TopicLookup = Callable[[str], tuple[uuid.UUID, int] | None]


class GroupCoordinator:
    def __init__(self, replica_manager: Any, config: GroupConfig, topics: TopicLookup,
                 topic_names: Callable[[uuid.UUID], str | None],
                 all_topics: Callable[[], Iterable[str]] | None = None) -> None:
        self.rm = replica_manager
        self.all_topics = all_topics or (lambda: ())
        self.config = config
        self.topics = topics
        self.topic_names = topic_names
        self.store = OffsetsTopicStore(replica_manager, config.num_partitions)
        self.groups: dict[str, Group] = {}
        self.offsets = OffsetStore()
        self.lag = LagTracker()
        self._sweeper: asyncio.Task[None] | None = None
        self._next_expiry_check = 0.0
        self.loaded = False
        # __consumer_offsets partitions this node coordinates (led and replayed), and those it
        # leads but is still replaying
        self.owned: set[int] = set()
        self.loading: set[int] = set()

    # ------------------------------------------------------------------ life

    def load(self, partitions: Iterable[int] | None = None) -> int:
        """Replay `__consumer_offsets` partitions (default: every one this node leads) into
        memory; they are owned afterwards. Blocking: call from a thread at start."""
        ps = self.led_partitions() if partitions is None else set(partitions)
        self.loading |= ps
        count = 0
        members: dict[str, dict[str, dict[str, Any]]] = {}
        current: dict[str, dict[str, dict[str, Any]]] = {}
        targets: dict[str, dict[str, dict[str, Any]]] = {}
        for key, value, _ts in self.store.replay(sorted(ps)):
            count += 1
            self._apply_record(key, value, members, current, targets)
        for gid, g in self.groups.items():
            if isinstance(g, ConsumerGroup) and self.store.partition_for(gid) in ps:
                self._restore_consumer_group(g, members.get(gid, {}), current.get(gid, {}),
                                             targets.get(gid, {}))
        self.owned |= ps
        self.loading -= ps
        self.loaded = True
        return count

    def _apply_record(self, key: ot.RecordKey, value: dict[str, Any] | None,
                      members: dict[str, Any], current: dict[str, Any],
                      targets: dict[str, Any]) -> None:
        gid = key.group
        if key.kind == ot.OFFSET_COMMIT_KEY:
            tp = (key.topic or "", key.partition)
            if value is None:
                self.offsets.remove(gid, tp)
                return
            expire = value.get("expire_timestamp")
            self.offsets.put(gid, tp, CommittedOffset(
                value["offset"], value.get("leader_epoch", -1), value.get("metadata") or "",
                value.get("commit_timestamp", -1), expire if expire and expire > 0 else None))
            if gid not in self.groups:
                self.groups[gid] = ClassicGroup(gid, state_timestamp_ms=value.get(
                    "commit_timestamp", -1))
        elif key.kind == ot.GROUP_METADATA_KEY:
            if value is None:
                g = self.groups.get(gid)
                if isinstance(g, ClassicGroup):
                    del self.groups[gid]
                return
            g = ClassicGroup(gid)
            g.generation = value["generation"]
            g.protocol_type = value["protocol_type"] or None
            g.protocol_name = value.get("protocol")
            g.leader_id = value.get("leader")
            g.state_timestamp_ms = value.get("current_state_timestamp", -1)
            deadline = mono_ms()
            for m in value.get("members", []):
                member = ClassicMember(
                    m["member_id"], m.get("group_instance_id"), m["client_id"], m["client_host"],
                    m.get("rebalance_timeout", m["session_timeout"]), m["session_timeout"],
                    g.protocol_type or "", [(g.protocol_name or "", m["subscription"])],
                    m["assignment"])
                member.deadline_ms = deadline + member.session_timeout_ms
                g.members[member.member_id] = member
                if member.group_instance_id:
                    g.static_members[member.group_instance_id] = member.member_id
            g.state = GroupState.STABLE if g.members else GroupState.EMPTY
            self.groups[gid] = g
        elif key.kind == ot.CONSUMER_GROUP_METADATA_KEY:
            if value is None:
                if isinstance(self.groups.get(gid), ConsumerGroup):
                    del self.groups[gid]
                members.pop(gid, None)
                return
            g2 = self.groups.get(gid)
            if not isinstance(g2, ConsumerGroup):
                g2 = self.groups[gid] = ConsumerGroup(gid)
            g2.group_epoch = value["epoch"]
        elif key.kind == ot.CONSUMER_GROUP_MEMBER_METADATA_KEY:
            bucket = members.setdefault(gid, {})
            if value is None:
                bucket.pop(key.member_id, None)
            else:
                bucket[key.member_id] = value
        elif key.kind == ot.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY:
            bucket = current.setdefault(gid, {})
            if value is None:
                bucket.pop(key.member_id, None)
            else:
                bucket[key.member_id] = value
        elif key.kind == ot.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY:
            bucket = targets.setdefault(gid, {})
            if value is None:
                bucket.pop(key.member_id, None)
            else:
                bucket[key.member_id] = value
        elif key.kind == ot.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY:
            g3 = self.groups.get(gid)
            if isinstance(g3, ConsumerGroup) and value is not None:
                g3.assignment_epoch = value["assignment_epoch"]

    def _by_id(self, tps: list[dict[str, Any]]) -> dict[str, set[int]]:
        out: dict[str, set[int]] = {}
        for tp in tps:
            name = self.topic_names(tp["topic_id"])
            if name is not None:
                out.setdefault(name, set()).update(tp["partitions"])
        return out

    def _restore_consumer_group(self, g: ConsumerGroup, members: dict[str, Any],
                                current: dict[str, Any], targets: dict[str, Any]) -> None:
        deadline = mono_ms() + self.config.consumer_session_timeout_ms
        for mid, v in members.items():
            m = ConsumerMember(mid, v.get("instance_id"), v.get("rack_id"), v["client_id"],
                               v["client_host"], list(v["subscribed_topic_names"]),
                               v.get("server_assignor"), v.get("rebalance_timeout_ms", 300_000),
                               v.get("subscribed_topic_regex"))
            m.resolved_topics = sorted(set(m.subscribed_topic_names)
                                       | self._matching(m.subscribed_topic_regex))
            m.deadline_ms = deadline
            cur = current.get(mid)
            if cur is not None:
                m.member_epoch = cur["member_epoch"]
                m.previous_member_epoch = cur["previous_member_epoch"]
                m.assigned = self._by_id(cur["assigned_partitions"])
                m.pending_revocation = self._by_id(cur["partitions_pending_revocation"])
            g.members[mid] = m
        g.topic_partitions = self._partition_counts(g.subscribed_topics())
        for mid, v in targets.items():
            if mid in g.members:
                g.target[mid] = {t: sorted(ps) for t, ps in
                                 self._by_id(v["topic_partitions"]).items()}

    def start(self) -> None:
        self._sweeper = asyncio.ensure_future(self._sweep_loop())

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            try:
                await self._sweeper
            except asyncio.CancelledError:
                pass
            self._sweeper = None
        for g in self.groups.values():
            if isinstance(g, ClassicGroup):
                if g.join_timer is not None:
                    g.join_timer.cancel()
                for m in g.members.values():
                    if m.awaiting_join:
                        m.join_waiter.set_result(JoinResult(E.not_coordinator, m.member_id))
                    if m.awaiting_sync:
                        m.sync_waiter.set_result(SyncResult(E.not_coordinator))

    async def _sweep_loop(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_INTERVAL_S)
            try:
                self.sweep(mono_ms())
            except Exception:
                log.exception("group coordinator sweep failed")

    def sweep(self, mono: float) -> None:
        """Expire sessions (and, every retention check interval, old offsets)."""
        for g in list(self.groups.values()):
            if isinstance(g, ClassicGroup):
                self._sweep_classic(g, mono)
            else:
                self._sweep_consumer(g, mono)
        if mono >= self._next_expiry_check:
            self._next_expiry_check = mono + self.config.offsets_retention_check_interval_ms
            self.expire_offsets(now_ms())

    # ------------------------------------------------------------ helpers

    def is_coordinator_for(self, group_id: str) -> bool:
        """This node is the group's coordinator (its `__consumer_offsets` partition is led
        here), loaded or still loading: what FindCoordinator answers."""
        p = self.store.partition_for(group_id)
        return p in self.owned or p in self.loading

    def coordinator_error(self, group_id: str) -> ErrorCode:
        """Kafka's coordinator checks for a request about a group: COORDINATOR_LOAD_IN_PROGRESS
        while its partition is being replayed, NOT_COORDINATOR when another node (or none)
        leads it, NONE when this node serves it."""
        p = self.store.partition_for(group_id)
        if p in self.loading:
            return E.coordinator_load_in_progress
        if p not in self.owned:
            return E.not_coordinator
        return E.none

    def led_partitions(self) -> set[int]:
        """The `__consumer_offsets` partitions hosted and led by this node."""
        out = set()
        for p in range(self.store.num_partitions):
            part = self.rm.get(ot.TOPIC, p)
            if part is not None and part.leader == self.rm.node_id:
                out.add(p)
        return out

    def begin_loading(self, partitions: Iterable[int]) -> None:
        """This node became the leader of these partitions: requests for their groups get
        COORDINATOR_LOAD_IN_PROGRESS until `load(partitions)` has replayed them."""
        self.loading |= set(partitions)

    def resign(self, partitions: Iterable[int]) -> None:
        """This node no longer leads these partitions: forget their groups and offsets
        (Kafka's onResignation); their requests get NOT_COORDINATOR."""
        ps = set(partitions)
        self.owned -= ps
        self.loading -= ps
        for gid in [g for g in self.groups if self.store.partition_for(g) in ps]:
            del self.groups[gid]
        for gid in self.offsets.groups():
            if self.store.partition_for(gid) in ps:
                self.offsets.remove_group(gid)

    def _classic(self, group_id: str) -> ClassicGroup | None:
        g = self.groups.get(group_id)
        return g if isinstance(g, ClassicGroup) else None

    def _persist_group(self, g: ClassicGroup) -> ErrorCode:
        return self.store.append(g.group_id, [self._group_record(g)])

    def _group_record(self, g: ClassicGroup) -> tuple[bytes, bytes | None]:
        key = ot.encode_key(ot.RecordKey(ot.GROUP_METADATA_KEY, g.group_id))
        members = []
        for m in g.members.values():
            members.append({
                "member_id": m.member_id, "group_instance_id": m.group_instance_id,
                "client_id": m.client_id, "client_host": m.client_host,
                "rebalance_timeout": m.rebalance_timeout_ms,
                "session_timeout": m.session_timeout_ms,
                "subscription": m.metadata_for(g.protocol_name or ""),
                "assignment": m.assignment})
        value = ot.encode_value(ot.GROUP_METADATA_KEY, {
            "protocol_type": g.protocol_type or "", "generation": g.generation,
            "protocol": g.protocol_name, "leader": g.leader_id if g.members else None,
            "current_state_timestamp": g.state_timestamp_ms, "members": members})
        return key, value

    # ================================================================ classic

    async def join_group(self, req: JoinRequest) -> JoinResult:
        if not req.group_id:
            return JoinResult(E.invalid_group_id, req.member_id)
        if (cerr := self.coordinator_error(req.group_id)) != E.none:
            return JoinResult(cerr, req.member_id)
        if not (self.config.min_session_timeout_ms <= req.session_timeout_ms
                <= self.config.max_session_timeout_ms):
            return JoinResult(E.invalid_session_timeout, req.member_id)
        existing = self.groups.get(req.group_id)
        if isinstance(existing, ConsumerGroup):
            if existing.members:
                return JoinResult(E.inconsistent_group_protocol, req.member_id)
            # an empty consumer group becomes a classic one (its offsets stay)
            self._delete_group_records(existing)
            existing = None
        group = existing
        if group is None:
            if req.member_id:
                return JoinResult(E.unknown_member_id, req.member_id)
            group = ClassicGroup(req.group_id, state_timestamp_ms=now_ms())
            self.groups[req.group_id] = group
        if group.state is GroupState.DEAD:
            return JoinResult(E.coordinator_not_available, req.member_id)
        if not req.member_id:
            return await self._join_new(group, req)
        return await self._join_existing(group, req)

    def _new_member(self, req: JoinRequest, member_id: str) -> ClassicMember:
        return ClassicMember(member_id, req.group_instance_id, req.client_id, req.client_host,
                             req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type,
                             [(n, bytes(m)) for n, m in req.protocols])

    async def _join_new(self, group: ClassicGroup, req: JoinRequest) -> JoinResult:
        if not group.supports(req.protocol_type, req.protocols):
            return JoinResult(E.inconsistent_group_protocol)
        prefix = req.group_instance_id or req.client_id
        new_id = f"{prefix}-{uuid.uuid4()}"
        if req.group_instance_id:
            old_id = group.static_members.get(req.group_instance_id)
            if old_id is not None and old_id in group.members:
                return await self._rejoin_static(group, old_id, new_id, req)
            return await self._add_and_rebalance(group, self._new_member(req, new_id))
        if req.require_known_member_id:
            group.pending_members[new_id] = mono_ms() + req.session_timeout_ms
            return JoinResult(E.member_id_required, new_id)
        return await self._add_and_rebalance(group, self._new_member(req, new_id))

    async def _rejoin_static(self, group: ClassicGroup, old_id: str, new_id: str,
                             req: JoinRequest) -> JoinResult:
        old = group.members[old_id]
        # the old incarnation is fenced: its pending answers go out now
        if old.awaiting_join:
            old.join_waiter.set_result(JoinResult(E.fenced_instance_id, old_id))
        if old.awaiting_sync:
            old.sync_waiter.set_result(SyncResult(E.fenced_instance_id))
        old_protocols = list(old.protocols)
        member = group.replace_static(old_id, new_id)
        member.client_id, member.client_host = req.client_id, req.client_host
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.deadline_ms = mono_ms() + req.session_timeout_ms
        log.info("static member %s of group %r rejoined as %s", req.group_instance_id,
                 group.group_id, new_id)
        if group.state is GroupState.STABLE:
            member.protocols = [(n, bytes(m)) for n, m in req.protocols]
            if group.select_protocol() == group.protocol_name:
                err = self._persist_group(group)
                if err != E.none:
                    group.replace_static(new_id, old_id)
                    member.protocols = old_protocols
                    return JoinResult(err)
                leader = group.leader_id == new_id
                return JoinResult(
                    E.none, new_id, group.generation, group.protocol_type, group.protocol_name,
                    group.leader_id or "",
                    self._member_list(group) if leader else [], skip_assignment=leader)
            member.protocols = old_protocols
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE,
                           GroupState.PREPARING_REBALANCE):
            return await self._update_and_rebalance(group, member, req)
        return JoinResult(E.unknown_member_id, new_id)

    def _member_list(self, group: ClassicGroup) -> list[tuple[str, str | None, bytes]]:
        proto = group.protocol_name or ""
        return [(m.member_id, m.group_instance_id, m.metadata_for(proto))
                for m in group.members.values()]

    async def _join_existing(self, group: ClassicGroup, req: JoinRequest) -> JoinResult:
        mid = req.member_id
        if mid in group.pending_members:
            if not group.supports(req.protocol_type, req.protocols):
                return JoinResult(E.inconsistent_group_protocol, mid)
            return await self._add_and_rebalance(group, self._new_member(req, mid))
        if req.group_instance_id:
            known = group.static_members.get(req.group_instance_id)
            if known is not None and known != mid:
                return JoinResult(E.fenced_instance_id, mid)
        member = group.members.get(mid)
        if member is None or group.state in (GroupState.EMPTY, GroupState.DEAD):
            return JoinResult(E.unknown_member_id, mid)
        if req.protocol_type != group.protocol_type or not (
                {n for n, _ in req.protocols} & self._candidates_without(group, mid)):
            return JoinResult(E.inconsistent_group_protocol, mid)
        member.deadline_ms = mono_ms() + member.session_timeout_ms
        same = member.same_protocols(req.protocols)
        if group.state is GroupState.PREPARING_REBALANCE:
            return await self._update_and_rebalance(group, member, req)
        if group.state is GroupState.COMPLETING_REBALANCE:
            if same:
                # a lost JoinGroup response: answer it again
                leader = group.leader_id == mid
                return JoinResult(E.none, mid, group.generation, group.protocol_type,
                                  group.protocol_name, group.leader_id or "",
                                  self._member_list(group) if leader else [])
            return await self._update_and_rebalance(group, member, req)
        # Stable
        if group.leader_id == mid or not same:
            return await self._update_and_rebalance(group, member, req)
        return JoinResult(E.none, mid, group.generation, group.protocol_type, group.protocol_name,
                          group.leader_id or "", [])

    @staticmethod
    def _candidates_without(group: ClassicGroup, member_id: str) -> set[str]:
        sets = [{n for n, _ in m.protocols} for m in group.members.values()
                if m.member_id != member_id]
        if not sets:
            return {n for m in group.members.values() for n, _ in m.protocols} | {
                n for n, _ in group.members[member_id].protocols}
        return set.intersection(*sets)

    async def _add_and_rebalance(self, group: ClassicGroup, member: ClassicMember) -> JoinResult:
        loop = asyncio.get_running_loop()
        member.is_new = True
        member.join_waiter = loop.create_future()
        member.deadline_ms = mono_ms() + NEW_MEMBER_JOIN_TIMEOUT_MS
        group.add(member)
        group.new_member_joined = True
        if group.state is GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group)
        else:
            self._prepare_rebalance(group, f"new member {member.member_id} joined")
        return await member.join_waiter  # type: ignore[no-any-return]

    async def _update_and_rebalance(self, group: ClassicGroup, member: ClassicMember,
                                    req: JoinRequest) -> JoinResult:
        loop = asyncio.get_running_loop()
        if member.awaiting_join:
            member.join_waiter.set_result(JoinResult(E.rebalance_in_progress, member.member_id))
        member.protocols = [(n, bytes(m)) for n, m in req.protocols]
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        member.join_waiter = loop.create_future()
        waiter = member.join_waiter
        if group.state is GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group)
        else:
            self._prepare_rebalance(group, f"member {member.member_id} rejoined")
        return await waiter  # type: ignore[no-any-return]

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            for m in group.members.values():
                m.assignment = b""
                if m.awaiting_sync:
                    m.sync_waiter.set_result(SyncResult(E.rebalance_in_progress))
        was_empty = group.state is GroupState.EMPTY
        group.transition(GroupState.PREPARING_REBALANCE, now_ms())
        log.info("preparing to rebalance group %r in state PreparingRebalance with old "
                 "generation %d (reason: %s)", group.group_id, group.generation, reason)
        loop = asyncio.get_running_loop()
        if group.join_timer is not None:
            group.join_timer.cancel()
        timeout = group.max_rebalance_timeout_ms()
        delay = self.config.initial_rebalance_delay_ms
        if was_empty and delay > 0:
            group.initial_delay = True
            group.new_member_joined = False
            first = min(delay, timeout)
            group.join_timer = loop.call_later(first / 1000, self._initial_delay_expired, group,
                                               first, timeout - first)
        else:
            group.initial_delay = False
            group.join_timer = loop.call_later(timeout / 1000, self._complete_join, group)
            self._try_complete_join(group)

    def _initial_delay_expired(self, group: ClassicGroup, delay: int, remaining: int) -> None:
        if group.new_member_joined and remaining > 0:
            group.new_member_joined = False
            step = min(delay, remaining)
            group.join_timer = asyncio.get_running_loop().call_later(
                step / 1000, self._initial_delay_expired, group, delay, remaining - step)
            return
        group.initial_delay = False
        group.join_timer = None
        self._complete_join(group)

    def _try_complete_join(self, group: ClassicGroup) -> None:
        if (group.state is GroupState.PREPARING_REBALANCE and not group.initial_delay
                and group.all_joined()):
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        if group.state is not GroupState.PREPARING_REBALANCE:
            return
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        group.initial_delay = False
        for m in list(group.members.values()):
            if not m.awaiting_join:
                log.info("member %s of group %r did not rejoin in time; removing it",
                         m.member_id, group.group_id)
                group.remove(m.member_id)
        now = now_ms()
        group.generation += 1
        if group.is_empty():
            group.protocol_name = None
            group.leader_id = None
            group.transition(GroupState.EMPTY, now)
            self._persist_group(group)
            log.info("group %r with generation %d is now empty", group.group_id, group.generation)
            return
        group.protocol_name = group.select_protocol()
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.transition(GroupState.COMPLETING_REBALANCE, now)
        log.info("stabilized group %r generation %d (%d members, protocol %s)", group.group_id,
                 group.generation, len(group.members), group.protocol_name)
        mono = mono_ms()
        members = self._member_list(group)
        for m in group.members.values():
            leader = m.member_id == group.leader_id
            m.join_waiter.set_result(JoinResult(
                E.none, m.member_id, group.generation, group.protocol_type, group.protocol_name,
                group.leader_id or "", members if leader else []))
            m.is_new = False
            m.deadline_ms = mono + m.session_timeout_ms

    def _validate_member(self, group: ClassicGroup, member_id: str, instance_id: str | None,
                         generation: int | None) -> ErrorCode:
        if instance_id:
            known = group.static_members.get(instance_id)
            if known is not None and known != member_id:
                return E.fenced_instance_id
        if member_id not in group.members:
            return E.unknown_member_id
        if generation is not None and generation != group.generation:
            return E.illegal_generation
        return E.none

    async def sync_group(self, group_id: str, generation: int, member_id: str,
                         instance_id: str | None, protocol_type: str | None,
                         protocol_name: str | None,
                         assignments: dict[str, bytes]) -> SyncResult:
        if (cerr := self.coordinator_error(group_id)) != E.none:
            return SyncResult(cerr)
        group = self._classic(group_id)
        if group is None:
            return SyncResult(E.unknown_member_id)
        if group.state is GroupState.DEAD:
            return SyncResult(E.coordinator_not_available)
        err = self._validate_member(group, member_id, instance_id, generation)
        if err != E.none:
            return SyncResult(err)
        if ((protocol_type is not None and protocol_type != group.protocol_type)
                or (protocol_name is not None and protocol_name != group.protocol_name)):
            return SyncResult(E.inconsistent_group_protocol)
        member = group.members[member_id]
        if group.state is GroupState.EMPTY:
            return SyncResult(E.unknown_member_id)
        if group.state is GroupState.PREPARING_REBALANCE:
            return SyncResult(E.rebalance_in_progress)
        member.deadline_ms = mono_ms() + member.session_timeout_ms
        if group.state is GroupState.STABLE:
            return SyncResult(E.none, member.assignment, group.protocol_type, group.protocol_name)
        # CompletingRebalance
        waiter = asyncio.get_running_loop().create_future()
        if member.awaiting_sync:
            member.sync_waiter.set_result(SyncResult(E.rebalance_in_progress))
        member.sync_waiter = waiter
        if member_id == group.leader_id:
            for m in group.members.values():
                m.assignment = bytes(assignments.get(m.member_id, b""))
            err = self._persist_group(group)
            if err != E.none:
                for m in group.members.values():
                    m.assignment = b""
                    if m.awaiting_sync:
                        m.sync_waiter.set_result(SyncResult(err))
                self._prepare_rebalance(group, "storing the assignment failed")
            else:
                group.transition(GroupState.STABLE, now_ms())
                for m in group.members.values():
                    if m.awaiting_sync:
                        m.sync_waiter.set_result(SyncResult(
                            E.none, m.assignment, group.protocol_type, group.protocol_name))
        return await waiter  # type: ignore[no-any-return]

    def heartbeat(self, group_id: str, generation: int, member_id: str,
                  instance_id: str | None) -> ErrorCode:
        if (cerr := self.coordinator_error(group_id)) != E.none:
            return cerr
        group = self._classic(group_id)
        if group is None:
            return E.unknown_member_id
        if group.state is GroupState.DEAD:
            return E.coordinator_not_available
        err = self._validate_member(group, member_id, instance_id, None)
        if err != E.none:
            return err
        if group.state is GroupState.EMPTY:
            return E.unknown_member_id
        if generation != group.generation:
            return E.illegal_generation
        member = group.members[member_id]
        member.deadline_ms = mono_ms() + member.session_timeout_ms
        if group.state is GroupState.PREPARING_REBALANCE:
            return E.rebalance_in_progress
        return E.none

    def leave_group(self, group_id: str, members: list[tuple[str, str | None]]
                    ) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]:
        if (cerr := self.coordinator_error(group_id)) != E.none:
            return cerr, []
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            return E.none, [(mid, iid, E.unknown_member_id) for mid, iid in members]
        if group is None:
            return E.none, [(mid, iid, E.unknown_member_id) for mid, iid in members]
        if group.state is GroupState.DEAD:
            return E.coordinator_not_available, []
        out = []
        for mid, iid in members:
            if iid:
                known = group.static_members.get(iid)
                if known is None:
                    out.append((mid, iid, E.unknown_member_id))
                    continue
                if mid and mid != known:
                    out.append((mid, iid, E.fenced_instance_id))
                    continue
                mid = known
            if mid in group.pending_members:
                del group.pending_members[mid]
                self._try_complete_join(group)
                out.append((mid, iid, E.none))
                continue
            if mid not in group.members:
                out.append((mid, iid, E.unknown_member_id))
                continue
            log.info("member %s left group %r", mid, group.group_id)
            self._remove_member(group, mid, "member left the group")
            out.append((mid, iid, E.none))
        return E.none, out

    def _remove_member(self, group: ClassicGroup, member_id: str, reason: str) -> None:
        member = group.remove(member_id)
        if member is None:
            return
        if member.awaiting_join:
            member.join_waiter.set_result(JoinResult(E.unknown_member_id, member_id))
        if member.awaiting_sync:
            member.sync_waiter.set_result(SyncResult(E.unknown_member_id))
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, reason)
        elif group.state is GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group)

    def _sweep_classic(self, group: ClassicGroup, mono: float) -> None:
        for mid, deadline in list(group.pending_members.items()):
            if mono >= deadline:
                del group.pending_members[mid]
                self._try_complete_join(group)
        for m in list(group.members.values()):
            if mono < m.deadline_ms or m.awaiting_join or m.awaiting_sync:
                continue
            log.info("member %s in group %r has failed (session timeout %d ms); removing it",
                     m.member_id, group.group_id, m.session_timeout_ms)
            self._remove_member(group, m.member_id, "session timeout")

    # ================================================================ offsets

    def commit_offsets(self, group_id: str, generation: int, member_id: str,
                       instance_id: str | None, entries: list[OffsetCommitEntry],
                       retention_ms: int = -1, kip848_errors: bool = True
                       ) -> dict[tuple[str, int], ErrorCode]:
        """OffsetCommit: the error per (topic, partition)."""
        err = self._validate_commit(group_id, generation, member_id, instance_id, kip848_errors)
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
            for tp, value in accepted:
                if werr != E.none:
                    out[tp] = werr
                    continue
                self.offsets.put(group_id, tp, value)
                part = self.rm.get(tp[0], tp[1])
                if part is not None:
                    self.lag.observe(group_id, tp[0], tp[1], value.offset, part.high_watermark,
                                     now, deliberate=generation < 0 and not member_id)
        return out

    def _validate_commit(self, group_id: str, generation: int, member_id: str,
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
        return E.none

    def fetch_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None,
                      member_id: str | None = None, member_epoch: int = -1
                      ) -> tuple[ErrorCode, list[tuple[str, int, CommittedOffset | None]]]:
        """OffsetFetch of one group: (error, [(topic, partition, offset or None)])."""
        if (cerr := self.coordinator_error(group_id)) != E.none:
            return cerr, []
        group = self.groups.get(group_id)
        if member_id is not None and isinstance(group, ConsumerGroup):
            member = group.members.get(member_id)
            if member is None:
                return E.unknown_member_id, []
            if member_epoch != member.member_epoch:
                return E.stale_member_epoch, []
        committed = self.offsets.get(group_id)
        if topics is None:
            return E.none, [(t, p, v) for (t, p), v in sorted(committed.items())]
        out = []
        for topic, parts in topics:
            for p in parts:
                out.append((topic, p, committed.get((topic, p))))
        return E.none, out

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
        for (topic, p), code in out.items():
            if code == E.none:
                self.offsets.remove(group_id, (topic, p))
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
            for tp in expired:
                self.offsets.remove(gid, tp)
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
            self.offsets.remove_group(gid)
            self.lag.forget(gid)
            del self.groups[gid]
            log.info("deleted group %r", gid)
            out[gid] = E.none
        return out

    def _delete_group_records(self, g: ConsumerGroup) -> None:
        self.store.append(g.group_id, self._consumer_tombstones(g))
        del self.groups[g.group_id]

    @staticmethod
    def _consumer_tombstones(g: ConsumerGroup) -> list[tuple[bytes, bytes | None]]:
        out: list[tuple[bytes, bytes | None]] = []
        for mid in g.members:
            for kind in (ot.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY,
                         ot.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY,
                         ot.CONSUMER_GROUP_MEMBER_METADATA_KEY):
                out.append((ot.encode_key(ot.RecordKey(kind, g.group_id, member_id=mid)), None))
        for kind in (ot.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY,
                     ot.CONSUMER_GROUP_PARTITION_METADATA_KEY, ot.CONSUMER_GROUP_METADATA_KEY):
            out.append((ot.encode_key(ot.RecordKey(kind, g.group_id)), None))
        return out

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

    # ================================================================ KIP-848

    def consumer_group_heartbeat(self, group_id: str, member_id: str, member_epoch: int,
                                 instance_id: str | None, rack_id: str | None,
                                 rebalance_timeout_ms: int, subscribed: list[str] | None,
                                 server_assignor: str | None,
                                 owned: dict[str, set[int]] | None, client_id: str,
                                 client_host: str, subscribed_regex: str | None = None
                                 ) -> HeartbeatResult:
        interval = self.config.consumer_heartbeat_interval_ms
        if not group_id:
            return HeartbeatResult(E.invalid_request, "GroupId can't be empty.")
        if (cerr := self.coordinator_error(group_id)) != E.none:
            return HeartbeatResult(cerr)
        # librdkafka sends "" for "no regex"
        subscribed_regex = subscribed_regex or None
        server_assignor = server_assignor or None
        if subscribed_regex is not None:
            try:
                re.compile(subscribed_regex)
            except re.error as exc:
                return HeartbeatResult(E.invalid_regular_expression,
                                       f"SubscribedTopicRegex {subscribed_regex!r}: {exc}")
        if member_epoch == 0:
            if subscribed is None and subscribed_regex is None:
                return HeartbeatResult(E.invalid_request,
                                       "SubscribedTopicNames must be set in first request.")
            if rebalance_timeout_ms == -1:
                return HeartbeatResult(E.invalid_request,
                                       "RebalanceTimeoutMs must be provided in first request.")
        elif member_epoch > 0 and not member_id:
            return HeartbeatResult(E.invalid_request, "MemberId can't be empty.")
        if server_assignor and server_assignor not in self.config.consumer_assignors:
            return HeartbeatResult(E.unsupported_assignor,
                                   f"ServerAssignor {server_assignor} is not supported. Supported "
                                   f"assignors: {', '.join(self.config.consumer_assignors)}.")
        g = self.groups.get(group_id)
        if isinstance(g, ClassicGroup):
            if g.members:
                return HeartbeatResult(E.group_id_not_found,
                                       f"Group {group_id} is not a consumer group.")
            if member_epoch != 0:
                return HeartbeatResult(E.unknown_member_id)
            # an empty classic group (offsets only) becomes a consumer group
            self.store.append(group_id, [(ot.encode_key(ot.RecordKey(
                ot.GROUP_METADATA_KEY, group_id)), None)])
            g = None
        if g is None:
            if member_epoch != 0:
                return HeartbeatResult(E.unknown_member_id,
                                       f"Member {member_id} is not a member of group {group_id}.")
            g = ConsumerGroup(group_id, state_timestamp_ms=now_ms())
            self.groups[group_id] = g
        records: list[tuple[bytes, bytes | None]] = []
        mono = mono_ms()
        if member_epoch == -2 and g.members.get(member_id) is not None \
                and g.members[member_id].instance_id:
            # a static member leaving for a while (KIP-848): it keeps its place and its
            # partitions for a session timeout, so that its next incarnation takes them over
            m = g.members[member_id]
            m.deadline_ms = mono + self.config.consumer_session_timeout_ms
            m.static_left = True
            log.info("static member %s (%s) of consumer group %r left temporarily", member_id,
                     m.instance_id, group_id)
            return HeartbeatResult(E.none, None, member_id, member_epoch, 0)
        if member_epoch in (-1, -2):
            m = g.members.get(member_id)
            if m is None:
                return HeartbeatResult(E.unknown_member_id)
            self._consumer_remove(g, m, records, "left")
            self.store.append(group_id, records)
            return HeartbeatResult(E.none, None, member_id, member_epoch, 0)
        member = g.members.get(member_id) if member_id else None
        replaced = False
        if member_epoch == 0:
            if member is None and instance_id:
                other = next((o for o in g.members.values() if o.instance_id == instance_id),
                             None)
                if other is not None and not other.static_left:
                    return HeartbeatResult(E.unreleased_instance_id,
                                           f"Static member {other.member_id} with instance id "
                                           f"{instance_id} is not released yet.")
                if other is not None:
                    # the same static member restarted in time: it takes over the old
                    # incarnation's epoch and partitions, no new assignment is needed
                    member = self._replace_static(g, other, member_id or str(uuid.uuid4()),
                                                  records)
                    replaced = True
                    member.client_id, member.client_host = client_id, client_host
            if member is None:
                member_id = member_id or str(uuid.uuid4())
                member = ConsumerMember(member_id, instance_id, rack_id, client_id, client_host,
                                        list(subscribed or []), server_assignor,
                                        rebalance_timeout_ms, subscribed_regex or None)
                member.resolved_topics = sorted(set(member.subscribed_topic_names)
                                                | self._matching(subscribed_regex))
                g.members[member_id] = member
                g.bump()
                records.append(self._member_record(g, member))
                log.info("member %s joined consumer group %r (epoch %d)", member_id, group_id,
                         g.group_epoch)
            elif not replaced:
                # a member that lost its state rejoins: it keeps its id and starts over
                member.member_epoch = 0
                member.assigned = {}
                member.pending_revocation = {}
                member.last_sent = None
        else:
            if member is None:
                return HeartbeatResult(E.unknown_member_id,
                                       f"Member {member_id} is not a member of group {group_id}.")
            if member_epoch not in (member.member_epoch, member.previous_member_epoch) or (
                    member_epoch == member.previous_member_epoch
                    and member_epoch != member.member_epoch and owned is not None
                    and any(p not in member.assigned.get(t, set())
                            for t, ps in owned.items() for p in ps)):
                return HeartbeatResult(E.fenced_member_epoch,
                                       f"The consumer group member has a smaller member epoch "
                                       f"({member_epoch}) than the one known by the group "
                                       f"coordinator ({member.member_epoch}).")
        member.deadline_ms = mono + self.config.consumer_session_timeout_ms
        member.client_id, member.client_host = client_id, client_host
        changed = False
        if subscribed is not None and sorted(subscribed) != sorted(member.subscribed_topic_names):
            member.subscribed_topic_names = list(subscribed)
            changed = True
        if subscribed_regex is not None and subscribed_regex != member.subscribed_topic_regex:
            member.subscribed_topic_regex = subscribed_regex or None
            changed = True
        if server_assignor is not None and server_assignor != member.server_assignor:
            member.server_assignor = server_assignor
            changed = True
        resolved = sorted(set(member.subscribed_topic_names) | self._matching(
            member.subscribed_topic_regex))
        if resolved != sorted(member.resolved_topics):
            member.resolved_topics = resolved
            changed = True
        if changed:
            g.bump()
            records.append(self._member_record(g, member))
        # partition counts of subscribed topics moved (topic created, partitions added)
        counts = self._partition_counts(g.subscribed_topics())
        if counts != g.topic_partitions and g.group_epoch == g.assignment_epoch:
            g.bump()
        if g.group_epoch > g.assignment_epoch:
            g.compute_target(counts)
            records.append((ot.encode_key(ot.RecordKey(ot.CONSUMER_GROUP_METADATA_KEY, group_id)),
                            ot.encode_value(ot.CONSUMER_GROUP_METADATA_KEY,
                                            {"epoch": g.group_epoch})))
            for mid, tps in g.target.items():
                records.append((ot.encode_key(ot.RecordKey(
                    ot.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, group_id, member_id=mid)),
                    ot.encode_value(ot.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY,
                                    {"topic_partitions": self._by_topic_id(tps)})))
            records.append((ot.encode_key(ot.RecordKey(
                ot.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY, group_id)),
                ot.encode_value(ot.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY,
                                {"assignment_epoch": g.assignment_epoch})))
            log.info("consumer group %r: new target assignment at epoch %d", group_id,
                     g.group_epoch)
        before = (member.member_epoch, {t: set(p) for t, p in member.assigned.items()},
                  bool(member.pending_revocation))
        g.reconcile(member, owned)
        if member.pending_revocation and member.revoke_deadline_ms is None:
            member.revoke_deadline_ms = mono + member.rebalance_timeout_ms
        after = (member.member_epoch, member.assigned, bool(member.pending_revocation))
        if before != after or member_epoch == 0:
            records.append(self._current_assignment_record(g, member))
        err = self.store.append(group_id, records)
        if err != E.none:
            return HeartbeatResult(err)
        assignment = {t: sorted(ps) for t, ps in sorted(member.assigned.items())}
        send = assignment if (assignment != member.last_sent or member_epoch == 0
                              or owned is not None) else None
        if send is not None:
            member.last_sent = assignment
        return HeartbeatResult(E.none, None, member.member_id, member.member_epoch, interval, send)

    def _replace_static(self, g: ConsumerGroup, old: ConsumerMember, new_id: str,
                        records: list[tuple[bytes, bytes | None]]) -> ConsumerMember:
        del g.members[old.member_id]
        target = g.target.pop(old.member_id, None)
        for kind in (ot.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY,
                     ot.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY,
                     ot.CONSUMER_GROUP_MEMBER_METADATA_KEY):
            records.append((ot.encode_key(ot.RecordKey(kind, g.group_id,
                                                       member_id=old.member_id)), None))
        log.info("static member %s of consumer group %r rejoined as %s", old.instance_id,
                 g.group_id, new_id)
        old.member_id = new_id
        old.static_left = False
        old.last_sent = None
        g.members[new_id] = old
        if target is not None:
            g.target[new_id] = target
            records.append((ot.encode_key(ot.RecordKey(
                ot.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, g.group_id, member_id=new_id)),
                ot.encode_value(ot.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY,
                                {"topic_partitions": self._by_topic_id(target)})))
        records.append(self._member_record(g, old))
        return old

    def _matching(self, regex: str | None) -> set[str]:
        if not regex:
            return set()
        pattern = re.compile(regex)
        return {t for t in self.all_topics() if not t.startswith("__") and pattern.fullmatch(t)}

    def _partition_counts(self, topics: set[str]) -> dict[str, int]:
        out = {}
        for t in topics:
            info = self.topics(t)
            if info is not None:
                out[t] = info[1]
        return out

    def _by_topic_id(self, tps: dict[str, Any]) -> list[dict[str, Any]]:
        out = []
        for t, ps in sorted(tps.items()):
            info = self.topics(t)
            if info is not None:
                out.append({"topic_id": info[0], "partitions": sorted(ps)})
        return out

    def _member_record(self, g: ConsumerGroup, m: ConsumerMember) -> tuple[bytes, bytes | None]:
        return (ot.encode_key(ot.RecordKey(ot.CONSUMER_GROUP_MEMBER_METADATA_KEY, g.group_id,
                                           member_id=m.member_id)),
                ot.encode_value(ot.CONSUMER_GROUP_MEMBER_METADATA_KEY, {
                    "instance_id": m.instance_id, "rack_id": m.rack_id, "client_id": m.client_id,
                    "client_host": m.client_host,
                    "subscribed_topic_names": m.subscribed_topic_names,
                    "subscribed_topic_regex": m.subscribed_topic_regex,
                    "server_assignor": m.server_assignor,
                    "rebalance_timeout_ms": m.rebalance_timeout_ms}))

    def _current_assignment_record(self, g: ConsumerGroup,
                                   m: ConsumerMember) -> tuple[bytes, bytes | None]:
        return (ot.encode_key(ot.RecordKey(ot.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY,
                                           g.group_id, member_id=m.member_id)),
                ot.encode_value(ot.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY, {
                    "member_epoch": m.member_epoch,
                    "previous_member_epoch": m.previous_member_epoch,
                    "state": 1 if m.pending_revocation else 0,
                    "assigned_partitions": self._by_topic_id(m.assigned),
                    "partitions_pending_revocation": self._by_topic_id(m.pending_revocation)}))

    def _consumer_remove(self, g: ConsumerGroup, m: ConsumerMember,
                         records: list[tuple[bytes, bytes | None]], reason: str) -> None:
        g.remove(m.member_id)
        g.bump()
        log.info("member %s %s consumer group %r (epoch %d)", m.member_id, reason, g.group_id,
                 g.group_epoch)
        for kind in (ot.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY,
                     ot.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY,
                     ot.CONSUMER_GROUP_MEMBER_METADATA_KEY):
            records.append((ot.encode_key(ot.RecordKey(kind, g.group_id, member_id=m.member_id)),
                            None))
        records.append((ot.encode_key(ot.RecordKey(ot.CONSUMER_GROUP_METADATA_KEY, g.group_id)),
                        ot.encode_value(ot.CONSUMER_GROUP_METADATA_KEY, {"epoch": g.group_epoch})))
        if not g.members:
            g.state_timestamp_ms = now_ms()
            g.target = {}
            g.assignment_epoch = g.group_epoch
            g.topic_partitions = {}

    def _sweep_consumer(self, g: ConsumerGroup, mono: float) -> None:
        for m in list(g.members.values()):
            expired = mono >= m.deadline_ms
            revoke_late = m.revoke_deadline_ms is not None and mono >= m.revoke_deadline_ms
            if expired or revoke_late:
                records: list[tuple[bytes, bytes | None]] = []
                self._consumer_remove(g, m, records, "timed out (session) in" if expired
                                      else "did not revoke its partitions in time in")
                self.store.append(g.group_id, records)


CONSUMER_STATE_NAMES = {"empty": "Empty", "assigning": "Assigning",
                        "reconciling": "Reconciling", "stable": "Stable", "dead": "Dead"}

__all__ = ["ASSIGNORS", "GroupConfig", "GroupCoordinator", "JoinRequest", "JoinResult",
           "OffsetCommitEntry", "SyncResult"]
