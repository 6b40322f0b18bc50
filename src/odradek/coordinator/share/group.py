"""Share-group membership (KIP-932's ShareGroupHeartbeat), sans-I/O.

A member joins with epoch 0 and its subscribed topics, heartbeats with the epoch it was
given, and leaves with epoch -1. The assignment is server-side and, as Kafka's
SimpleAssignor gives it, every member gets every partition of the topics it subscribes to:
a share group spreads the records of a partition over its members by acquisition, not by
owning partitions, so there is nothing to revoke and a member's epoch moves straight to the
group's. The group epoch moves when a member joins or leaves, a subscription changes or a
subscribed topic appears or grows. A member that does not heartbeat within its session
timeout is removed (`expire`).

Clocks are passed in (ms); topic metadata comes through `TopicLookup` (name -> (topic id,
partition count) or None).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from odradek.protocol.errors import ErrorCode

E = ErrorCode
TopicLookup = Callable[[str], tuple[uuid.UUID, int] | None]
LEAVE_EPOCH = -1


@dataclass(slots=True)
class ShareMember:
    member_id: str
    member_epoch: int
    subscribed: tuple[str, ...]
    rack_id: str | None
    client_id: str
    client_host: str
    deadline: float  # ms: the session ends here unless a heartbeat comes
    assignment: dict[str, list[int]] = field(default_factory=dict)


@dataclass(slots=True)
class HeartbeatAnswer:
    error: ErrorCode
    message: str | None
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    # topic name -> partitions, when the member must be told (joined or changed); else None
    assignment: dict[str, list[int]] | None = None


class ShareGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ShareMember] = {}
        # topic -> (id, partitions) of the subscribed topics when the epoch last moved
        self.topology: dict[str, tuple[uuid.UUID, int]] = {}
        # topic id -> (name, partitions) ever assigned to a member: where the group's
        # share-partition state may be, on any node's share coordinator (Kafka's
        # ShareGroupStatePartitionMetadata "initialized topics"); outlives the members
        self.initialized: dict[uuid.UUID, tuple[str, frozenset[int]]] = {}

    def note_initialized(self) -> bool:
        """Add the assigned topic-partitions (the topology) to `initialized`: whether it
        grew (its record is to be written)."""
        grew = False
        for name, (tid, count) in self.topology.items():
            name_was, parts = self.initialized.get(tid, (name, frozenset()))
            if len(parts) < count or name_was != name:
                self.initialized[tid] = (name, parts | frozenset(range(count)))
                grew = True
        return grew

    @property
    def state(self) -> str:
        """Kafka's ShareGroupState names: Empty, Stable, Dead."""
        return "Stable" if self.members else "Empty"

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed}

    def refresh(self, topics: TopicLookup) -> bool:
        topology = {}
        for name in sorted(self.subscribed_topics()):
            info = topics(name)
            if info is not None:
                topology[name] = info
        if topology == self.topology:
            return False
        self.topology = topology
        return True

    def _target(self, member: ShareMember) -> dict[str, list[int]]:
        return {t: list(range(self.topology[t][1])) for t in member.subscribed
                if t in self.topology}

    def heartbeat(self, member_id: str, member_epoch: int, subscribed: Iterable[str] | None,
                  rack_id: str | None, client_id: str, client_host: str, now: float,
                  session_timeout_ms: int, heartbeat_interval_ms: int, max_size: int,
                  topics: TopicLookup) -> HeartbeatAnswer:
        def fail(code: ErrorCode, message: str) -> HeartbeatAnswer:
            return HeartbeatAnswer(code, message, member_id, member_epoch, 0)

        if not member_id:
            return fail(E.invalid_request, "MemberId can't be empty.")
        if member_epoch < LEAVE_EPOCH:
            return fail(E.invalid_request, f"MemberEpoch is invalid: {member_epoch}.")
        member = self.members.get(member_id)
        if member_epoch == LEAVE_EPOCH:
            if member is not None:
                del self.members[member_id]
                self.group_epoch += 1
                self.refresh(topics)
            return HeartbeatAnswer(E.none, None, member_id, LEAVE_EPOCH, 0)
        names = None if subscribed is None else tuple(sorted(set(subscribed)))
        changed = False
        if member_epoch == 0:
            if not names:
                return fail(E.invalid_request,
                            "SubscribedTopicNames must be set in first request.")
            if member is None:
                if len(self.members) >= max_size:
                    return fail(E.group_max_size_reached,
                                f"The share group has reached its maximum capacity of "
                                f"{max_size} members.")
                member = ShareMember(member_id, 0, names, rack_id, client_id, client_host,
                                     now + session_timeout_ms)
                self.members[member_id] = member
                changed = True
        elif member is None:
            return fail(E.unknown_member_id,
                        f"Member {member_id} is not a member of group {self.group_id}.")
        elif member_epoch != member.member_epoch:
            return fail(E.fenced_member_epoch,
                        f"The share group member has a smaller member epoch ({member_epoch})"
                        f" than the one known by the group coordinator "
                        f"({member.member_epoch}).")
        member.deadline = now + session_timeout_ms
        if names is not None and names != member.subscribed:
            member.subscribed = names
            changed = True
        if rack_id is not None:
            member.rack_id = rack_id
        if self.refresh(topics) or changed:
            self.group_epoch += 1
        tell = member_epoch == 0
        if member.member_epoch != self.group_epoch:
            target = self._target(member)
            tell = tell or target != member.assignment
            member.assignment = target
            member.member_epoch = self.group_epoch
            self.assignment_epoch = self.group_epoch
        return HeartbeatAnswer(E.none, None, member_id, member.member_epoch,
                               heartbeat_interval_ms,
                               dict(member.assignment) if tell else None)

    def expire(self, now: float, topics: TopicLookup) -> list[str]:
        """Remove the members whose session ran out; their ids."""
        gone = [m.member_id for m in self.members.values() if m.deadline <= now]
        for member_id in gone:
            del self.members[member_id]
        if gone:
            self.group_epoch += 1
            self.refresh(topics)
        return gone

    def next_deadline(self) -> float | None:
        return min((m.deadline for m in self.members.values()), default=None)

    def is_assigned(self, member_id: str, topic: str, partition: int) -> bool:
        m = self.members.get(member_id)
        return m is not None and partition in m.assignment.get(topic, ())
