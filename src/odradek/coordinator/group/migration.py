"""Online migration between the classic and the consumer (KIP-848) group protocols: the
rules, as pure functions over group state.

Kafka 4 converts a group in place:

- upgrade: a ConsumerGroupHeartbeat joins a non-empty classic group whose members use the
  "consumer" embedded protocol. The classic group becomes a consumer group at the classic
  generation: each classic member becomes a member of that epoch, keeping the partitions
  of its last assignment as both its current and its target assignment, and remembering
  its session timeout and protocols (it still speaks JoinGroup/SyncGroup/Heartbeat);
- downgrade: the last member of the consumer protocol leaves (or is fenced) and the ones
  left are all classic. The consumer group becomes a Stable classic group at the group
  epoch, each member holding its target assignment as ConsumerProtocol bytes, and a
  rebalance starts at once.

`group.consumer.migration.policy` allows either, both or neither for non-empty groups;
empty groups convert either way whatever it says. No I/O here: the coordinator
(classic_members.py) writes the records and answers the requests.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from odradek.coordinator.group.classic import ClassicGroup, ClassicMember, GroupState
from odradek.coordinator.group.consumer import ClassicMemberMeta, ConsumerGroup, ConsumerMember
from odradek.protocol.errors import ProtocolError
from odradek.protocol.primitives import Reader, Writer

PROTOCOL_TYPE = "consumer"
# ConsumerProtocolAssignment has the same layout in versions 0-3
MAX_ASSIGNMENT_VERSION = 3


class MigrationPolicy(enum.Enum):
    BIDIRECTIONAL = "bidirectional"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    DISABLED = "disabled"

    @classmethod
    def parse(cls, raw: str | None) -> MigrationPolicy:
        """Kafka's parse: case-insensitive; anything else is DISABLED (the config's
        validator refuses it before it gets here)."""
        try:
            return cls((raw or "").strip().lower())
        except ValueError:
            return cls.DISABLED

    @property
    def upgrade(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.UPGRADE)

    @property
    def downgrade(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.DOWNGRADE)


class MalformedProtocol(ValueError):
    """The embedded ConsumerProtocol bytes of a member cannot be read."""


@dataclass(slots=True)
class Subscription:
    """A ConsumerProtocolSubscription (versions 0-3)."""
    version: int
    topics: list[str]
    # v1+: the partitions the member owns as it joins (None before v1: not said)
    owned: dict[str, set[int]] | None = None
    rack_id: str | None = None


def parse_subscription(data: bytes) -> Subscription:
    try:
        r = Reader(data)
        version = r.int16()
        if version < 0:
            raise MalformedProtocol(f"subscription version {version}")
        topics = [r.string() for _ in range(r.array_len() or 0)]
        r.nullable_bytes()  # user data: the server assignor has no use for it
        owned: dict[str, set[int]] | None = None
        rack = None
        if version >= 1:
            owned = {}
            for _ in range(r.array_len() or 0):
                topic = r.string()
                owned.setdefault(topic, set()).update(
                    r.int32() for _ in range(r.array_len() or 0))
        if version >= 2:
            r.int32()  # generation id
        if version >= 3:
            rack = r.nullable_string()
        return Subscription(version, topics, owned, rack)
    except (ProtocolError, UnicodeDecodeError) as exc:
        raise MalformedProtocol(str(exc)) from exc


def metadata_version(data: bytes) -> int:
    """The version a member's subscription is in: its assignment goes back in that one."""
    if len(data) < 2:
        raise MalformedProtocol("subscription shorter than its version")
    return min(max(int.from_bytes(data[:2], "big", signed=True), 0), MAX_ASSIGNMENT_VERSION)


def parse_assignment(data: bytes) -> dict[str, set[int]]:
    """The partitions of a ConsumerProtocolAssignment; {} for no assignment yet."""
    if not data:
        return {}
    try:
        r = Reader(data)
        r.int16()
        out: dict[str, set[int]] = {}
        for _ in range(r.array_len() or 0):
            topic = r.string()
            out.setdefault(topic, set()).update(r.int32() for _ in range(r.array_len() or 0))
        return out
    except (ProtocolError, UnicodeDecodeError) as exc:
        raise MalformedProtocol(str(exc)) from exc


def encode_assignment(version: int, partitions: dict[str, set[int]] | dict[str, list[int]]
                      ) -> bytes:
    """A ConsumerProtocolAssignment of `version` (no user data: the server assigned it)."""
    w = Writer()
    w.write_int16(version)
    topics = sorted((t, sorted(ps)) for t, ps in partitions.items() if ps)
    w.write_array_len(len(topics))
    for topic, parts in topics:
        w.write_string(topic)
        w.write_array_len(len(parts))
        for p in parts:
            w.write_int32(p)
    w.write_nullable_bytes(None)
    return w.getvalue()


def first_protocol(meta: ClassicMemberMeta) -> tuple[str, bytes]:
    return meta.protocols[0]


# ------------------------------------------------------------------ the rules


def upgrade_refusal(policy: MigrationPolicy, g: ClassicGroup,
                    consumer_max_size: int = 2**31 - 1) -> str | None:
    """Why a non-empty classic group may not become a consumer group; None if it may."""
    if not policy.upgrade:
        return "the online upgrade is disabled (group.consumer.migration.policy)"
    if g.protocol_type != PROTOCOL_TYPE:
        return "the group does not use the consumer embedded protocol"
    if len(g.members) > consumer_max_size:
        return (f"the group size ({len(g.members)}) exceeds the consumer group maximum size "
                f"(group.consumer.max.size={consumer_max_size})")
    return None


def may_downgrade(policy: MigrationPolicy, g: ConsumerGroup, leaving_id: str,
                  classic_max_size: int = 2**31 - 1) -> bool:
    """The consumer group becomes classic as `leaving_id` (of the consumer protocol) goes:
    every other member is classic, at least one stays, the policy allows it, and the ones
    left fit a classic group (group.max.size; Kafka's validateOnlineDowngradeWithFencedMember).
    """
    return (g.all_classic_except(leaving_id) and len(g.members) > 1 and policy.downgrade
            and len(g.members) - 1 <= classic_max_size)


def may_downgrade_replacing(policy: MigrationPolicy, g: ConsumerGroup, replaced_id: str,
                            classic_max_size: int = 2**31 - 1) -> bool:
    """A classic static member takes the place of `replaced_id`, the last member of the
    consumer protocol: the group becomes classic with the newcomer in its place (Kafka's
    validateOnlineDowngradeWithReplacedMemberId), if its members fit a classic group."""
    return (g.all_classic_except(replaced_id) and policy.downgrade
            and len(g.members) <= classic_max_size)


def consumer_group_full(g: ConsumerGroup, member_id: str, consumer_max_size: int) -> bool:
    """Kafka's throwIfConsumerGroupIsFull: a member not yet in the group (`member_id` empty
    or unknown) may not join one of group.consumer.max.size members, of either protocol."""
    return len(g.members) >= consumer_max_size and (not member_id or member_id not in g.members)


def group_full_message(consumer_max_size: int) -> str:
    return (f"The consumer group has reached its maximum capacity of {consumer_max_size} "
            f"members.")


def classic_to_consumer(g: ClassicGroup, state_timestamp_ms: int) -> ConsumerGroup:
    """Kafka's ConsumerGroup.fromClassicGroup: members at the generation as epoch, their
    last assignment as current and target assignment. Raises MalformedProtocol."""
    out = ConsumerGroup(g.group_id, group_epoch=g.generation, assignment_epoch=g.generation,
                        state_timestamp_ms=state_timestamp_ms)
    for m in g.members.values():
        # a group still in its first rebalance has no protocol yet: each member's first
        raw = (m.metadata_for(g.protocol_name) if g.protocol_name
               else (m.protocols[0][1] if m.protocols else b""))
        sub = parse_subscription(raw)
        assigned = parse_assignment(m.assignment)
        cm = ConsumerMember(m.member_id, m.group_instance_id, sub.rack_id, m.client_id,
                            m.client_host, list(sub.topics), None, m.rebalance_timeout_ms)
        cm.resolved_topics = sorted(sub.topics)
        cm.member_epoch = cm.previous_member_epoch = g.generation
        cm.assigned = {t: set(ps) for t, ps in assigned.items() if ps}
        cm.classic = ClassicMemberMeta(m.session_timeout_ms, [(n, bytes(b)) for n, b in
                                                              m.protocols])
        cm.deadline_ms = m.deadline_ms
        out.members[m.member_id] = cm
        out.target[m.member_id] = {t: sorted(ps) for t, ps in cm.assigned.items()}
    return out


def consumer_to_classic(g: ConsumerGroup, leaving_id: str, now_ms: int) -> ClassicGroup:
    """Kafka's ClassicGroup.fromConsumerGroup: a Stable classic group at the group epoch,
    without `leaving_id`, each member's target assignment as its ConsumerProtocol bytes.
    Raises MalformedProtocol."""
    out = ClassicGroup(g.group_id, GroupState.STABLE, g.group_epoch, PROTOCOL_TYPE,
                       state_timestamp_ms=now_ms)
    for mid, m in g.members.items():
        if mid == leaving_id:
            continue
        assert m.classic is not None  # may_downgrade held
        cm = ClassicMember(mid, m.instance_id, m.client_id, m.client_host,
                           m.rebalance_timeout_ms, m.classic.session_timeout_ms, PROTOCOL_TYPE,
                           list(m.classic.protocols))
        cm.deadline_ms = m.deadline_ms
        out.add(cm)
    out.protocol_name = out.select_protocol()
    for mid, cm in out.members.items():
        version = metadata_version(cm.metadata_for(out.protocol_name))
        target = g.target.get(mid, {})
        cm.assignment = encode_assignment(version, {t: set(ps) for t, ps in target.items()})
    return out
