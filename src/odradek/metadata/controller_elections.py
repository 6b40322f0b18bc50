"""Partition leadership and ISRs (a mixin of `Controller`): AlterPartition from leaders,
ElectLeaders, the elections that follow fencing and unfencing, the periodic sweep of offline
partitions and the preferred-leader rebalance (`tick`). Each partition's next state comes
from controller_partition_change.partition_change (Kafka's PartitionChangeBuilder)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from odradek.metadata.controller_partition_change import (
    RECOVERED,
    RECOVERING,
    Election,
    PartitionChange,
    partition_change,
)
from odradek.metadata.controller_requests import (
    AlterPartitionItem,
    AlterPartitionResult,
    ElectLeadersResult,
)
from odradek.metadata.image import MetadataImage, PartitionImage, TopicImage
from odradek.metadata.records import MetadataRecord
from odradek.protocol.errors import ErrorCode, KafkaError

__all__ = ["PartitionControl"]

log = logging.getLogger(__name__)

Acceptable = Callable[[int], bool]


class PartitionControl:
    # provided by Controller and the other mixins
    image: MetadataImage
    _lock: Any
    _commit: Any
    _require_active: Any
    _now: Any
    setting: Any
    broker_config: Any
    check_broker_epoch: Any
    fence_stale_brokers: Any
    _acceptable: Any
    replica_dir_online: Any

    def __init__(self) -> None:
        self._next_rebalance_ms: int | None = None

    # ---------------------------------------------------------------- helpers

    def unclean_enabled(self, topic: str) -> bool:
        """unclean.leader.election.enable: the topic's override, else the broker's."""
        value = self.image.topic_configs(topic).get("unclean.leader.election.enable")
        if value is not None:
            return value.strip().lower() == "true"
        return bool(self.broker_config.get_bool("unclean.leader.election.enable"))

    def _leader_acceptable(self, part: PartitionImage, acceptable: Acceptable) -> Acceptable:
        """The one filter of who may lead `part`, which every election goes through: the
        broker state's `acceptable` (registered, unfenced, as the batch being built leaves
        it) narrowed to replicas whose log directory is online (KIP-858; Kafka's
        LeaderAcceptor with its hasOnlineDir)."""
        if not part.directories:
            return acceptable

        def ok(broker_id: int) -> bool:
            return acceptable(broker_id) and self.replica_dir_online(part, broker_id)
        return ok

    def _change(self, topic: TopicImage, part: PartitionImage, acceptable: Acceptable,
                **kwargs: Any) -> PartitionChange:
        acceptable = self._leader_acceptable(part, acceptable)
        change = partition_change(part, topic.topic_id, acceptable,
                                  unclean_allowed=self.unclean_enabled(topic.name), **kwargs)
        if change.unclean:
            log.warning("unclean leader election for %s-%d: broker %d leads although it was "
                        "not in the ISR %s; records acknowledged by the old ISR may be lost",
                        topic.name, part.partition, change.leader, list(part.isr))
        return change

    def _isr_removal_changes(self, broker_id: int, acceptable: Acceptable,
                             pairs: Iterable[tuple[TopicImage, PartitionImage]] | None = None
                             ) -> list[MetadataRecord]:
        """The broker leaves the ISRs (never emptying one) and leaderships move away from it
        (Kafka's generateLeaderAndIsrUpdates for a fenced or shutting-down broker, or for its
        replicas in a failed log directory): of every partition, or of `pairs` only.
        `acceptable` must already refuse `broker_id`."""
        if pairs is None:
            pairs = [(topic, part) for topic in self.image.topics_by_id.values()
                     for part in topic.partitions.values()]
        out: list[MetadataRecord] = []
        for topic, part in pairs:
            if broker_id not in part.isr and part.leader != broker_id:
                continue
            isr = [r for r in part.isr if r != broker_id]
            change = self._change(topic, part, acceptable, target_isr=isr)
            if change.record is not None:
                out.append(change.record)
        return out

    def _unclean_shutdown_changes(self, broker_id: int, acceptable: Acceptable
                                  ) -> list[MetadataRecord]:
        """A broker back from an unclean shutdown (KIP-966, Kafka's handleBrokerUncleanShutdown)
        leaves every ISR and leadership, even as an ISR's last member: what only its page
        cache held may be gone, so it returns to an ISR only through the leader's catch-up
        path. A partition whose ISR it empties has no leader (offline) until an unclean
        election; unclean.leader.election.enable makes that election at once. A partition
        with this broker as its only replica keeps it: nobody could hold more, and the
        single-node start keeps it too."""
        out: list[MetadataRecord] = []
        offline: list[str] = []
        for topic in self.image.topics_by_id.values():
            for part in topic.partitions.values():
                if broker_id not in part.isr and part.leader != broker_id:
                    continue
                alone = tuple(part.replicas) == (broker_id,)
                isr = [r for r in part.isr if r != broker_id]
                change = self._change(topic, part, acceptable, target_isr=isr,
                                      unclean_shutdown=() if alone else (broker_id,))
                if change.record is not None:
                    out.append(change.record)
                if not change.isr:
                    offline.append(f"{topic.name}-{part.partition}")
        if offline:
            log.warning("broker %d is back from an unclean shutdown and was the last in-sync "
                        "replica of %d partition(s) (%s%s): they have no leader until an "
                        "unclean election, as records they acknowledged may be lost",
                        broker_id, len(offline), ", ".join(offline[:10]),
                        ", ..." if len(offline) > 10 else "")
        return out

    def _offline_election_changes(self, acceptable: Acceptable) -> list[MetadataRecord]:
        """A leader for every partition whose leader is gone and that has a candidate."""
        out: list[MetadataRecord] = []
        for topic in self.image.topics_by_id.values():
            for part in topic.partitions.values():
                if part.leader != -1 and self._leader_acceptable(part, acceptable)(part.leader):
                    continue
                change = self._change(topic, part, acceptable)
                if change.record is not None:
                    out.append(change.record)
        return out

    def _find(self, topic_name: str | None, topic_id: uuid.UUID | None
              ) -> TopicImage | None:
        if topic_id is not None and topic_id.int != 0:
            return self.image.topics_by_id.get(topic_id)
        return None if topic_name is None else self.image.topics_by_name.get(topic_name)

    # ---------------------------------------------------------------- AlterPartition

    def alter_partition(self, broker_id: int, broker_epoch: int,
                        items: Sequence[AlterPartitionItem], version: int = 3
                        ) -> list[AlterPartitionResult]:
        """AlterPartition (56) from a partition leader. The request as a whole fails with
        STALE_BROKER_EPOCH / BROKER_ID_NOT_REGISTERED / NOT_CONTROLLER (raised KafkaError);
        each partition gets its own error (Kafka's validateAlterPartitionData)."""
        with self._lock:
            self._require_active()
            self.check_broker_epoch(broker_id, broker_epoch)
            results: list[AlterPartitionResult] = []
            records: list[MetadataRecord] = []
            pending: list[AlterPartitionResult] = []  # answered from the image after commit
            for item in items:
                result = AlterPartitionResult(item.topic_id, item.partition,
                                              topic_name=item.topic_name)
                results.append(result)
                topic = self._find(item.topic_name, item.topic_id)
                if topic is None:
                    result.error_code = (ErrorCode.unknown_topic_id if version >= 2
                                         else ErrorCode.unknown_topic_or_partition)
                    continue
                part = topic.partitions.get(item.partition)
                code = self._validate_alter(broker_id, part, item, version)
                if code != ErrorCode.none or part is None:
                    result.error_code = code
                    continue
                change = self._change(
                    topic, part, self._acceptable(), target_isr=[b for b, _ in item.new_isr],
                    recovery_state=item.leader_recovery_state)
                if change.record is not None:
                    records.append(change.record)
                result.topic_id = topic.topic_id
                pending.append(result)
            self._commit(records)
            for result in pending:
                topic = self.image.topics_by_id.get(result.topic_id)
                part = None if topic is None else topic.partitions.get(result.partition)
                if part is None:
                    result.error_code = ErrorCode.unknown_topic_or_partition
                    continue
                if part.leader != broker_id:
                    # a completed reassignment moved the leadership: the old leader steps down
                    result.error_code = ErrorCode.new_leader_elected
                    continue
                result.leader_id, result.leader_epoch = part.leader, part.leader_epoch
                result.isr, result.partition_epoch = list(part.isr), part.partition_epoch
                result.leader_recovery_state = part.leader_recovery_state
            return results

    def _validate_alter(self, broker_id: int, part: PartitionImage | None,
                        item: AlterPartitionItem, version: int) -> ErrorCode:
        if part is None:
            return ErrorCode.unknown_topic_or_partition
        if item.leader_epoch > part.leader_epoch:
            # the leader knows a newer epoch than ours: we are likely no longer the controller
            return ErrorCode.not_controller
        if item.leader_epoch < part.leader_epoch:
            return ErrorCode.fenced_leader_epoch
        if broker_id != part.leader:
            log.info("AlterPartition from broker %d refused: the leader of partition %d is %d",
                     broker_id, part.partition, part.leader)
            return ErrorCode.invalid_request
        if item.partition_epoch != part.partition_epoch:
            return ErrorCode.invalid_update_version
        new_isr = [b for b, _ in item.new_isr]
        if len(set(new_isr)) != len(new_isr) or any(b not in part.replicas for b in new_isr):
            return ErrorCode.invalid_request
        if part.leader not in new_isr:
            return ErrorCode.invalid_request  # the ISR always holds the leader
        if item.leader_recovery_state not in (RECOVERED, RECOVERING):
            return ErrorCode.invalid_request
        if item.leader_recovery_state == RECOVERING and len(new_isr) > 1:
            return ErrorCode.invalid_request
        if part.leader_recovery_state == RECOVERED and item.leader_recovery_state == RECOVERING:
            return ErrorCode.invalid_request
        for b, epoch in item.new_isr:
            registration = self.image.brokers.get(b)
            if (registration is None or not registration.active
                    or (epoch != -1 and epoch != registration.epoch)):
                # Kafka answers OPERATION_NOT_ATTEMPTED to v0 leaders, which do not know it
                return (ErrorCode.ineligible_replica if version >= 1
                        else ErrorCode.operation_not_attempted)
        return ErrorCode.none

    # ---------------------------------------------------------------- ElectLeaders

    def elect_leaders(self, election_type: int,
                      partitions: Iterable[tuple[str, int]] | None = None
                      ) -> list[ElectLeadersResult]:
        """ElectLeaders (43): PREFERRED (0) or UNCLEAN (1). `partitions` None = all, and then
        only partitions that needed an election are reported (as Kafka does)."""
        with self._lock:
            self._require_active()
            try:
                election = Election(election_type)
            except ValueError:
                raise KafkaError(ErrorCode.invalid_request,
                                 f"Unknown election type {election_type}") from None
            if election == Election.ONLINE:
                raise KafkaError(ErrorCode.invalid_request, "Unknown election type 2")
            every = partitions is None
            wanted = ([(t.name, p) for t in self.image.topics_by_id.values()
                       for p in sorted(t.partitions)] if partitions is None
                      else list(partitions))
            results: list[ElectLeadersResult] = []
            records: list[MetadataRecord] = []
            acceptable = self._acceptable()
            for name, index in wanted:
                result = self._elect_one(name, index, election, acceptable, records)
                if every and result.error_code == ErrorCode.election_not_needed:
                    continue
                results.append(result)
            self._commit(records)
            return results

    def _elect_one(self, name: str, index: int, election: Election, acceptable: Acceptable,
                   records: list[MetadataRecord]) -> ElectLeadersResult:
        topic = self.image.topics_by_name.get(name)
        part = None if topic is None else topic.partitions.get(index)
        if topic is None or part is None:
            return ElectLeadersResult(name, index, ErrorCode.unknown_topic_or_partition,
                                      "The partition does not exist.")
        if election == Election.PREFERRED:
            if part.replicas and part.leader == part.replicas[0]:
                return ElectLeadersResult(name, index, ErrorCode.election_not_needed,
                                          "Leader election not needed for topic partition.")
            change = self._change(topic, part, acceptable, election=Election.PREFERRED)
            if not part.replicas or change.leader != part.replicas[0]:
                return ElectLeadersResult(
                    name, index, ErrorCode.preferred_leader_not_available,
                    f"Failed to elect leader for partition {name}-{index} under strategy "
                    "PreferredReplicaPartitionLeaderElectionStrategy")
        else:
            acceptable = self._leader_acceptable(part, acceptable)
            if part.leader != -1 and acceptable(part.leader):
                return ElectLeadersResult(name, index, ErrorCode.election_not_needed,
                                          "Leader election not needed for topic partition.")
            change = partition_change(part, topic.topic_id, acceptable,
                                      election=Election.UNCLEAN)
            if change.leader == -1:
                return ElectLeadersResult(
                    name, index, ErrorCode.eligible_leaders_not_available,
                    f"Failed to elect leader for partition {name}-{index} under strategy "
                    "UncleanLeaderElectionStrategy")
            if change.unclean:
                log.warning("unclean leader election for %s-%d (ElectLeaders): broker %d "
                            "leads out of sync; records acknowledged by the old ISR %s may be "
                            "lost", name, index, change.leader, list(part.isr))
        if change.record is not None:
            records.append(change.record)
        return ElectLeadersResult(name, index)

    # ---------------------------------------------------------------- the periodic work

    def tick(self, now_ms: int | None = None) -> None:
        """The active controller's timer (call it every few hundred ms): fence brokers whose
        session expired, elect leaders for offline partitions that have a candidate (an
        unclean one where unclean.leader.election.enable allows it), and every
        leader.imbalance.check.interval.seconds rebalance preferred leaders when
        auto.leader.rebalance.enable."""
        now = self._now(now_ms)
        with self._lock:
            if not getattr(self, "is_active", True):
                return
            self.fence_stale_brokers(now)
            self._commit(self._offline_election_changes(self._acceptable()))
            if self.setting("auto.leader.rebalance.enable", True):
                interval = int(self.setting("leader.imbalance.check.interval.seconds", 300))
                if self._next_rebalance_ms is None:
                    self._next_rebalance_ms = now + interval * 1000
                elif now >= self._next_rebalance_ms:
                    self._next_rebalance_ms = now + interval * 1000
                    self._commit(self.rebalance_changes())

    def rebalance_changes(self) -> list[MetadataRecord]:
        """Preferred elections for every broker whose share of partitions it prefers but does
        not lead is over leader.imbalance.per.broker.percentage."""
        percentage = int(self.setting("leader.imbalance.per.broker.percentage", 10))
        acceptable = self._acceptable()
        preferred: dict[int, list[tuple[TopicImage, PartitionImage]]] = {}
        for topic in self.image.topics_by_id.values():
            for part in topic.partitions.values():
                if part.replicas:
                    preferred.setdefault(part.replicas[0], []).append((topic, part))
        out: list[MetadataRecord] = []
        for broker_id, parts in sorted(preferred.items()):
            misled = [(t, p) for t, p in parts if p.leader != broker_id]
            if not misled or len(misled) * 100 <= percentage * len(parts):
                continue
            for topic, part in misled:
                change = partition_change(part, topic.topic_id,
                                          self._leader_acceptable(part, acceptable),
                                          election=Election.PREFERRED)
                if change.record is not None and change.leader == broker_id:
                    out.append(change.record)
        if out:
            log.info("auto leader rebalance: %d preferred leader elections", len(out))
        return out
