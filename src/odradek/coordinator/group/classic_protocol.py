"""The classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup): Kafka's
rebalance driven by the coordinator.

A JoinGroup or SyncGroup that must wait is answered through a Future; rebalance deadlines
are timers of the coordinator runtime, tied to the group's `__consumer_offsets` partition
(unloading it cancels them); session timeouts are found by the periodic sweep. The group's
state moves only through `ClassicGroup.transition`, which checks Kafka's table of allowed
transitions (classic.py). The group's metadata record is appended before an answer that
depends on it goes out.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

from odradek.coordinator import offsets_topic as ot
from odradek.coordinator.group.api import (
    NEW_MEMBER_JOIN_TIMEOUT_MS,
    Group,
    GroupConfig,
    JoinRequest,
    JoinResult,
    SyncResult,
    mono_ms,
    now_ms,
)
from odradek.coordinator.group.classic import ClassicGroup, ClassicMember, GroupState
from odradek.coordinator.group.consumer import ConsumerGroup
from odradek.coordinator.group.store import OffsetsTopicStore
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)
E = ErrorCode


class ClassicProtocol:
    """Mixin of GroupCoordinator: the classic protocol's requests and rebalances."""

    groups: dict[str, Group]
    store: OffsetsTopicStore
    config: GroupConfig
    coordinator_error: Callable[[str], ErrorCode]
    call_later: Callable[..., Any]
    wake_at: Callable[[str, float], None]
    # classic_members.py: classic members of KIP-848 groups
    classic_join_consumer_group: Callable[[ConsumerGroup, JoinRequest], JoinResult]
    classic_sync_consumer_group: Callable[..., SyncResult]
    classic_heartbeat_consumer_group: Callable[..., ErrorCode]
    classic_leave_consumer_group: Callable[..., list[tuple[str, str | None, ErrorCode]]]

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
                # a classic member joins a consumer group (KIP-848's online migration)
                return self.classic_join_consumer_group(existing, req)
            # an empty consumer group becomes a classic one (its offsets stay)
            self._delete_group_records(existing)
            existing = None
        group = existing
        if group is None:
            if req.member_id:
                return JoinResult(E.unknown_member_id, req.member_id)
            group = ClassicGroup(req.group_id, state_timestamp_ms=now_ms())
            self.groups[req.group_id] = group
        if not self._accepts_joining(group, req.member_id):
            if req.member_id in group.members:
                self._remove_member(group, req.member_id, "the group is full")
            log.info("group %r is full (group.max.size=%d): JoinGroup of %s refused",
                     group.group_id, self.config.classic_max_size, req.member_id or "(new)")
            return JoinResult(E.group_max_size_reached, "")
        if group.state is GroupState.DEAD:
            return JoinResult(E.coordinator_not_available, req.member_id)
        if not req.member_id:
            return await self._join_new(group, req)
        return await self._join_existing(group, req)

    def _accepts_joining(self, group: ClassicGroup, member_id: str) -> bool:
        """Kafka's acceptJoiningMember: group.max.size bounds the members. While a rebalance
        is being prepared it counts the members that rejoined, so of a group over the limit
        (the limit lowered) the last to rejoin are the ones left out."""
        limit = self.config.classic_max_size
        member = group.members.get(member_id) if member_id else None
        if group.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.state is GroupState.PREPARING_REBALANCE:
            return (member is not None and member.awaiting_join) or sum(
                1 for m in group.members.values() if m.awaiting_join) < limit
        return member is not None or len(group.members) < limit

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
            self.wake_at(group.group_id, group.pending_members[new_id])
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
        self.wake_at(group.group_id, member.deadline_ms)
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
        self.wake_at(group.group_id, member.deadline_ms)
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
        self.wake_at(group.group_id, member.deadline_ms)
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
        if group.join_timer is not None:
            group.join_timer.cancel()
        timeout = group.max_rebalance_timeout_ms()
        delay = self.config.initial_rebalance_delay_ms
        if was_empty and delay > 0:
            group.initial_delay = True
            group.new_member_joined = False
            first = min(delay, timeout)
            group.join_timer = self.call_later(group.group_id, first / 1000,
                                               self._initial_delay_expired, group, first,
                                               timeout - first)
        else:
            group.initial_delay = False
            group.join_timer = self.call_later(group.group_id, timeout / 1000,
                                               self._complete_join, group)
            self._try_complete_join(group)

    def _initial_delay_expired(self, group: ClassicGroup, delay: int, remaining: int) -> None:
        if group.new_member_joined and remaining > 0:
            group.new_member_joined = False
            step = min(delay, remaining)
            group.join_timer = self.call_later(group.group_id, step / 1000,
                                               self._initial_delay_expired, group, delay,
                                               remaining - step)
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
            self.wake_at(group.group_id, m.deadline_ms)

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
        g = self.groups.get(group_id)
        if isinstance(g, ConsumerGroup):
            return self.classic_sync_consumer_group(g, generation, member_id, instance_id,
                                                    protocol_type, protocol_name)
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
        self.wake_at(group_id, member.deadline_ms)
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
        g = self.groups.get(group_id)
        if isinstance(g, ConsumerGroup):
            return self.classic_heartbeat_consumer_group(g, generation, member_id, instance_id)
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
        self.wake_at(group_id, member.deadline_ms)
        if group.state is GroupState.PREPARING_REBALANCE:
            return E.rebalance_in_progress
        return E.none

    def leave_group(self, group_id: str, members: list[tuple[str, str | None]]
                    ) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]:
        if (cerr := self.coordinator_error(group_id)) != E.none:
            return cerr, []
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            return E.none, self.classic_leave_consumer_group(group, members)
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
