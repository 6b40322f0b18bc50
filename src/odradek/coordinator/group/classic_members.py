"""Classic members in a KIP-848 group, and the online conversions between the protocols
(Kafka's GroupMetadataManager: classicGroupJoinToConsumerGroup and its Sync, Heartbeat and
Leave siblings, convertToConsumerGroup, convertToClassicGroup).

A member that speaks JoinGroup/SyncGroup/Heartbeat is a member of the consumer group like
any other, with its session timeout and protocols kept (`ConsumerMember.classic`). Its
JoinGroup is answered at once: the server computed the assignment, so there is no leader
and no waiting for the others. Its generation is its member epoch; SyncGroup hands it its
reconciled partitions as ConsumerProtocol assignment bytes; Heartbeat answers
REBALANCE_IN_PROGRESS when it must rejoin (the group epoch moved, it must give partitions
up, or partitions it waits for were released). The rules of the conversions are in
migration.py; this module writes their records and answers the requests.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from odradek.coordinator import offsets_topic as ot
from odradek.coordinator.group.api import (
    Group,
    GroupConfig,
    HeartbeatResult,
    JoinRequest,
    JoinResult,
    SyncResult,
    mono_ms,
    now_ms,
)
from odradek.coordinator.group.classic import ClassicGroup
from odradek.coordinator.group.consumer import ClassicMemberMeta, ConsumerGroup, ConsumerMember
from odradek.coordinator.group.migration import (
    PROTOCOL_TYPE,
    MalformedProtocol,
    MigrationPolicy,
    classic_to_consumer,
    consumer_group_full,
    consumer_to_classic,
    encode_assignment,
    group_full_message,
    may_downgrade,
    may_downgrade_replacing,
    metadata_version,
    parse_subscription,
    upgrade_refusal,
)
from odradek.coordinator.group.store import OffsetsTopicStore
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)
E = ErrorCode
Records = list[tuple[bytes, bytes | None]]


class ClassicMembers:
    """Mixin of GroupCoordinator: classic requests to consumer groups, and conversions."""

    groups: dict[str, Group]
    store: OffsetsTopicStore
    config: GroupConfig
    wake_at: Callable[[str, float], None]
    # from the other mixins
    _fail_waiters_with: Callable[[ClassicGroup, ErrorCode], None]
    _group_record: Callable[[ClassicGroup], tuple[bytes, bytes | None]]
    _prepare_rebalance: Callable[[ClassicGroup, str], None]
    _member_record: Callable[[ConsumerGroup, ConsumerMember], tuple[bytes, bytes | None]]
    _current_assignment_record: Callable[[ConsumerGroup, ConsumerMember],
                                         tuple[bytes, bytes | None]]
    _epoch_record: Callable[[ConsumerGroup], tuple[bytes, bytes | None]]
    _target_records: Callable[[ConsumerGroup], Records]
    _consumer_tombstones: Callable[[ConsumerGroup], Records]
    _consumer_remove: Callable[[ConsumerGroup, ConsumerMember, Records, str], None]
    _refresh_target: Callable[[ConsumerGroup, Records], None]
    _replace_static: Callable[[ConsumerGroup, ConsumerMember, str, Records], ConsumerMember]

    @property
    def migration_policy(self) -> MigrationPolicy:
        return MigrationPolicy.parse(self.config.migration_policy)

    # ------------------------------------------------------------ conversions

    def _upgrade(self, g: ClassicGroup, records: Records) -> ConsumerGroup | HeartbeatResult:
        """A ConsumerGroupHeartbeat joins the non-empty classic group `g`: it becomes a
        consumer group (its records go first in `records`), or the refusal to answer."""
        gid = g.group_id
        reason = upgrade_refusal(self.migration_policy, g, self.config.consumer_max_size)
        if reason is not None:
            log.info("cannot upgrade classic group %r to a consumer group: %s", gid, reason)
            return HeartbeatResult(E.group_id_not_found, f"Group {gid} is not a consumer group.")
        try:
            cg = classic_to_consumer(g, now_ms())
        except MalformedProtocol as exc:
            log.warning("cannot upgrade classic group %r: malformed embedded consumer "
                        "protocol: %s", gid, exc)
            return HeartbeatResult(E.group_id_not_found, f"Cannot upgrade the classic group "
                                   f"{gid} to consumer group because the embedded consumer "
                                   f"protocol is malformed.")
        # members waiting in a rebalance rejoin: the new member starts another one anyway
        self._fail_waiters_with(g, E.rebalance_in_progress)
        records.append((ot.encode_key(ot.RecordKey(ot.GROUP_METADATA_KEY, gid)), None))
        records.extend(self._member_record(cg, m) for m in cg.members.values())
        records.append(self._epoch_record(cg))
        records.extend(self._target_records(cg))
        records.extend(self._current_assignment_record(cg, m) for m in cg.members.values())
        mono = mono_ms()
        for m in cg.members.values():
            assert m.classic is not None
            m.deadline_ms = mono + m.classic.session_timeout_ms
            self.wake_at(gid, m.deadline_ms)
        self.groups[gid] = cg
        log.info("upgraded classic group %r (generation %d, %d members) to a consumer group",
                 gid, g.generation, len(cg.members))
        return cg

    def _fence_member(self, g: ConsumerGroup, m: ConsumerMember, records: Records,
                      reason: str) -> bool:
        """A member of the consumer protocol leaves or is fenced: remove it, or, when every
        member left is classic and the policy allows, downgrade the group to a classic one
        and start a rebalance (Kafka's consumerGroupFenceMember). Whether it downgraded."""
        if not may_downgrade(self.migration_policy, g, m.member_id,
                             self.config.classic_max_size):
            self._consumer_remove(g, m, records, reason)
            return False
        try:
            classic = consumer_to_classic(g, m.member_id, now_ms())
        except MalformedProtocol as exc:
            log.warning("cannot downgrade consumer group %r: %s", g.group_id, exc)
            self._consumer_remove(g, m, records, reason)
            return False
        log.info("member %s %s consumer group %r; its other members all use the classic "
                 "protocol: downgrading it to a classic group (generation %d)", m.member_id,
                 reason, g.group_id, classic.generation)
        records.extend(self._consumer_tombstones(g))
        records.append(self._group_record(classic))
        self.groups[g.group_id] = classic
        for cm in classic.members.values():
            self.wake_at(g.group_id, cm.deadline_ms)
        self._prepare_rebalance(classic, f"Downgrade group {g.group_id} from consumer to "
                                         f"classic.")
        return True

    def _downgrade_replaced(self, g: ConsumerGroup, joined_id: str) -> ClassicGroup | None:
        """The classic static member `joined_id` replaced the last member of the consumer
        protocol: the group becomes a Stable classic group, the newcomer holding what the
        member it replaced was assigned; no rebalance (Kafka does none either)."""
        try:
            classic = consumer_to_classic(g, "", now_ms())
        except MalformedProtocol as exc:
            log.warning("cannot downgrade consumer group %r: %s", g.group_id, exc)
            return None
        records = [*self._consumer_tombstones(g), self._group_record(classic)]
        if self.store.append(g.group_id, records) != E.none:
            return None  # it stays a consumer group; a later change may downgrade it
        self.groups[g.group_id] = classic
        for cm in classic.members.values():
            self.wake_at(g.group_id, cm.deadline_ms)
        log.info("static member %s replaced the last consumer-protocol member of group %r: "
                 "downgraded it to a classic group (generation %d)", joined_id, g.group_id,
                 classic.generation)
        return classic

    # ------------------------------------------------------------ JoinGroup

    def classic_join_consumer_group(self, g: ConsumerGroup, req: JoinRequest) -> JoinResult:
        """A JoinGroup to a non-empty consumer group: the member joins (or rejoins) it and
        is answered at once with its member epoch as generation."""
        names = {n for n, _ in req.protocols}
        member_id = req.member_id
        if not g.supports_classic(req.protocol_type, names):
            return JoinResult(E.inconsistent_group_protocol, member_id)
        try:
            sub = parse_subscription(req.protocols[0][1])
        except MalformedProtocol:
            return JoinResult(E.inconsistent_group_protocol, member_id)
        member = g.members.get(member_id) if member_id else None
        if member is not None and member.classic is None:
            return JoinResult(E.unknown_member_id, member_id)
        if consumer_group_full(g, member_id, self.config.consumer_max_size):
            log.info("classic member %s refused by consumer group %r: %s",
                     member_id or "(new)", g.group_id,
                     group_full_message(self.config.consumer_max_size))
            return JoinResult(E.group_max_size_reached, member_id)
        if not member_id:
            member_id = str(uuid.uuid4())
            if req.require_known_member_id and not req.group_instance_id:
                return JoinResult(E.member_id_required, member_id)
        records: Records = []
        downgrade = False
        if req.group_instance_id:
            other = next((o for o in g.members.values()
                          if o.instance_id == req.group_instance_id), None)
            if other is not None and other.member_id != member_id:
                if req.member_id:
                    return JoinResult(E.fenced_instance_id, req.member_id)
                downgrade = may_downgrade_replacing(self.migration_policy, g, other.member_id,
                                                    self.config.classic_max_size)
                # a static member restarted: the new incarnation takes its place
                member = self._replace_static(g, other, member_id, records)
        new = member is None
        if member is None:
            member = ConsumerMember(member_id, req.group_instance_id)
            g.members[member_id] = member
        meta = ClassicMemberMeta(req.session_timeout_ms,
                                 [(n, bytes(b)) for n, b in req.protocols])
        changed = new or sorted(sub.topics) != sorted(member.subscribed_topic_names)
        touched = changed or member.classic != meta or (
            member.rebalance_timeout_ms != req.rebalance_timeout_ms) or (
            sub.rack_id is not None and sub.rack_id != member.rack_id)
        member.subscribed_topic_names = list(sub.topics)
        member.resolved_topics = sorted(sub.topics)
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.rack_id = sub.rack_id if sub.rack_id is not None else member.rack_id
        member.client_id, member.client_host = req.client_id, req.client_host
        member.classic = meta
        if changed:
            g.bump()
        if touched:
            records.append(self._member_record(g, member))
        self._refresh_target(g, records)
        before = (member.member_epoch, {t: set(p) for t, p in member.assigned.items()},
                  bool(member.pending_revocation))
        # the member rejoined: it is no longer asked to, and owns what it says (an eager
        # client revoked everything first; a v0 subscription says nothing: owns nothing)
        member.revoke_deadline_ms = None
        g.reconcile(member, sub.owned or {})
        mono = mono_ms()
        if member.pending_revocation:
            member.revoke_deadline_ms = mono + member.rebalance_timeout_ms
            self.wake_at(g.group_id, member.revoke_deadline_ms)
        if new or before != (member.member_epoch, member.assigned,
                             bool(member.pending_revocation)):
            records.append(self._current_assignment_record(g, member))
        err = self.store.append(g.group_id, records)
        if err != E.none:
            # what was written stays; this member's join did not happen
            if new:
                g.remove(member_id)
            return JoinResult(err, member_id)
        member.deadline_ms = mono + req.session_timeout_ms
        self.wake_at(g.group_id, member.deadline_ms)
        if downgrade:
            classic = self._downgrade_replaced(g, member_id)
            if classic is not None:
                return JoinResult(E.none, member_id, classic.generation, PROTOCOL_TYPE,
                                  classic.protocol_name, "", [])
        # its SyncGroup must follow within the rebalance timeout it gave, or it is removed
        member.sync_deadline_ms = mono + req.rebalance_timeout_ms
        self.wake_at(g.group_id, member.sync_deadline_ms)
        log.info("classic member %s joined consumer group %r (member epoch %d)", member_id,
                 g.group_id, member.member_epoch)
        return JoinResult(E.none, member_id, member.member_epoch, PROTOCOL_TYPE,
                          req.protocols[0][0], "", [])

    # ------------------------------------------------------------ Sync, Heartbeat, Leave

    def _classic_member(self, g: ConsumerGroup, member_id: str, instance_id: str | None
                        ) -> tuple[ErrorCode, ConsumerMember | None]:
        if instance_id:
            m = next((o for o in g.members.values() if o.instance_id == instance_id), None)
            if m is None:
                return E.unknown_member_id, None
            if m.member_id != member_id:
                return E.fenced_instance_id, None
        else:
            m = g.members.get(member_id)
        if m is None or m.classic is None:
            return E.unknown_member_id, None
        return E.none, m

    def classic_sync_consumer_group(self, g: ConsumerGroup, generation: int, member_id: str,
                                    instance_id: str | None, protocol_type: str | None,
                                    protocol_name: str | None) -> SyncResult:
        err, m = self._classic_member(g, member_id, instance_id)
        if m is None or m.classic is None:
            return SyncResult(err)
        if generation != m.member_epoch:
            return SyncResult(E.illegal_generation)
        name, meta = m.classic.protocols[0]
        if (protocol_type is not None and protocol_type != PROTOCOL_TYPE) or (
                protocol_name is not None and protocol_name != name):
            return SyncResult(E.inconsistent_group_protocol)
        # a new epoch began since the join: rejoin first (unless this member is giving
        # partitions up, for which it keeps its epoch as generation)
        mono = mono_ms()
        if g.group_epoch > m.member_epoch and not m.pending_revocation:
            self._rejoin_within_rebalance_timeout(g, m, mono)
            return SyncResult(E.rebalance_in_progress)
        m.sync_deadline_ms = None
        m.deadline_ms = mono + m.classic.session_timeout_ms
        self.wake_at(g.group_id, m.deadline_ms)
        try:
            version = metadata_version(meta)
        except MalformedProtocol:
            version = 0
        return SyncResult(E.none, encode_assignment(version, m.assigned), PROTOCOL_TYPE, name)

    def classic_heartbeat_consumer_group(self, g: ConsumerGroup, generation: int,
                                         member_id: str, instance_id: str | None) -> ErrorCode:
        err, m = self._classic_member(g, member_id, instance_id)
        if m is None or m.classic is None:
            return err
        if generation != m.member_epoch:
            return E.illegal_generation
        mono = mono_ms()
        m.deadline_ms = mono + m.classic.session_timeout_ms
        self.wake_at(g.group_id, m.deadline_ms)
        if m.member_epoch < g.group_epoch or m.pending_revocation or self._released_for(g, m):
            self._rejoin_within_rebalance_timeout(g, m, mono)
            return E.rebalance_in_progress
        return E.none

    def _rejoin_within_rebalance_timeout(self, g: ConsumerGroup, m: ConsumerMember,
                                         mono: float) -> None:
        """A classic member told to rejoin must do so within its rebalance timeout, or it is
        removed (Kafka's consumer group join timeout; the first one told counts)."""
        if m.revoke_deadline_ms is None:
            m.revoke_deadline_ms = mono + m.rebalance_timeout_ms
            self.wake_at(g.group_id, m.revoke_deadline_ms)

    @staticmethod
    def _released_for(g: ConsumerGroup, m: ConsumerMember) -> bool:
        # partitions of its target it does not have yet, now free for it to take
        target = g.target.get(m.member_id, {})
        missing = {(t, p) for t, ps in target.items() for p in ps
                   if p not in m.assigned.get(t, ())}
        if not missing:
            return False
        held = g.held_by_others(m.member_id)
        return all(p not in held.get(t, ()) for t, p in missing)

    def classic_leave_consumer_group(self, g: ConsumerGroup,
                                     members: Iterable[tuple[str, str | None]]
                                     ) -> list[tuple[str, str | None, ErrorCode]]:
        out: list[tuple[str, str | None, ErrorCode]] = []
        records: Records = []
        for mid, iid in members:
            if iid:
                m: Any = next((o for o in g.members.values() if o.instance_id == iid), None)
                if m is None:
                    out.append((mid, iid, E.unknown_member_id))
                    continue
                if mid and mid != m.member_id:
                    out.append((mid, iid, E.fenced_instance_id))
                    continue
            else:
                m = g.members.get(mid)
            if m is None or m.classic is None:
                out.append((mid, iid, E.unknown_member_id))
                continue
            self._consumer_remove(g, m, records, "left (LeaveGroup)")
            out.append((m.member_id, iid, E.none))
        if records:
            self.store.append(g.group_id, records)
        return out
