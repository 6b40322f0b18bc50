"""Partition reassignment (a mixin of `Controller`): AlterPartitionReassignments (45) and
ListPartitionReassignments (46), as Kafka's KRaft controller does them.

A reassignment to target T of a partition whose replicas are C (any ongoing reassignment's
adding replicas included) writes one
PartitionChangeRecord: replicas = T followed by C - T, adding = T - C, removing = C - T. The
new replicas fetch and the leader adds them to the ISR with AlterPartition; once every
replica of T is in the ISR, the change that says so also completes the reassignment (replicas
= T, the removing ones leave the ISR, a leader outside T is replaced;
controller_partition_change). A reassignment that adds nothing completes at once when every
replica it keeps is in sync, and otherwise when the last of them rejoins the ISR (Kafka's
rule: an in-sync replica is never removed in favour of one that is behind). A null target cancels: the replicas go
back to C, and the ISR keeps only members of C (INVALID_REPLICA_ASSIGNMENT when that would
need an unclean election and the topic does not allow one).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from odradek.metadata.controller_requests import (
    OngoingReassignment,
    ReassignmentResult,
    ReassignmentTarget,
)
from odradek.metadata.image import MetadataImage, PartitionImage, TopicImage
from odradek.metadata.records import MetadataRecord
from odradek.protocol.errors import ErrorCode, KafkaError

__all__ = ["ReassignmentControl"]

log = logging.getLogger(__name__)


class ReassignmentControl:
    # provided by Controller and the other mixins
    image: MetadataImage
    _lock: Any
    _commit: Any
    _require_active: Any
    _acceptable: Any
    _change: Any
    unclean_enabled: Any

    def alter_partition_reassignments(self, targets: Sequence[ReassignmentTarget]
                                      ) -> list[ReassignmentResult]:
        with self._lock:
            self._require_active()
            results: list[ReassignmentResult] = []
            records: list[MetadataRecord] = []
            seen: set[tuple[str, int]] = set()
            for target in targets:
                key = (target.topic, target.partition)
                try:
                    if key in seen:
                        raise KafkaError(ErrorCode.invalid_request,
                                         "The partition was named twice.")
                    seen.add(key)
                    record = self._reassign(target)
                except KafkaError as exc:
                    results.append(ReassignmentResult(target.topic, target.partition, exc.code,
                                                      exc.message or None))
                    continue
                if record is not None:
                    records.append(record)
                results.append(ReassignmentResult(target.topic, target.partition))
            self._commit(records)
            return results

    def _reassign(self, target: ReassignmentTarget) -> MetadataRecord | None:
        topic = self.image.topics_by_name.get(target.topic)
        part = None if topic is None else topic.partitions.get(target.partition)
        if topic is None or part is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition,
                             "This server does not host this topic-partition.")
        if target.replicas is None:
            return self._cancel(topic, part)
        wanted = list(target.replicas)
        self._validate_target(wanted)
        # against every current replica, those still being added included (Kafka's
        # PartitionReassignmentReplicas): a replica leaves the list only through a completed
        # reassignment, so an ISR member is never dropped on the way
        current = list(part.replicas)
        adding = [r for r in wanted if r not in current]
        removing = [r for r in current if r not in wanted]
        merged = wanted + removing
        log.info("reassigning %s-%d from %s to %s", topic.name, part.partition, current,
                 wanted)
        change = self._change(topic, part, self._acceptable(), target_replicas=merged,
                              adding=adding, removing=removing)
        return change.record  # type: ignore[no-any-return]

    def _validate_target(self, replicas: list[int]) -> None:
        """Kafka's validateManualPartitionAssignment."""
        if not replicas:
            raise KafkaError(ErrorCode.invalid_replica_assignment,
                             "The manual partition assignment includes an empty replica list.")
        if len(set(replicas)) != len(replicas):
            raise KafkaError(ErrorCode.invalid_replica_assignment,
                             "The manual partition assignment includes a broker more than once.")
        for broker in replicas:
            if broker not in self.image.brokers:
                raise KafkaError(ErrorCode.invalid_replica_assignment,
                                 f"The manual partition assignment includes broker {broker}, "
                                 "but no such broker is registered.")

    def _cancel(self, topic: TopicImage, part: PartitionImage) -> MetadataRecord | None:
        if not part.reassigning:
            raise KafkaError(ErrorCode.no_reassignment_in_progress,
                             f"No ongoing reassignment for {topic.name}-{part.partition}.")
        original = [r for r in part.replicas if r not in part.adding_replicas]
        isr = [r for r in part.isr if r in original]
        acceptable = self._acceptable()
        if not any(acceptable(r) for r in isr) and not self.unclean_enabled(topic.name):
            raise KafkaError(ErrorCode.invalid_replica_assignment,
                             f"Unable to revert partition assignment for {topic.name}-"
                             f"{part.partition} because it would require an unclean leader "
                             "election.")
        log.info("cancelling the reassignment of %s-%d back to %s", topic.name,
                 part.partition, original)
        change = self._change(topic, part, acceptable, target_replicas=original,
                              target_isr=isr or original[:1], adding=[], removing=[])
        return change.record  # type: ignore[no-any-return]

    def list_partition_reassignments(self, partitions: Iterable[tuple[str, int]] | None = None
                                     ) -> list[OngoingReassignment]:
        """Ongoing reassignments, of the given partitions (unknown ones are skipped, as Kafka
        does) or of all."""
        out: list[OngoingReassignment] = []
        image = self.image
        if partitions is None:
            wanted = [(t.name, p) for t in image.topics_by_id.values() for p in t.partitions]
        else:
            wanted = list(partitions)
        for name, index in sorted(wanted):
            part = image.partition(name, index)
            if part is None or not part.reassigning:
                continue
            out.append(OngoingReassignment(name, index, list(part.replicas),
                                           list(part.adding_replicas),
                                           list(part.removing_replicas)))
        return out
