"""A KIP-848 consumer group: group epoch, target assignment, member epochs, reconciliation.

The server owns the assignment. The group epoch moves when membership or
subscriptions change; the target assignment is recomputed for it (assignment
epoch); each member then converges on its target one heartbeat at a time: it
first gives up what it must revoke (keeping its epoch), then gets the new
epoch and every target partition no other member still holds. Pure state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from odradek.coordinator.group.assignors import ASSIGNORS, DEFAULT_ASSIGNOR, Assignment
from odradek.coordinator.group.stats import REBALANCES

TopicSet = dict[str, set[int]]


@dataclass(slots=True)
class ClassicMemberMeta:
    """What a member that joined with JoinGroup (the classic protocol) keeps in a KIP-848
    group: its session timeout and the protocols it offered (the records' tag 0)."""
    session_timeout_ms: int
    protocols: list[tuple[str, bytes]]


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    server_assignor: str | None = None
    rebalance_timeout_ms: int = 300_000
    subscribed_topic_regex: str | None = None
    # the names plus the existing topics the regex matches, as of the last heartbeat
    resolved_topics: list[str] = field(default_factory=list)
    member_epoch: int = 0
    previous_member_epoch: int = -1
    assigned: TopicSet = field(default_factory=dict)
    pending_revocation: TopicSet = field(default_factory=dict)
    deadline_ms: float = 0.0
    revoke_deadline_ms: float | None = None
    # a classic member between its JoinGroup and its SyncGroup: removed if no SyncGroup
    # comes within its rebalance timeout (Kafka's consumer group sync timeout)
    sync_deadline_ms: float | None = None
    last_sent: dict[str, list[int]] | None = None
    # a static member that sent epoch -2: kept until its session runs out
    static_left: bool = False
    # set for a member that speaks JoinGroup/SyncGroup/Heartbeat (online migration)
    classic: ClassicMemberMeta | None = None

    @property
    def uses_classic(self) -> bool:
        return self.classic is not None

    @property
    def state(self) -> str:
        # ConsumerGroupCurrentMemberAssignmentValue.State: 0 stable, 1 unrevoked, 2 unreleased
        return "unrevoked_partitions" if self.pending_revocation else "stable"


def _count(ts: TopicSet) -> int:
    return sum(len(v) for v in ts.values())


def _clean(ts: TopicSet) -> TopicSet:
    return {t: set(ps) for t, ps in ts.items() if ps}


@dataclass(slots=True)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: Assignment = field(default_factory=dict)
    assignor_name: str = DEFAULT_ASSIGNOR
    # the partition counts the target was computed for
    topic_partitions: dict[str, int] = field(default_factory=dict)
    state_timestamp_ms: int = -1

    kind = "consumer"

    @property
    def state(self) -> str:
        if not self.members:
            return "empty"
        if self.group_epoch > self.assignment_epoch:
            return "assigning"
        if any(m.member_epoch != self.assignment_epoch or m.pending_revocation
               for m in self.members.values()):
            return "reconciling"
        return "stable"

    def subscribed_topics(self) -> set[str]:
        out: set[str] = set()
        for m in self.members.values():
            out.update(m.resolved_topics or m.subscribed_topic_names)
        return out

    def bump(self) -> None:
        self.group_epoch += 1
        REBALANCES.consumer += 1

    def compute_target(self, partitions: Mapping[str, int]) -> None:
        """The target assignment of the current group epoch over existing topics."""
        subs = {mid: set(m.resolved_topics or m.subscribed_topic_names)
                for mid, m in self.members.items()}
        wanted = {t: n for t, n in partitions.items() if any(t in s for s in subs.values())}
        assignor = ASSIGNORS.get(self._assignor(), ASSIGNORS[DEFAULT_ASSIGNOR])
        self.target = assignor(subs, wanted, self.target)
        self.topic_partitions = dict(wanted)
        self.assignment_epoch = self.group_epoch

    def _assignor(self) -> str:
        for m in self.members.values():
            if m.server_assignor:
                self.assignor_name = m.server_assignor
                return m.server_assignor
        return self.assignor_name

    def held_by_others(self, member_id: str) -> TopicSet:
        out: TopicSet = {}
        for mid, m in self.members.items():
            if mid == member_id:
                continue
            for src in (m.assigned, m.pending_revocation):
                for t, ps in src.items():
                    out.setdefault(t, set()).update(ps)
        return out

    def reconcile(self, member: ConsumerMember, owned: TopicSet | None) -> None:
        """Move `member` towards its target given what the client says it owns."""
        if member.pending_revocation and owned is not None:
            still = any(p in owned.get(t, ()) for t, ps in member.pending_revocation.items()
                        for p in ps)
            if not still:
                member.pending_revocation = {}
                member.revoke_deadline_ms = None
        if member.pending_revocation:
            return
        target = {t: set(ps) for t, ps in self.target.get(member.member_id, {}).items()}
        revoke = _clean({t: ps - target.get(t, set()) for t, ps in member.assigned.items()})
        if revoke:
            member.assigned = _clean({t: ps - revoke.get(t, set())
                                      for t, ps in member.assigned.items()})
            member.pending_revocation = revoke
            return
        others = self.held_by_others(member.member_id)
        member.assigned = _clean({t: ps - others.get(t, set()) for t, ps in target.items()})
        if member.member_epoch != self.assignment_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = self.assignment_epoch

    def remove(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.target.pop(member_id, None)
        return member

    def classic_count(self) -> int:
        return sum(1 for m in self.members.values() if m.classic is not None)

    def all_classic_except(self, member_id: str) -> bool:
        """Every member but `member_id` (one of the consumer protocol) is classic: Kafka's
        allMembersUseClassicProtocolExcept, the test for a downgrade."""
        m = self.members.get(member_id)
        return (m is not None and m.classic is None
                and self.classic_count() == len(self.members) - 1)

    def supports_classic(self, protocol_type: str, names: set[str]) -> bool:
        """Can a JoinGroup with these protocols join (Kafka's supportsClassicProtocols)?"""
        if protocol_type != "consumer" or not names:
            return False
        classic = [m.classic for m in self.members.values() if m.classic is not None]
        if not classic:
            return True
        return any(all(n in {p for p, _ in c.protocols} for c in classic) for n in names)

    def owned_count(self) -> int:
        return sum(_count(m.assigned) for m in self.members.values())
