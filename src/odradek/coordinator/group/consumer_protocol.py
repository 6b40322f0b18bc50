"""The KIP-848 consumer group protocol (ConsumerGroupHeartbeat): the server-side
assignment. Each heartbeat may move the group epoch (membership or subscriptions changed),
recompute the target assignment and reconcile the member towards it (consumer.py holds
that state machine); every change is a record of `__consumer_offsets` appended before the
answer goes out. Sessions and revocation deadlines are checked by the periodic sweep.
"""

from __future__ import annotations

import copy
import logging
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from odradek.coordinator import offsets_topic as ot
from odradek.coordinator.group.api import (
    Group,
    GroupConfig,
    HeartbeatResult,
    TopicLookup,
    mono_ms,
    now_ms,
)
from odradek.coordinator.group.classic import ClassicGroup
from odradek.coordinator.group.consumer import ConsumerGroup, ConsumerMember
from odradek.coordinator.group.migration import (
    MigrationPolicy,
    consumer_group_full,
    group_full_message,
    upgrade_refusal,
)
from odradek.coordinator.group.store import OffsetsTopicStore
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)
E = ErrorCode


class ConsumerProtocol:
    """Mixin of GroupCoordinator: KIP-848 consumer groups."""

    groups: dict[str, Group]
    store: OffsetsTopicStore
    config: GroupConfig
    topics: TopicLookup
    all_topics: Callable[[], Iterable[str]]
    coordinator_error: Callable[[str], ErrorCode]
    # a group's own configs (resource type GROUP, from the metadata image): they override
    # group.consumer.session.timeout.ms and group.consumer.heartbeat.interval.ms for it
    group_overrides: Callable[[str], Mapping[str, str]]
    wake_at: Callable[[str, float], None]

    def consumer_timeouts(self, group_id: str) -> tuple[int, int]:
        """(session timeout, heartbeat interval) of a consumer group, in ms."""
        overrides = self.group_overrides(group_id) if group_id else {}
        return (_int_or(overrides.get("consumer.session.timeout.ms"),
                        self.config.consumer_session_timeout_ms),
                _int_or(overrides.get("consumer.heartbeat.interval.ms"),
                        self.config.consumer_heartbeat_interval_ms))

    # ================================================================ KIP-848

    def consumer_group_heartbeat(self, group_id: str, member_id: str, member_epoch: int,
                                 instance_id: str | None, rack_id: str | None,
                                 rebalance_timeout_ms: int, subscribed: list[str] | None,
                                 server_assignor: str | None,
                                 owned: dict[str, set[int]] | None, client_id: str,
                                 client_host: str, subscribed_regex: str | None = None
                                 ) -> HeartbeatResult:
        session_ms, interval = self.consumer_timeouts(group_id)
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
        records: list[tuple[bytes, bytes | None]] = []
        # Kafka's CoordinatorRuntime reverts a group to its last written state when the
        # records of a heartbeat cannot be appended: keep that state to put back (a classic
        # group is not changed by its upgrade, only replaced: it is its own last state)
        last_written = g if isinstance(g, ClassicGroup) else copy.deepcopy(g)
        if isinstance(g, ClassicGroup):
            if g.members:
                if member_epoch != 0:
                    return HeartbeatResult(E.group_id_not_found,
                                           f"Group {group_id} is not a consumer group.")
                limit = self.config.consumer_max_size
                if len(g.members) == limit and upgrade_refusal(
                        MigrationPolicy.parse(self.config.migration_policy), g, limit) is None:
                    # upgraded, it would be full for the newcomer (Kafka converts, then
                    # refuses and writes nothing): it stays classic
                    return HeartbeatResult(E.group_max_size_reached, group_full_message(limit))
                upgraded = self._upgrade(g, records)
                if isinstance(upgraded, HeartbeatResult):
                    return upgraded
                g = upgraded
            else:
                if member_epoch != 0:
                    return HeartbeatResult(E.unknown_member_id)
                # an empty classic group (offsets only) becomes a consumer group
                records.append((ot.encode_key(ot.RecordKey(ot.GROUP_METADATA_KEY, group_id)),
                                None))
                g = None
        if g is None:
            if member_epoch != 0:
                return HeartbeatResult(E.unknown_member_id,
                                       f"Member {member_id} is not a member of group {group_id}.")
            g = ConsumerGroup(group_id, state_timestamp_ms=now_ms())
            self.groups[group_id] = g
        if member_epoch not in (-1, -2) and consumer_group_full(
                g, member_id, self.config.consumer_max_size):
            return HeartbeatResult(E.group_max_size_reached,
                                   group_full_message(self.config.consumer_max_size))
        mono = mono_ms()
        if member_epoch == -2 and g.members.get(member_id) is not None \
                and g.members[member_id].instance_id:
            # a static member leaving for a while (KIP-848): it keeps its place and its
            # partitions for a session timeout, so that its next incarnation takes them over
            m = g.members[member_id]
            m.deadline_ms = mono + session_ms
            self.wake_at(group_id, m.deadline_ms)
            m.static_left = True
            log.info("static member %s (%s) of consumer group %r left temporarily", member_id,
                     m.instance_id, group_id)
            return HeartbeatResult(E.none, None, member_id, member_epoch, 0)
        if member_epoch in (-1, -2):
            m = g.members.get(member_id)
            if m is None or m.classic is not None:
                return HeartbeatResult(E.unknown_member_id)
            self._fence_member(g, m, records, "left")
            self.store.append(group_id, records)
            return HeartbeatResult(E.none, None, member_id, member_epoch, 0)
        member = g.members.get(member_id) if member_id else None
        replaced = False
        if member_epoch == 0:
            if member is None and instance_id:
                other = next((o for o in g.members.values() if o.instance_id == instance_id),
                             None)
                if other is not None and not other.static_left:
                    if records and last_written is not None:
                        # a conversion not written: the group stays as it was
                        self.groups[group_id] = last_written
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
        member.deadline_ms = mono + session_ms
        self.wake_at(group_id, member.deadline_ms)
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
        self._refresh_target(g, records)
        before = (member.member_epoch, {t: set(p) for t, p in member.assigned.items()},
                  bool(member.pending_revocation))
        g.reconcile(member, owned)
        if member.pending_revocation and member.revoke_deadline_ms is None:
            member.revoke_deadline_ms = mono + member.rebalance_timeout_ms
            self.wake_at(group_id, member.revoke_deadline_ms)
        after = (member.member_epoch, member.assigned, bool(member.pending_revocation))
        if before != after or member_epoch == 0:
            records.append(self._current_assignment_record(g, member))
        err = self.store.append(group_id, records)
        if err != E.none:
            if last_written is None:
                self.groups.pop(group_id, None)
            else:
                self.groups[group_id] = last_written
            return HeartbeatResult(err)
        assignment = {t: sorted(ps) for t, ps in sorted(member.assigned.items())}
        send = assignment if (assignment != member.last_sent or member_epoch == 0
                              or owned is not None) else None
        if send is not None:
            member.last_sent = assignment
        return HeartbeatResult(E.none, None, member.member_id, member.member_epoch, interval, send)

    def _refresh_target(self, g: ConsumerGroup,
                        records: list[tuple[bytes, bytes | None]]) -> None:
        """After a member's heartbeat or join (of either protocol) changed the group: bump
        the group epoch when the subscribed topics' partition counts moved (a topic created,
        partitions added), and compute a new target assignment when the group epoch is past
        the assignment's (its records go to `records`)."""
        counts = self._partition_counts(g.subscribed_topics())
        if counts != g.topic_partitions and g.group_epoch == g.assignment_epoch:
            g.bump()
        self._maybe_new_target(g, counts, records)

    def _maybe_new_target(self, g: ConsumerGroup, counts: dict[str, int],
                          records: list[tuple[bytes, bytes | None]]) -> None:
        """A new target assignment when the group epoch moved past the assignment's."""
        if g.group_epoch <= g.assignment_epoch:
            return
        g.compute_target(counts)
        records.append(self._epoch_record(g))
        records.extend(self._target_records(g))
        log.info("consumer group %r: new target assignment at epoch %d", g.group_id,
                 g.group_epoch)

    def _epoch_record(self, g: ConsumerGroup) -> tuple[bytes, bytes | None]:
        return (ot.encode_key(ot.RecordKey(ot.CONSUMER_GROUP_METADATA_KEY, g.group_id)),
                ot.encode_value(ot.CONSUMER_GROUP_METADATA_KEY, {"epoch": g.group_epoch}))

    def _target_records(self, g: ConsumerGroup) -> list[tuple[bytes, bytes | None]]:
        out: list[tuple[bytes, bytes | None]] = []
        for mid, tps in g.target.items():
            out.append((ot.encode_key(ot.RecordKey(
                ot.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY, g.group_id, member_id=mid)),
                ot.encode_value(ot.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY,
                                {"topic_partitions": self._by_topic_id(tps)})))
        out.append((ot.encode_key(ot.RecordKey(
            ot.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY, g.group_id)),
            ot.encode_value(ot.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY,
                            {"assignment_epoch": g.assignment_epoch})))
        return out

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
                    "rebalance_timeout_ms": m.rebalance_timeout_ms,
                    "classic_member_metadata": None if m.classic is None else {
                        "session_timeout_ms": m.classic.session_timeout_ms,
                        "supported_protocols": [{"name": n, "metadata": b}
                                                for n, b in m.classic.protocols]}}))

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
            sync_late = m.sync_deadline_ms is not None and mono >= m.sync_deadline_ms
            if expired or revoke_late or sync_late:
                records: list[tuple[bytes, bytes | None]] = []
                downgraded = self._fence_member(
                    g, m, records, "timed out (session) in" if expired
                    else "did not sync within its rebalance timeout in" if sync_late
                    else "did not revoke its partitions in time in")
                self.store.append(g.group_id, records)
                if downgraded:
                    return

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


def _int_or(raw: str | None, default: int) -> int:
    # overrides were validated when written; a value that does not parse falls back
    try:
        return default if raw is None else int(raw)
    except ValueError:
        return default
