"""A classic (JoinGroup/SyncGroup) group: members, generations, protocol selection.

State only, no I/O and no timers: the coordinator drives it. A member waiting
for its JoinGroup or SyncGroup response holds a `waiter` (anything with
`done()` and `set_result()`, an asyncio.Future in the node) that the
coordinator completes.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from odradek.coordinator.group.stats import REBALANCES
from odradek.coordinator.offsets_topic import parse_assignment, parse_subscription_topics


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_S = GroupState
# Kafka's ClassicGroupState: the states each state may be entered from
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
    _S.PREPARING_REBALANCE: frozenset({_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.DEAD: frozenset({_S.STABLE, _S.PREPARING_REBALANCE, _S.COMPLETING_REBALANCE,
                        _S.EMPTY, _S.DEAD}),
}


class IllegalGroupTransition(RuntimeError):
    """A transition the table does not allow: a coordinator bug, never a client's doing."""


@dataclass(slots=True)
class ClassicMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_waiter: Any = None
    sync_waiter: Any = None
    # monotonic ms after which the member is dead unless it heartbeats
    deadline_ms: float = 0.0
    is_new: bool = False

    def metadata_for(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def same_protocols(self, protocols: list[tuple[str, bytes]]) -> bool:
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.protocols]

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None and not self.join_waiter.done()

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_waiter is not None and not self.sync_waiter.done()


@dataclass(slots=True)
class ClassicGroup:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, ClassicMember] = field(default_factory=dict)
    # member ids handed out with MEMBER_ID_REQUIRED, mapped to their deadline
    pending_members: dict[str, float] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    state_timestamp_ms: int = -1
    # the initial rebalance delay of a group that was empty is running
    initial_delay: bool = False
    new_member_joined: bool = False
    join_timer: Any = None
    join_deadline_ms: float = 0.0

    kind = "classic"

    # --- state ------------------------------------------------------------

    def transition(self, state: GroupState, now_ms: int) -> None:
        """The one place a group's state changes, checked against VALID_PREVIOUS_STATES."""
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalGroupTransition(f"group {self.group_id!r} cannot go from "
                                         f"{self.state.value} to {state.value}")
        self.state = state
        self.state_timestamp_ms = now_ms
        if state is GroupState.PREPARING_REBALANCE:
            REBALANCES.classic_started += 1
        elif state is GroupState.COMPLETING_REBALANCE:
            REBALANCES.classic_completed += 1

    def is_empty(self) -> bool:
        return not self.members

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    # --- protocols --------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        if not sets:
            return set()
        return set.intersection(*sets)

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Can a member with these protocols join (Kafka's supportsProtocols)?"""
        names = {name for name, _ in protocols}
        if not protocol_type or not names:
            return False
        if not self.members:
            return True
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol that every member supports."""
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter()
        order: list[str] = []
        for m in self.members.values():
            choice = next(name for name, _ in m.protocols if name in candidates)
            votes[choice] += 1
            if choice not in order:
                order.append(choice)
        best = max(votes.values())
        return next(name for name in order if votes[name] == best)

    # --- membership -------------------------------------------------------

    def add(self, member: ClassicMember) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> ClassicMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static(self, old_id: str, new_id: str) -> ClassicMember:
        """A static member rejoined with a new member id: the old one is fenced."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        assert member.group_instance_id is not None
        self.static_members[member.group_instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        return member

    def all_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # --- what the group consumes (protocol type "consumer") -----------------

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to; None when not known (not a consumer group)."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            topics.update(parse_subscription_topics(m.metadata_for(self.protocol_name)))
        return topics

    def assigned(self) -> dict[tuple[str, int], str]:
        """(topic, partition) -> member id from the members' current assignments."""
        out: dict[tuple[str, int], str] = {}
        if self.protocol_type != "consumer":
            return out
        for m in self.members.values():
            for topic, parts in parse_assignment(m.assignment):
                for p in parts:
                    out[(topic, p)] = m.member_id
        return out
