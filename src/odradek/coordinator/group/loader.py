"""Loading a `__consumer_offsets` partition: its records, replayed in log order, rebuild the
groups and committed offsets of the partition's group ids (Kafka's
GroupCoordinatorShard.replay). KIP-848 members, current and target assignments come in
separate records; they are gathered per group and put together once the partition is read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from odradek.coordinator import offsets_topic as ot
from odradek.coordinator.group.api import Group, GroupConfig, mono_ms
from odradek.coordinator.group.classic import ClassicGroup, ClassicMember, GroupState
from odradek.coordinator.group.consumer import ClassicMemberMeta, ConsumerGroup, ConsumerMember
from odradek.coordinator.group.offsets import CommittedOffset, OffsetStore
from odradek.coordinator.group.store import OffsetsTopicStore


class GroupLoader:
    """Mixin of GroupCoordinator: the replay of one partition."""

    groups: dict[str, Group]
    offsets: OffsetStore
    store: OffsetsTopicStore
    config: GroupConfig
    consumer_timeouts: Callable[[str], tuple[int, int]]

    def replay_partition(self, partition: int) -> int:
        """Replay one `__consumer_offsets` partition into memory; the records read.
        Blocking (a thread when loaded while the node serves)."""
        count = 0
        members: dict[str, dict[str, dict[str, Any]]] = {}
        current: dict[str, dict[str, dict[str, Any]]] = {}
        targets: dict[str, dict[str, dict[str, Any]]] = {}
        for key, value, _ts in self.store.replay([partition]):
            count += 1
            self._apply_record(key, value, members, current, targets)
        # a copy: requests for other partitions change the groups while this runs
        for gid, g in list(self.groups.items()):
            if isinstance(g, ConsumerGroup) and self.store.partition_for(gid) == partition:
                self._restore_consumer_group(g, members.get(gid, {}), current.get(gid, {}),
                                             targets.get(gid, {}))
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
            # a replayed group starts in its loaded state (no transition, as in Kafka)
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
        deadline = mono_ms() + self.consumer_timeouts(g.group_id)[0]
        for mid, v in members.items():
            m = ConsumerMember(mid, v.get("instance_id"), v.get("rack_id"), v["client_id"],
                               v["client_host"], list(v["subscribed_topic_names"]),
                               v.get("server_assignor"), v.get("rebalance_timeout_ms", 300_000),
                               v.get("subscribed_topic_regex"))
            m.resolved_topics = sorted(set(m.subscribed_topic_names)
                                       | self._matching(m.subscribed_topic_regex))
            m.deadline_ms = deadline
            classic = v.get("classic_member_metadata")
            if classic is not None:
                m.classic = ClassicMemberMeta(classic["session_timeout_ms"], [
                    (p["name"], bytes(p["metadata"])) for p in classic["supported_protocols"]])
                m.deadline_ms = mono_ms() + m.classic.session_timeout_ms
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
