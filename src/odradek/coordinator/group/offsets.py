"""Committed offsets of every group, and the expiry rule of offsets.retention.minutes.

The store holds the latest offsets, those of every record written to `__consumer_offsets`,
which the coordinator's writes build on; a read (OffsetFetch) sees them only once their
record is committed (the partition's high watermark passed it), as Kafka's coordinator
reads at its last committed offset: an offset whose record is then lost with the leadership
was never served. For that each change made by a record not committed yet keeps the value
it replaced, until the high watermark passes the record.
"""

from __future__ import annotations

from dataclasses import dataclass

TopicPartition = tuple[str, int]
# (the end offset of the record making a change, the partition's high watermark then), for
# a change whose record is not committed yet; None: it is
Unsettled = tuple[int, int] | None

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
        # group -> partition -> [(end offset of the changing record, the value it replaced)]
        # in log order, for the changes whose records are not committed yet
        self._unsettled: dict[str, dict[TopicPartition, list[tuple[int, CommittedOffset | None]]]] = {}

    def get(self, group_id: str) -> dict[TopicPartition, CommittedOffset]:
        return self._groups.get(group_id, {})

    def has_offsets(self, group_id: str) -> bool:
        return bool(self._groups.get(group_id))

    def groups(self) -> list[str]:
        return list(self._groups)

    def put(self, group_id: str, tp: TopicPartition, value: CommittedOffset,
            at: Unsettled = None) -> None:
        self._note(group_id, tp, at)
        self._groups.setdefault(group_id, {})[tp] = value

    def remove(self, group_id: str, tp: TopicPartition, at: Unsettled = None) -> None:
        self._note(group_id, tp, at)
        offsets = self._groups.get(group_id)
        if offsets is not None:
            offsets.pop(tp, None)
            if not offsets:
                del self._groups[group_id]

    def remove_group(self, group_id: str, at: Unsettled = None) -> list[TopicPartition]:
        for tp in self.get(group_id):
            self._note(group_id, tp, at)
        if at is None:
            self._unsettled.pop(group_id, None)
        return list(self._groups.pop(group_id, {}))

    def committed(self, group_id: str, high_watermark: int) -> dict[TopicPartition, CommittedOffset]:
        """The group's offsets as of the records below `high_watermark`: what reads see."""
        latest = self.get(group_id)
        unsettled = self._settle(group_id, high_watermark)
        if not unsettled:
            return latest
        view = dict(latest)
        for tp, changes in unsettled.items():
            before = changes[0][1]
            if before is None:
                view.pop(tp, None)
            else:
                view[tp] = before
        return view

    def unsettled(self, group_id: str, high_watermark: int) -> set[TopicPartition]:
        """The partitions with a change whose record is at or past `high_watermark`."""
        return set(self._settle(group_id, high_watermark))

    def _settle(self, group_id: str, high_watermark: int
                ) -> dict[TopicPartition, list[tuple[int, CommittedOffset | None]]]:
        """Forget the group's changes committed by `high_watermark`; those left."""
        unsettled = self._unsettled.get(group_id)
        if not unsettled:
            return {}
        for tp, changes in list(unsettled.items()):
            while changes and changes[0][0] <= high_watermark:
                changes.pop(0)  # committed: the latest value holds from it on
            if not changes:
                del unsettled[tp]
        if not unsettled:
            del self._unsettled[group_id]
        return unsettled

    def _note(self, group_id: str, tp: TopicPartition, at: Unsettled) -> None:
        if at is None:
            # a change committed at once: every earlier record of the partition is too
            per_group = self._unsettled.get(group_id)
            if per_group is not None and per_group.pop(tp, None) is not None and not per_group:
                del self._unsettled[group_id]
            return
        end, high_watermark = at
        changes = self._unsettled.setdefault(group_id, {}).setdefault(tp, [])
        while changes and changes[0][0] <= high_watermark:
            changes.pop(0)  # committed since: a group that never reads keeps no history
        changes.append((end, self.get(group_id).get(tp)))

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
