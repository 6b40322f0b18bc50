"""Committed offsets of every group, and the expiry rule of offsets.retention.minutes."""

from __future__ import annotations

from dataclasses import dataclass

TopicPartition = tuple[str, int]

# Kafka's offset.metadata.max.bytes default
OFFSET_METADATA_MAX_BYTES = 4096


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    # set only by OffsetCommit v2-v4 with a retention time (value schema v1)
    expire_timestamp_ms: int | None = None


class OffsetStore:
    """group id -> (topic, partition) -> CommittedOffset, as replayed and committed."""

    def __init__(self) -> None:
        self._groups: dict[str, dict[TopicPartition, CommittedOffset]] = {}

    def get(self, group_id: str) -> dict[TopicPartition, CommittedOffset]:
        return self._groups.get(group_id, {})

    def has_offsets(self, group_id: str) -> bool:
        return bool(self._groups.get(group_id))

    def groups(self) -> list[str]:
        return list(self._groups)

    def put(self, group_id: str, tp: TopicPartition, value: CommittedOffset) -> None:
        self._groups.setdefault(group_id, {})[tp] = value

    def remove(self, group_id: str, tp: TopicPartition) -> None:
        offsets = self._groups.get(group_id)
        if offsets is not None:
            offsets.pop(tp, None)
            if not offsets:
                del self._groups[group_id]

    def remove_group(self, group_id: str) -> list[TopicPartition]:
        return list(self._groups.pop(group_id, {}))

    def expired(self, group_id: str, now_ms: int, retention_ms: int,
                empty_since_ms: int | None, subscribed: set[str] | None) -> list[TopicPartition]:
        """Offsets to expire (Kafka 2.1+ rules, KIP-211).

        An offset with an explicit expire timestamp expires then. Otherwise the
        clock starts when the group became empty (a consumer group) or at the
        commit (a group that only stores offsets); a group with members keeps
        the offsets of the topics it subscribes to.
        """
        out = []
        for tp, v in self.get(group_id).items():
            if v.expire_timestamp_ms is not None and v.expire_timestamp_ms > 0:
                if now_ms >= v.expire_timestamp_ms:
                    out.append(tp)
                continue
            if subscribed is not None and tp[0] in subscribed:
                continue
            base = empty_since_ms if empty_since_ms is not None else v.commit_timestamp_ms
            if subscribed is not None and empty_since_ms is None:
                base = v.commit_timestamp_ms
            if now_ms - base >= retention_ms:
                out.append(tp)
        return out
