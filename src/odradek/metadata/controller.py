"""The controller: decides cluster changes, writes them as records, applies them to the image.

Every operation validates first (nothing is written for a topic or resource that fails), then
appends the records of everything that passed as one batch to the quorum, then replays them
into a new image and tells listeners what changed. Synchronous and free of network I/O: the
broker calls it (off the event loop when it likes).
"""

from __future__ import annotations

import logging
import random
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from odradek.metadata.config.broker_configs import BrokerConfig
from odradek.metadata.config.describe import describe_topic_configs
from odradek.metadata.config.topic_configs import validate_topic_configs
from odradek.metadata.config_changes import incremental_changes, replacement_changes
from odradek.metadata.controller_requests import (
    AlterConfigsResource,
    AlterConfigsResult,
    AlterOp,
    CreatableTopic,
    CreatePartitionsResult,
    CreatePartitionsTopic,
    CreateTopicResult,
    DeleteTopicResult,
    IncrementalAlterConfigsResource,
)
from odradek.metadata.image import MetadataDelta, MetadataImage
from odradek.metadata.quorum import Quorum
from odradek.metadata.records import (
    RESOURCE_TOPIC,
    BrokerEndpoint,
    BrokerFeature,
    ConfigRecord,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from odradek.metadata.topic_rules import (
    collision_key,
    place_replicas,
    validate_assignment,
    validate_topic_name,
)
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.storage.file_pool import FdBudget

# The request and result types are re-exported: they are the controller's API, and the
# broker's handlers import them from here.
__all__ = [
    "AlterConfigsResource",
    "AlterConfigsResult",
    "AlterOp",
    "Controller",
    "CreatableTopic",
    "CreatePartitionsResult",
    "CreatePartitionsTopic",
    "CreateTopicResult",
    "DeleteTopicResult",
    "IncrementalAlterConfigsResource",
    "load_image",
    "validate_topic_name",
]

log = logging.getLogger(__name__)

# Kafka's controller refuses user operations that would write more records than this.
MAX_RECORDS_PER_USER_OP = 10_000
METADATA_VERSION = ("metadata.version", 21)  # 3.9-IV0

Listener = Callable[[MetadataDelta], None]



def load_image(quorum: Quorum, cluster_id: str | None) -> MetadataImage:
    """Replay the committed metadata log into an image."""
    delta = MetadataDelta(MetadataImage(cluster_id=cluster_id))
    last = -1

    def apply(offset: int, record: MetadataRecord) -> None:
        nonlocal last
        delta.replay(record)
        last = offset

    quorum.replay(apply)
    return delta.apply(last)


class Controller:
    def __init__(self, quorum: Quorum, image: MetadataImage, broker_config: BrokerConfig) -> None:
        self.quorum = quorum
        self.image = image
        self.static_config = broker_config
        self.node_id = broker_config.node_id
        self._listeners: list[Listener] = []
        self._lock = threading.RLock()
        self._rng = random.Random()

    # ---------------------------------------------------------------- plumbing

    def add_listener(self, fn: Listener) -> None:
        self._listeners.append(fn)

    def remove_listener(self, fn: Listener) -> None:
        self._listeners.remove(fn)

    @property
    def broker_config(self) -> BrokerConfig:
        """The static config with this node's dynamic configs from the metadata log on top."""
        image = self.image
        return self.static_config.with_dynamic(
            image.broker_configs(self.node_id), image.broker_configs("")
        )

    def _commit(self, records: Sequence[MetadataRecord]) -> MetadataDelta | None:
        if not records:
            return None
        last = self.quorum.append(records)
        delta = MetadataDelta(self.image)
        for record in records:
            delta.replay(record)
        self.image = delta.apply(last)
        for fn in list(self._listeners):
            try:
                fn(delta)
            except Exception:  # a listener's bug must not undo a committed change
                log.exception("metadata listener %r failed", fn)
        return delta

    def bootstrap(self) -> None:
        """First start of a cluster: write the metadata.version feature level."""
        with self._lock:
            if METADATA_VERSION[0] not in self.image.features:
                self._commit([FeatureLevelRecord(*METADATA_VERSION)])

    # ---------------------------------------------------------------- producer ids

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int = -1,
                              block_size: int = 1000) -> tuple[int, int]:
        """Reserve the next block of producer ids for a broker (Kafka's AllocateProducerIds):
        the block's end is a ProducerIdsRecord in the metadata log, so ids stay unique across
        restarts. Returns (first id, block size)."""
        with self._lock:
            first = int(self.image.next_producer_id)
            self._commit([ProducerIdsRecord(broker_id=broker_id, broker_epoch=broker_epoch,
                                            next_producer_id=first + block_size)])
            return first, block_size

    # ---------------------------------------------------------------- brokers

    def register_broker(
        self,
        endpoints: Iterable[tuple[str, str, int, int]] | None = None,
        rack: str | None = None,
        incarnation_id: uuid.UUID | None = None,
        log_dirs: Sequence[uuid.UUID] = (),
    ) -> int:
        """Register this node (fenced, then unfenced at once: one node has nothing to catch up
        with) and elect leaders where it is the only live replica. Returns the broker epoch."""
        with self._lock:
            epoch = self.quorum.end_offset
            if endpoints is None:
                endpoints = _endpoints_from_listeners(self.static_config.advertised_listeners)
            registration = RegisterBrokerRecord(
                broker_id=self.node_id,
                incarnation_id=incarnation_id or uuid.uuid4(),
                broker_epoch=epoch,
                end_points=[BrokerEndpoint(*e) for e in endpoints],
                features=[BrokerFeature("metadata.version", 1, METADATA_VERSION[1])],
                rack=rack,
                fenced=True,
                log_dirs=list(log_dirs),
            )
            self._commit([registration, UnfenceBrokerRecord(self.node_id, epoch)])
            self._commit(self._elect_leaders())
            return epoch

    def _elect_leaders(self) -> list[MetadataRecord]:
        live = set(self.image.live_brokers())
        records: list[MetadataRecord] = []
        for topic in self.image.topics_by_id.values():
            for p in topic.partitions.values():
                if p.leader in live:
                    continue
                candidates = [r for r in p.replicas if r in live and r in p.isr]
                new_leader = candidates[0] if candidates else -1
                if new_leader != p.leader:
                    records.append(
                        PartitionChangeRecord(p.partition, topic.topic_id, leader=new_leader)
                    )
        return records

    # ---------------------------------------------------------------- topics

    def create_topics(
        self, topics: Sequence[CreatableTopic], validate_only: bool = False
    ) -> list[CreateTopicResult]:
        with self._lock:
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
            assignment = place_replicas(self.image.live_brokers(), self._rng, num_partitions, rf, 0)
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
        live = set(self.image.live_brokers())
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
                )
            )
        return out

    def delete_topics(
        self, names: Sequence[str] = (), ids: Sequence[uuid.UUID] = ()
    ) -> list[DeleteTopicResult]:
        with self._lock:
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
            assignment = place_replicas(self.image.live_brokers(), self._rng, adding, rf, current)
        return self._partition_records(topic.topic_id, current, assignment)

    # ---------------------------------------------------------------- configs

    def alter_configs(
        self, resources: Sequence[AlterConfigsResource], validate_only: bool = False
    ) -> list[AlterConfigsResult]:
        """Legacy AlterConfigs: the given configs replace every override of the resource."""
        return self._alter(
            resources, lambda res: replacement_changes(self.image, self.broker_config, res),
            validate_only,
        )

    def incremental_alter_configs(
        self, resources: Sequence[IncrementalAlterConfigsResource], validate_only: bool = False
    ) -> list[AlterConfigsResult]:
        return self._alter(
            resources, lambda res: incremental_changes(self.image, self.broker_config, res),
            validate_only,
        )

    def _alter(self, resources: Sequence[Any], changes_of: Any,
               validate_only: bool) -> list[AlterConfigsResult]:
        """Each resource validated on its own (a bad one fails alone); what passed is written
        as one batch of ConfigRecords, or not at all with validate_only."""
        with self._lock:
            results: list[AlterConfigsResult] = []
            records: list[MetadataRecord] = []
            for res in resources:
                try:
                    changes = changes_of(res)
                except KafkaError as exc:
                    results.append(
                        AlterConfigsResult(res.resource_type, res.resource_name, exc.code, exc.message)
                    )
                    continue
                records += [
                    ConfigRecord(res.resource_type, res.resource_name, k, v)
                    for k, v in changes.items()
                ]
                results.append(AlterConfigsResult(res.resource_type, res.resource_name))
            if not validate_only:
                self._commit(records)
            return results


def _fd_budget(image: MetadataImage, broker_config: BrokerConfig) -> FdBudget:
    """Issue 22: partitions past the node's fd budget are refused up front, before a record is
    written. POLICY_VIOLATION, not INVALID_REQUEST: the request is well formed and a limit of
    this node refuses it (as the "excessively large batch" refusal above does), while
    INVALID_REQUEST tells a client its request is malformed."""
    return FdBudget(sum(len(t.partitions) for t in image.topics_by_name.values()),
                    broker_config.get_int("log.open.files.max"),
                    broker_config.get_int("max.connections"))


def _endpoints_from_listeners(listeners: Sequence[str]) -> list[tuple[str, str, int, int]]:
    protocols = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
    out = []
    for listener in listeners:
        name, _, rest = listener.partition("://")
        host, _, port = rest.rpartition(":")
        try:
            port_number = int(port)
        except ValueError:
            continue
        out.append((name, host.strip("[]"), port_number, protocols.get(name.upper(), 0)))
    return out


