"""CreateTopics, DeleteTopics and CreatePartitions: the controller's topic operations (a mixin
of `Controller`). Replicas go to the active brokers, rack-aware (topic_rules.place_replicas);
a new partition's ISR is its active replicas and its leader the first of them."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from odradek.metadata.config.broker_configs import BrokerConfig
from odradek.metadata.config.describe import describe_topic_configs
from odradek.metadata.config.topic_configs import validate_topic_configs
from odradek.metadata.controller_requests import (
    CreatableTopic,
    CreatePartitionsResult,
    CreatePartitionsTopic,
    CreateTopicResult,
    DeleteTopicResult,
)
from odradek.metadata.image import MetadataImage
from odradek.metadata.records import (
    RESOURCE_TOPIC,
    ConfigRecord,
    MetadataRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from odradek.metadata.topic_rules import (
    collision_key,
    place_replicas,
    validate_assignment,
    validate_topic_name,
)
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.storage.file_pool import FdBudget

__all__ = ["MAX_RECORDS_PER_USER_OP", "TopicControl"]

# Kafka's controller refuses user operations that would write more records than this.
MAX_RECORDS_PER_USER_OP = 10_000


class TopicControl:
    # provided by Controller
    image: MetadataImage
    broker_config: BrokerConfig
    _lock: Any
    _rng: Any
    _commit: Any
    _require_active: Any
    default_dir: Any

    def _placement(self, num_partitions: int, rf: int, first: int) -> list[list[int]]:
        image = self.image
        active = image.active_brokers()
        racks = {b: image.brokers[b].rack for b in active}
        return place_replicas(active, self._rng, num_partitions, rf, first, racks)

    def create_topics(
        self, topics: Sequence[CreatableTopic], validate_only: bool = False
    ) -> list[CreateTopicResult]:
        with self._lock:
            self._require_active()
            counts: dict[str, int] = {}
            for t in topics:
                counts[t.name] = counts.get(t.name, 0) + 1
            results: list[CreateTopicResult] = []
            records: list[MetadataRecord] = []
            accepted: dict[str, str] = {}  # collision key -> name, for this request
            broker_config = self.broker_config
            budget = _fd_budget(self.image, broker_config)
            for t in topics:
                if counts[t.name] > 1:
                    results.append(
                        CreateTopicResult(
                            t.name, ErrorCode.invalid_request, "Duplicate topic name."
                        )
                    )
                    continue
                try:
                    result, topic_records = self._create_topic(t, broker_config, accepted)
                except KafkaError as exc:
                    results.append(CreateTopicResult(t.name, exc.code, exc.message or None))
                    continue
                if len(records) + len(topic_records) > MAX_RECORDS_PER_USER_OP:
                    results.append(
                        CreateTopicResult(
                            t.name,
                            ErrorCode.policy_violation,
                            "Unable to perform excessively large batch operation.",
                        )
                    )
                    continue
                refusal = budget.take(result.num_partitions)
                if refusal is not None:
                    results.append(CreateTopicResult(t.name, ErrorCode.policy_violation, refusal))
                    continue
                accepted[collision_key(t.name)] = t.name
                records.extend(topic_records)
                results.append(result)
            if not validate_only:
                self._commit(records)
            return results

    def _create_topic(
        self, t: CreatableTopic, broker_config: BrokerConfig, accepted: dict[str, str]
    ) -> tuple[CreateTopicResult, list[MetadataRecord]]:
        validate_topic_name(t.name)
        if t.name in self.image.topics_by_name:
            raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{t.name}' already exists.")
        key = collision_key(t.name)
        colliding = accepted.get(key) or next(
            (n for n in self.image.topics_by_name if collision_key(n) == key), None
        )
        if colliding is not None:
            raise KafkaError(
                ErrorCode.invalid_topic_exception,
                f"Topic '{t.name}' collides with existing topic: {colliding}",
            )
        if t.assignments:
            if t.num_partitions != -1:
                raise KafkaError(
                    ErrorCode.invalid_request,
                    "A manual partition assignment was specified, but numPartitions "
                    "was not set to -1.",
                )
            if t.replication_factor != -1:
                raise KafkaError(
                    ErrorCode.invalid_request,
                    "A manual partition assignment was specified, but replicationFactor "
                    "was not set to -1.",
                )
            if sorted(t.assignments) != list(range(len(t.assignments))):
                raise KafkaError(
                    ErrorCode.invalid_replica_assignment,
                    "partitions should be a consecutive 0-based integer sequence",
                )
            assignment = [t.assignments[p] for p in range(len(t.assignments))]
            validate_assignment(self.image, assignment, None)
        else:
            num_partitions = t.num_partitions
            if num_partitions == -1:
                num_partitions = broker_config.get_int("num.partitions")
            elif num_partitions <= 0:
                raise KafkaError(
                    ErrorCode.invalid_partitions,
                    "Number of partitions was set to an invalid non-positive value.",
                )
            rf = t.replication_factor
            if rf == -1:
                rf = broker_config.get_int("default.replication.factor")
            elif rf <= 0:
                raise KafkaError(
                    ErrorCode.invalid_replication_factor,
                    "Replication factor must be larger than 0, or -1 to use the default value.",
                )
            if num_partitions > MAX_RECORDS_PER_USER_OP:
                raise KafkaError(
                    ErrorCode.policy_violation,
                    "Unable to perform excessively large batch operation.",
                )
            assignment = self._placement(num_partitions, rf, 0)
        try:
            validate_topic_configs(t.configs)
        except KafkaError as exc:
            raise KafkaError(exc.code, exc.message) from None
        overrides = {k: v for k, v in t.configs.items() if v is not None}
        topic_id = uuid.uuid4()
        records: list[MetadataRecord] = [TopicRecord(t.name, topic_id)]
        records += [ConfigRecord(RESOURCE_TOPIC, t.name, k, v) for k, v in overrides.items()]
        records += self._partition_records(topic_id, 0, assignment)
        result = CreateTopicResult(
            name=t.name,
            topic_id=topic_id,
            num_partitions=len(assignment),
            replication_factor=len(assignment[0]),
            configs=describe_topic_configs(overrides, broker_config),
        )
        return result, records

    def _partition_records(
        self, topic_id: uuid.UUID, first: int, assignment: list[list[int]]
    ) -> list[MetadataRecord]:
        live = set(self.image.active_brokers())
        out: list[MetadataRecord] = []
        for i, replicas in enumerate(assignment):
            isr = [r for r in replicas if r in live]
            out.append(
                PartitionRecord(
                    partition_id=first + i,
                    topic_id=topic_id,
                    replicas=list(replicas),
                    isr=isr,
                    leader=isr[0] if isr else -1,
                    leader_epoch=0,
                    partition_epoch=0,
                    directories=[self.default_dir(r) for r in replicas],
                )
            )
        return out

    def delete_topics(
        self, names: Sequence[str] = (), ids: Sequence[uuid.UUID] = ()
    ) -> list[DeleteTopicResult]:
        with self._lock:
            self._require_active()
            results: list[DeleteTopicResult] = []
            records: list[MetadataRecord] = []
            enabled = self.broker_config.get_bool("delete.topic.enable")
            doomed: set[uuid.UUID] = set()
            for name in names:
                topic = self.image.topics_by_name.get(name)
                if topic is None:
                    results.append(
                        DeleteTopicResult(
                            name,
                            uuid.UUID(int=0),
                            ErrorCode.unknown_topic_or_partition,
                            "This server does not host this topic-partition.",
                        )
                    )
                    continue
                results.append(self._delete_one(topic.name, topic.topic_id, enabled, doomed, records))
            for topic_id in ids:
                topic = self.image.topics_by_id.get(topic_id)
                if topic is None:
                    results.append(
                        DeleteTopicResult(
                            None,
                            topic_id,
                            ErrorCode.unknown_topic_id,
                            "This server does not host this topic ID.",
                        )
                    )
                    continue
                results.append(self._delete_one(topic.name, topic.topic_id, enabled, doomed, records))
            self._commit(records)
            return results

    @staticmethod
    def _delete_one(
        name: str,
        topic_id: uuid.UUID,
        enabled: bool,
        doomed: set[uuid.UUID],
        records: list[MetadataRecord],
    ) -> DeleteTopicResult:
        if not enabled:
            return DeleteTopicResult(
                name, topic_id, ErrorCode.topic_deletion_disabled, "Topic deletion is disabled."
            )
        if topic_id not in doomed:  # the same topic named twice is deleted once
            doomed.add(topic_id)
            records.append(RemoveTopicRecord(topic_id))
        return DeleteTopicResult(name, topic_id)

    def create_partitions(
        self, topics: Sequence[CreatePartitionsTopic], validate_only: bool = False
    ) -> list[CreatePartitionsResult]:
        with self._lock:
            self._require_active()
            counts: dict[str, int] = {}
            for t in topics:
                counts[t.name] = counts.get(t.name, 0) + 1
            results: list[CreatePartitionsResult] = []
            records: list[MetadataRecord] = []
            budget = _fd_budget(self.image, self.broker_config)
            for t in topics:
                if counts[t.name] > 1:
                    results.append(
                        CreatePartitionsResult(t.name, ErrorCode.invalid_request, "Duplicate topic name.")
                    )
                    continue
                try:
                    new_records = self._create_partitions(t)
                except KafkaError as exc:
                    results.append(CreatePartitionsResult(t.name, exc.code, exc.message or None))
                    continue
                refusal = budget.take(sum(isinstance(r, PartitionRecord) for r in new_records))
                if refusal is not None:
                    results.append(
                        CreatePartitionsResult(t.name, ErrorCode.policy_violation, refusal)
                    )
                    continue
                records.extend(new_records)
                results.append(CreatePartitionsResult(t.name))
            if not validate_only:
                self._commit(records)
            return results

    def _create_partitions(self, t: CreatePartitionsTopic) -> list[MetadataRecord]:
        topic = self.image.topics_by_name.get(t.name)
        if topic is None:
            raise KafkaError(
                ErrorCode.unknown_topic_or_partition,
                "This server does not host this topic-partition.",
            )
        current = len(topic.partitions)
        if t.count < current:
            raise KafkaError(
                ErrorCode.invalid_partitions,
                f"The topic {t.name} currently has {current} partition(s); {t.count} would "
                "not be an increase.",
            )
        if t.count == current:
            raise KafkaError(ErrorCode.invalid_partitions, f"Topic already has {current} partition(s).")
        adding = t.count - current
        if adding > MAX_RECORDS_PER_USER_OP:
            raise KafkaError(
                ErrorCode.policy_violation, "Unable to perform excessively large batch operation."
            )
        rf = len(topic.partitions[0].replicas) if topic.partitions else 1
        if t.assignments is not None:
            if len(t.assignments) != adding:
                raise KafkaError(
                    ErrorCode.invalid_replica_assignment,
                    f"Attempted to add {adding} additional partition(s), but only "
                    f"{len(t.assignments)} assignment(s) were specified.",
                )
            validate_assignment(self.image, [list(a) for a in t.assignments], rf)
            assignment = [list(a) for a in t.assignments]
        else:
            assignment = self._placement(adding, rf, current)
        return self._partition_records(topic.topic_id, current, assignment)


def _fd_budget(image: MetadataImage, broker_config: BrokerConfig) -> FdBudget:
    """Issue 22: partitions past the node's fd budget are refused up front, before a record is
    written. POLICY_VIOLATION, not INVALID_REQUEST: the request is well formed and a limit of
    this node refuses it (as the "excessively large batch" refusal above does), while
    INVALID_REQUEST tells a client its request is malformed."""
    return FdBudget(sum(len(t.partitions) for t in image.topics_by_name.values()),
                    broker_config.get_int("log.open.files.max"),
                    broker_config.get_int("max.connections"))
