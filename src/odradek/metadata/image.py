"""The in-memory cluster state, built by replaying metadata records.

`MetadataImage` is immutable: a `MetadataDelta` collects the effect of records over an image
(copying only what it touches) and `delta.apply()` yields the next image. The delta also says
what changed, which is what listeners (the replica manager, the broker) act on.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from odradek.metadata.acls import AclEntry, acl_of_record, record_of_acl
from odradek.metadata.directories import aligned
from odradek.metadata.records import (
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    AccessControlEntryRecord,
    BrokerEndpoint,
    BrokerFeature,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    QuotaEntityData,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)

# a client-quota entity: its (entity type, name or None for the default) pairs, sorted
QuotaEntity = tuple[tuple[str, str | None], ...]

__all__ = [
    "BrokerRegistration",
    "MetadataDelta",
    "MetadataImage",
    "MetadataReplayError",
    "PartitionImage",
    "TopicImage",
    "image_to_records",
]


class MetadataReplayError(ValueError):
    """A record that contradicts the image (the metadata log is not one we wrote)."""


@dataclass(frozen=True, slots=True)
class PartitionImage:
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    # 0 RECOVERED, 1 RECOVERING (after an unclean election, until the leader says recovered)
    leader_recovery_state: int = 0
    # the log directory of each replica, in replica order (KIP-858; empty: none recorded)
    directories: tuple[uuid.UUID, ...] = ()

    @property
    def reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionImage] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    incarnation_id: uuid.UUID
    epoch: int
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool = False
    # (name, min supported, max supported) as the broker registered them
    features: tuple[tuple[str, int, int], ...] = ()
    # the ids of its log directories (Kafka 3.7+ JBOD: meta.properties' directory.id)
    log_dirs: tuple[uuid.UUID, ...] = ()

    @property
    def active(self) -> bool:
        """May lead and join ISRs: unfenced and not shutting down (Kafka's isActive)."""
        return not self.fenced and not self.in_controlled_shutdown


@dataclass(frozen=True, slots=True)
class MetadataImage:
    cluster_id: str | None = None
    offset: int = -1  # offset of the last record applied
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=dict)
    topics_by_name: Mapping[str, TopicImage] = field(default_factory=dict)
    topics_by_id: Mapping[uuid.UUID, TopicImage] = field(default_factory=dict)
    configs: Mapping[tuple[int, str], Mapping[str, str]] = field(default_factory=dict)
    features: Mapping[str, int] = field(default_factory=dict)
    next_producer_id: int = 0
    # ids of every topic a RemoveTopicRecord removed: a log on disk with one of these ids is
    # a deletion to finish (a crash came between the record and the rmtree), not a stray
    removed_topic_ids: frozenset[uuid.UUID] = frozenset()
    # issue 16: ACL bindings by id, and client quotas (entity -> key -> value)
    acls: Mapping[uuid.UUID, AclEntry] = field(default_factory=dict)
    client_quotas: Mapping[QuotaEntity, Mapping[str, float]] = field(default_factory=dict)
    # (user name, SCRAM mechanism type) -> its credential record (issue 16)
    scram_credentials: Mapping[tuple[str, int], UserScramCredentialRecord] = field(
        default_factory=dict)

    def topic_configs(self, topic: str) -> Mapping[str, str]:
        return self.configs.get((RESOURCE_TOPIC, topic), {})

    def broker_configs(self, broker_id: int | str) -> Mapping[str, str]:
        """Dynamic configs of one broker ('' = the cluster-wide default)."""
        return self.configs.get((RESOURCE_BROKER, str(broker_id)), {})

    def live_brokers(self) -> list[int]:
        return sorted(b.broker_id for b in self.brokers.values() if not b.fenced)

    def active_brokers(self) -> list[int]:
        """Unfenced and not in controlled shutdown: where leaders and new replicas go."""
        return sorted(b.broker_id for b in self.brokers.values() if b.active)

    def partition(self, topic: str, partition: int) -> PartitionImage | None:
        t = self.topics_by_name.get(topic)
        return None if t is None else t.partitions.get(partition)

    def apply(self, records: Iterable[MetadataRecord], offset: int | None = None) -> MetadataImage:
        delta = MetadataDelta(self)
        for record in records:
            delta.replay(record)
        return delta.apply(offset)


class MetadataDelta:
    """The changes a run of records makes to an image, and the image they lead to."""

    def __init__(self, image: MetadataImage) -> None:
        self.prev = image
        self.image: MetadataImage | None = None  # set by apply()
        self._topics: dict[uuid.UUID, TopicImage] | None = None
        self._partitions: dict[uuid.UUID, dict[int, PartitionImage]] = {}
        self._brokers: dict[int, BrokerRegistration] | None = None
        self._configs: dict[tuple[int, str], dict[str, str]] | None = None
        self._owned_configs: set[tuple[int, str]] = set()
        self._features: dict[str, int] | None = None
        self._next_producer_id = image.next_producer_id
        self._acls: dict[uuid.UUID, AclEntry] | None = None
        self._quotas: dict[QuotaEntity, dict[str, float]] | None = None
        self.changed_acls = False
        self.changed_quotas: set[QuotaEntity] = set()
        self._scram: dict[tuple[str, int], UserScramCredentialRecord] | None = None
        self.created_topics: dict[str, uuid.UUID] = {}
        self.deleted_topics: dict[str, TopicImage] = {}
        self.removed_topic_ids: set[uuid.UUID] = set()
        self.created_partitions: set[tuple[str, int]] = set()
        self.changed_partitions: set[tuple[str, int]] = set()
        self.changed_configs: set[tuple[int, str]] = set()
        self.changed_brokers: set[int] = set()
        self.changed_features: set[str] = set()
        self.records = 0

    # -- copy-on-write access

    def _topic_map(self) -> dict[uuid.UUID, TopicImage]:
        if self._topics is None:
            self._topics = dict(self.prev.topics_by_id)
        return self._topics

    def _partition_map(self, topic_id: uuid.UUID) -> dict[int, PartitionImage]:
        parts = self._partitions.get(topic_id)
        if parts is None:
            topic = self._topic_map().get(topic_id)
            if topic is None:
                raise MetadataReplayError(f"record for unknown topic id {topic_id}")
            parts = dict(topic.partitions)
            self._partitions[topic_id] = parts
        return parts

    def _broker_map(self) -> dict[int, BrokerRegistration]:
        if self._brokers is None:
            self._brokers = dict(self.prev.brokers)
        return self._brokers

    def _config_map(self, key: tuple[int, str]) -> dict[str, str]:
        if self._configs is None:
            self._configs = dict(self.prev.configs)  # type: ignore[arg-type]
        if key not in self._owned_configs:
            self._configs[key] = dict(self._configs.get(key, {}))
            self._owned_configs.add(key)
        return self._configs[key]

    def _name_of(self, topic_id: uuid.UUID) -> str:
        topic = self._topic_map().get(topic_id)
        if topic is None:
            raise MetadataReplayError(f"record for unknown topic id {topic_id}")
        return topic.name

    # -- replay

    def replay(self, record: MetadataRecord) -> None:
        self.records += 1
        handler = _HANDLERS.get(type(record))
        if handler is None:
            return  # record types we do not model yet change nothing we serve
        handler(self, record)

    def _topic(self, r: TopicRecord) -> None:
        topics = self._topic_map()
        if r.topic_id in topics:
            raise MetadataReplayError(f"topic id {r.topic_id} already exists")
        if any(t.name == r.name for t in topics.values()):
            raise MetadataReplayError(f"topic {r.name!r} already exists")
        topics[r.topic_id] = TopicImage(r.name, r.topic_id, {})
        self._partitions[r.topic_id] = {}
        self.created_topics[r.name] = r.topic_id

    def _partition(self, r: PartitionRecord) -> None:
        parts = self._partition_map(r.topic_id)
        name = self._name_of(r.topic_id)
        parts[r.partition_id] = PartitionImage(
            partition=r.partition_id,
            replicas=tuple(r.replicas),
            isr=tuple(r.isr),
            leader=r.leader,
            leader_epoch=r.leader_epoch,
            partition_epoch=r.partition_epoch,
            removing_replicas=tuple(r.removing_replicas),
            adding_replicas=tuple(r.adding_replicas),
            leader_recovery_state=r.leader_recovery_state,
            directories=tuple(r.directories),
        )
        self.created_partitions.add((name, r.partition_id))

    def _partition_change(self, r: PartitionChangeRecord) -> None:
        parts = self._partition_map(r.topic_id)
        old = parts.get(r.partition_id)
        if old is None:
            raise MetadataReplayError(f"change of unknown partition {r.topic_id}-{r.partition_id}")
        new = replace(old, partition_epoch=old.partition_epoch + 1)
        if r.isr is not None:
            new = replace(new, isr=tuple(r.isr))
        if r.replicas is not None:
            # a kept replica keeps its directory unless the record says otherwise (Kafka's
            # builder always writes them; an older record may not)
            new = replace(new, replicas=tuple(r.replicas), directories=tuple(
                aligned(old.replicas, old.directories, r.replicas)) if old.directories else ())
        if r.directories is not None:
            new = replace(new, directories=tuple(r.directories))
        if r.removing_replicas is not None:
            new = replace(new, removing_replicas=tuple(r.removing_replicas))
        if r.adding_replicas is not None:
            new = replace(new, adding_replicas=tuple(r.adding_replicas))
        if r.leader_recovery_state != -1:
            new = replace(new, leader_recovery_state=r.leader_recovery_state)
        if r.leader != -2:
            # a new leader (or none) starts a new leader epoch, as in Kafka
            new = replace(new, leader=r.leader, leader_epoch=old.leader_epoch + 1)
        parts[r.partition_id] = new
        name = self._name_of(r.topic_id)
        if (name, r.partition_id) not in self.created_partitions:
            self.changed_partitions.add((name, r.partition_id))

    def _remove_topic(self, r: RemoveTopicRecord) -> None:
        topics = self._topic_map()
        topic = topics.pop(r.topic_id, None)
        if topic is None:
            raise MetadataReplayError(f"removal of unknown topic id {r.topic_id}")
        self._partitions.pop(r.topic_id, None)
        self.removed_topic_ids.add(r.topic_id)
        key = (RESOURCE_TOPIC, topic.name)
        if self._configs is None:
            self._configs = dict(self.prev.configs)  # type: ignore[arg-type]
        if self._configs.pop(key, None) is not None:
            self.changed_configs.add(key)
        self._owned_configs.discard(key)
        self.created_partitions = {p for p in self.created_partitions if p[0] != topic.name}
        self.changed_partitions = {p for p in self.changed_partitions if p[0] != topic.name}
        if self.created_topics.pop(topic.name, None) is None:
            self.deleted_topics[topic.name] = self.prev.topics_by_id.get(r.topic_id, topic)

    def _config(self, r: ConfigRecord) -> None:
        key = (r.resource_type, r.resource_name)
        configs = self._config_map(key)
        if r.value is None:
            configs.pop(r.name, None)
        else:
            configs[r.name] = r.value
        self.changed_configs.add(key)

    def _register_broker(self, r: RegisterBrokerRecord) -> None:
        self._broker_map()[r.broker_id] = BrokerRegistration(
            broker_id=r.broker_id,
            incarnation_id=r.incarnation_id,
            epoch=r.broker_epoch,
            endpoints=tuple(r.end_points),
            rack=r.rack,
            fenced=r.fenced,
            in_controlled_shutdown=r.in_controlled_shutdown,
            features=tuple((f.name, f.min_supported_version, f.max_supported_version)
                           for f in r.features),
            log_dirs=tuple(r.log_dirs),
        )
        self.changed_brokers.add(r.broker_id)

    def _unregister_broker(self, r: UnregisterBrokerRecord) -> None:
        self._broker_map().pop(r.broker_id, None)
        self.changed_brokers.add(r.broker_id)

    def _set_fenced(self, broker_id: int, fenced: bool | None, shutdown: bool | None) -> None:
        brokers = self._broker_map()
        old = brokers.get(broker_id)
        if old is None:
            raise MetadataReplayError(f"change of unknown broker {broker_id}")
        new = old
        if fenced is not None:
            new = replace(new, fenced=fenced)
        if shutdown is not None:
            new = replace(new, in_controlled_shutdown=shutdown)
        brokers[broker_id] = new
        self.changed_brokers.add(broker_id)

    def _fence(self, r: FenceBrokerRecord) -> None:
        self._set_fenced(r.id, True, None)

    def _unfence(self, r: UnfenceBrokerRecord) -> None:
        self._set_fenced(r.id, False, None)

    def _registration_change(self, r: BrokerRegistrationChangeRecord) -> None:
        fenced = {1: True, -1: False}.get(r.fenced)
        shutdown = True if r.in_controlled_shutdown == 1 else None
        self._set_fenced(r.broker_id, fenced, shutdown)
        if r.log_dirs:  # the directories still online (KIP-858); empty: unchanged
            brokers = self._broker_map()
            brokers[r.broker_id] = replace(brokers[r.broker_id], log_dirs=tuple(r.log_dirs))

    def _feature(self, r: FeatureLevelRecord) -> None:
        if self._features is None:
            self._features = dict(self.prev.features)
        if r.feature_level == 0:
            self._features.pop(r.name, None)
        else:
            self._features[r.name] = r.feature_level
        self.changed_features.add(r.name)

    def _producer_ids(self, r: ProducerIdsRecord) -> None:
        self._next_producer_id = r.next_producer_id

    def _noop(self, r: NoOpRecord) -> None:
        pass

    def _acl(self, r: AccessControlEntryRecord) -> None:
        if self._acls is None:
            self._acls = dict(self.prev.acls)
        if r.id in self._acls:
            raise MetadataReplayError(f"ACL id {r.id} already exists")
        self._acls[r.id] = acl_of_record(r)
        self.changed_acls = True

    def _remove_acl(self, r: RemoveAccessControlEntryRecord) -> None:
        if self._acls is None:
            self._acls = dict(self.prev.acls)
        if self._acls.pop(r.id, None) is None:
            raise MetadataReplayError(f"removal of unknown ACL id {r.id}")
        self.changed_acls = True

    def _client_quota(self, r: ClientQuotaRecord) -> None:
        if self._quotas is None:
            self._quotas = {k: dict(v) for k, v in self.prev.client_quotas.items()}
        entity = tuple(sorted((e.entity_type, e.entity_name) for e in r.entity))
        values = self._quotas.setdefault(entity, {})
        if r.remove:
            values.pop(r.key, None)
        else:
            values[r.key] = r.value
        self.changed_quotas.add(entity)
    def _scram_map(self) -> dict[tuple[str, int], UserScramCredentialRecord]:
        if self._scram is None:
            self._scram = dict(self.prev.scram_credentials)
        return self._scram

    def _user_scram(self, r: UserScramCredentialRecord) -> None:
        self._scram_map()[(r.name, r.mechanism)] = r

    def _remove_user_scram(self, r: RemoveUserScramCredentialRecord) -> None:
        self._scram_map().pop((r.name, r.mechanism), None)

    # -- result

    def apply(self, offset: int | None = None) -> MetadataImage:
        prev = self.prev
        topics_by_id: Mapping[uuid.UUID, TopicImage] = prev.topics_by_id
        topics_by_name: Mapping[str, TopicImage] = prev.topics_by_name
        if self._topics is not None:
            topics = self._topics
            for topic_id, parts in self._partitions.items():
                if topic_id in topics:
                    topics[topic_id] = replace(topics[topic_id], partitions=parts)
            topics_by_id = topics
            topics_by_name = {t.name: t for t in topics.values()}
        configs = prev.configs
        if self._configs is not None:
            configs = {k: v for k, v in self._configs.items() if v}
        self.image = MetadataImage(
            cluster_id=prev.cluster_id,
            offset=prev.offset if offset is None else offset,
            brokers=prev.brokers if self._brokers is None else self._brokers,
            topics_by_name=topics_by_name,
            topics_by_id=topics_by_id,
            configs=configs,
            features=prev.features if self._features is None else self._features,
            next_producer_id=self._next_producer_id,
            removed_topic_ids=(prev.removed_topic_ids | self.removed_topic_ids
                               if self.removed_topic_ids else prev.removed_topic_ids),
            acls=prev.acls if self._acls is None else self._acls,
            client_quotas=(prev.client_quotas if self._quotas is None
                           else {k: v for k, v in self._quotas.items() if v}),
            scram_credentials=(prev.scram_credentials if self._scram is None
                               else self._scram),
        )
        return self.image

    @property
    def empty(self) -> bool:
        return not (
            self.created_topics
            or self.deleted_topics
            or self.created_partitions
            or self.changed_partitions
            or self.changed_configs
            or self.changed_brokers
            or self.changed_features
            or self.changed_acls
            or self.changed_quotas
            or self._scram is not None
        )

    def __repr__(self) -> str:
        return (
            f"MetadataDelta(created_topics={sorted(self.created_topics)}, "
            f"deleted_topics={sorted(self.deleted_topics)}, "
            f"created_partitions={sorted(self.created_partitions)}, "
            f"changed_partitions={sorted(self.changed_partitions)}, "
            f"changed_configs={sorted(self.changed_configs)})"
        )


_HANDLERS = {
    TopicRecord: MetadataDelta._topic,
    PartitionRecord: MetadataDelta._partition,
    PartitionChangeRecord: MetadataDelta._partition_change,
    RemoveTopicRecord: MetadataDelta._remove_topic,
    ConfigRecord: MetadataDelta._config,
    RegisterBrokerRecord: MetadataDelta._register_broker,
    UnregisterBrokerRecord: MetadataDelta._unregister_broker,
    FenceBrokerRecord: MetadataDelta._fence,
    UnfenceBrokerRecord: MetadataDelta._unfence,
    BrokerRegistrationChangeRecord: MetadataDelta._registration_change,
    FeatureLevelRecord: MetadataDelta._feature,
    ProducerIdsRecord: MetadataDelta._producer_ids,
    NoOpRecord: MetadataDelta._noop,
    AccessControlEntryRecord: MetadataDelta._acl,
    RemoveAccessControlEntryRecord: MetadataDelta._remove_acl,
    ClientQuotaRecord: MetadataDelta._client_quota,
    UserScramCredentialRecord: MetadataDelta._user_scram,
    RemoveUserScramCredentialRecord: MetadataDelta._remove_user_scram,
}


def image_to_records(image: MetadataImage) -> list[MetadataRecord]:
    """The image as the metadata records that rebuild it (what a KIP-630 snapshot holds):
    replaying them into an empty image gives back this image, but for `offset` (the
    snapshot's own)."""
    out: list[MetadataRecord] = []
    out += [FeatureLevelRecord(name, level) for name, level in sorted(image.features.items())]
    for b in sorted(image.brokers.values(), key=lambda b: b.broker_id):
        out.append(RegisterBrokerRecord(
            broker_id=b.broker_id, incarnation_id=b.incarnation_id, broker_epoch=b.epoch,
            end_points=list(b.endpoints),
            features=[BrokerFeature(n, lo, hi) for n, lo, hi in b.features],
            rack=b.rack, fenced=b.fenced, in_controlled_shutdown=b.in_controlled_shutdown,
            log_dirs=list(b.log_dirs)))
    live = set(image.topics_by_id)
    for topic_id in sorted(image.removed_topic_ids - live):
        # a deletion finished before the snapshot: its name is gone, its id must stay known
        # (a log left on disk by it is a deletion to finish, not a stray to keep)
        out += [TopicRecord(f"__removed-{topic_id}", topic_id), RemoveTopicRecord(topic_id)]
    for t in sorted(image.topics_by_id.values(), key=lambda t: t.name):
        out.append(TopicRecord(t.name, t.topic_id))
        for p in sorted(t.partitions.values(), key=lambda p: p.partition):
            out.append(PartitionRecord(
                partition_id=p.partition, topic_id=t.topic_id, replicas=list(p.replicas),
                isr=list(p.isr), removing_replicas=list(p.removing_replicas),
                adding_replicas=list(p.adding_replicas), leader=p.leader,
                leader_recovery_state=p.leader_recovery_state, leader_epoch=p.leader_epoch,
                partition_epoch=p.partition_epoch, directories=list(p.directories)))
    for (rtype, rname), values in sorted(image.configs.items()):
        out += [ConfigRecord(rtype, rname, k, v) for k, v in sorted(values.items())]
    out += [record_of_acl(acl_id, acl) for acl_id, acl in sorted(image.acls.items())]
    for entity, values in sorted(image.client_quotas.items(), key=lambda kv: repr(kv[0])):
        out += [ClientQuotaRecord([QuotaEntityData(t, n) for t, n in entity], k, v)
                for k, v in sorted(values.items())]
    out += [image.scram_credentials[k] for k in sorted(image.scram_credentials)]
    if image.next_producer_id:
        out.append(ProducerIdsRecord(broker_id=-1, broker_epoch=-1,
                                     next_producer_id=image.next_producer_id))
    return out
