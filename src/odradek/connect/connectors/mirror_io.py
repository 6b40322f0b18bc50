"""MirrorMaker 2's I/O against the two clusters: their clients from the connector config,
remote topics created (and their configs and partition counts kept in step), records copied
with their offset syncs, and the checkpoint round (offset syncs read, groups translated,
checkpoints written, and with sync.group.offsets.enabled the target groups' offsets moved).

The bookkeeping it applies is mirror_sync's (sans I/O).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from odradek.connect.cluster import Cluster
from odradek.connect.connectors.mirror_sync import (
    CONFIGS_EXCLUDE,
    GROUPS_EXCLUDE,
    TOPICS_EXCLUDE,
    Checkpoint,
    NameFilter,
    OffsetSync,
    OffsetSyncStore,
    PartitionState,
    ReplicationPolicy,
    config_excluded,
    patterns,
    replicated,
)

log = logging.getLogger(__name__)
TIMEOUT = 30.0
# Kafka's own per-cluster names in an MM2 config, not client settings to hand librdkafka.
NOT_CLIENT = ("alias", "bootstrap.servers")


def cluster_of(config: Mapping[str, str], which: str) -> Cluster:
    """`source` or `target`: `<which>.cluster.bootstrap.servers`, and any other
    `<which>.cluster.<client setting>` (security.protocol, sasl.*, ssl.*) passed on."""
    prefix = f"{which}.cluster."
    settings = {k[len(prefix):]: v for k, v in config.items()
                if k.startswith(prefix) and k[len(prefix):] not in NOT_CLIENT}
    return Cluster(config[prefix + "bootstrap.servers"].strip(), settings)


def policy_of(config: Mapping[str, str]) -> ReplicationPolicy:
    from odradek.connect.connectors.mirror_sync import DEFAULT_POLICY

    return ReplicationPolicy(config.get("replication.policy.class", DEFAULT_POLICY).strip(),
                             config.get("replication.policy.separator", "."))


def aliases(config: Mapping[str, str]) -> tuple[str, str]:
    return (config.get("source.cluster.alias", "source").strip(),
            config.get("target.cluster.alias", "target").strip())


def topic_filter(config: Mapping[str, str]) -> NameFilter:
    return NameFilter.of(config.get("topics", ".*"), config.get("topics.exclude", TOPICS_EXCLUDE))


def group_filter(config: Mapping[str, str]) -> NameFilter:
    return NameFilter.of(config.get("groups", ".*"), config.get("groups.exclude", GROUPS_EXCLUDE))


def syncs_cluster(config: Mapping[str, str], source: Cluster, target: Cluster) -> Cluster:
    """Where the offset syncs live (`offset-syncs.topic.location`, source by default): one of
    the two clusters already made, so its admin client is theirs too."""
    where = config.get("offset-syncs.topic.location", "source").strip()
    return target if where == "target" else source


def syncs_topic(config: Mapping[str, str]) -> str:
    # Named after the other cluster of the flow: the target when the topic is on the source.
    source, target = aliases(config)
    where = config.get("offset-syncs.topic.location", "source").strip()
    return policy_of(config).offset_syncs_topic(target if where == "source" else source)


def _flag(config: Mapping[str, str], key: str, default: str) -> bool:
    return config.get(key, default).strip().lower() == "true"


def _wait(futures: Mapping[Any, Any], ok: tuple[str, ...] = ()) -> None:
    for name, future in futures.items():
        try:
            future.result(timeout=TIMEOUT)
        except Exception as exc:
            if not any(code in str(exc) for code in ok):
                raise RuntimeError(f"{name}: {exc}") from exc


def ensure_compacted(cluster: Cluster, topic: str, replication: int) -> None:
    """An internal topic of MM2's: one partition, compacted; an existing one is left as is."""
    from confluent_kafka.admin import NewTopic

    admin = cluster.admin()
    if topic in admin.list_topics(timeout=TIMEOUT).topics:
        return
    _wait(admin.create_topics([NewTopic(topic, 1, replication,
                                        config={"cleanup.policy": "compact"})]),
          ok=("TOPIC_ALREADY_EXISTS",))


def source_topics(config: Mapping[str, str], source: Cluster) -> dict[str, int]:
    """The source's topics this connector replicates, with their partition counts."""
    names = topic_filter(config)
    policy = policy_of(config)
    _, target = aliases(config)
    meta = source.admin().list_topics(timeout=TIMEOUT)
    return {t: len(m.partitions) for t, m in sorted(meta.topics.items())
            if replicated(t, names, policy, target)}


def topic_configs(source: Cluster, topics: list[str], exclude: str) -> dict[str, dict[str, str]]:
    """The configs set on each source topic (not defaults), minus config.properties.exclude."""
    from confluent_kafka.admin import ConfigResource, ConfigSource

    if not topics:
        return {}
    dropped = patterns(exclude)
    admin = source.admin()  # the Cluster's own: it outlives the futures
    futures = admin.describe_configs(
        [ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics])
    out: dict[str, dict[str, str]] = {}
    for resource, future in futures.items():
        entries = future.result(timeout=TIMEOUT)
        out[resource.name] = {
            name: e.value for name, e in entries.items()
            if getattr(e.source, "value", e.source) == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
            and e.value is not None and not e.is_sensitive
            and not config_excluded(name, dropped)}
    return out


def sync_topics(config: Mapping[str, str], source: Cluster, target: Cluster,
                topics: dict[str, int]) -> None:
    """Create each remote topic missing on the target with the source's partition count and
    configs; grow one that has fewer partitions; with sync.topic.configs.enabled, set the
    source's configs on the existing ones (incrementally: what the target set itself stays)."""
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
    )

    policy = policy_of(config)
    alias, _ = aliases(config)
    with_configs = _flag(config, "sync.topic.configs.enabled", "true")
    configs = (topic_configs(source, list(topics),
                             config.get("config.properties.exclude", CONFIGS_EXCLUDE))
               if with_configs else {})
    admin = target.admin()
    present = admin.list_topics(timeout=TIMEOUT).topics
    replication = int(config.get("replication.factor", "2"))
    create, grow, alter = [], [], []
    for topic, count in topics.items():
        remote = policy.format_remote_topic(alias, topic)
        if remote not in present:
            create.append(NewTopic(remote, count, replication, config=configs.get(topic, {})))
            continue
        if len(present[remote].partitions) < count:
            grow.append(NewPartitions(remote, count))
        if configs.get(topic):
            alter.append(ConfigResource(ConfigResource.Type.TOPIC, remote, incremental_configs=[
                ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                for k, v in configs[topic].items()]))
    if create:
        _wait(admin.create_topics(create), ok=("TOPIC_ALREADY_EXISTS",))
    if grow:
        _wait(admin.create_partitions(grow))
    if alter:
        _wait(admin.incremental_alter_configs(alter))


# ---- MirrorSourceTask's copying -------------------------------------------------------------
class Replicator:
    """Copies a micro-batch's records to their remote topics (same partition; key, value,
    headers and timestamp kept) and writes the offset syncs their delivery reports allow."""

    def __init__(self, config: Mapping[str, str], source: Cluster | None = None) -> None:
        self.config = dict(config)
        self.policy = policy_of(config)
        self.alias, _ = aliases(config)
        self.source = source or cluster_of(config, "source")
        self.target = cluster_of(config, "target")
        self.syncs = syncs_cluster(config, self.source, self.target)
        # Idempotence keeps each partition's records in order through retries, so an
        # upstream offset's downstream one is what the delivery report says.
        self.producer = self.target.producer({"enable.idempotence": True, "linger.ms": 5,
                                              "queue.buffering.max.messages": 500000})
        self.emit_syncs = _flag(config, "emit.offset-syncs.enabled", "true")
        self.max_lag = int(config.get("offset.lag.max", "100"))
        self.states: dict[tuple[str, int], PartitionState] = {}
        self.syncs_topic = syncs_topic(config)
        self.syncs_producer = self.syncs.producer() if self.emit_syncs else None
        self.remote: dict[str, str] = {}
        self.interval = float(config.get("sync.topic.configs.interval.seconds", "600"))
        self.last_topic_sync = time.monotonic()

    def prepare(self, topics: dict[str, int]) -> None:
        sync_topics(self.config, self.source, self.target, topics)
        if self.emit_syncs:
            ensure_compacted(self.syncs, self.syncs_topic,
                             int(self.config.get("offset-syncs.topic.replication.factor", "3")))

    def replicate(self, rows: dict[str, list[Any]], topics: dict[str, int]) -> None:
        """`rows`: columns topic, partition, offset, ts (ms), key, value, headers."""
        if time.monotonic() - self.last_topic_sync >= self.interval:
            sync_topics(self.config, self.source, self.target, topics)
            self.last_topic_sync = time.monotonic()
        delivered: list[tuple[str, int, int, int]] = []
        errors: list[str] = []

        def report(topic: str, partition: int, upstream: int) -> Any:
            def done(err: Any, msg: Any) -> None:
                if err is not None:
                    errors.append(f"{msg.topic()}-{msg.partition()}: {err}")
                else:
                    delivered.append((topic, partition, upstream, msg.offset()))
            return done

        columns = (rows["topic"], rows["partition"], rows["offset"], rows["ts"], rows["key"],
                   rows["value"], rows["headers"])
        for topic, partition, offset, ts, key, value, headers in zip(*columns, strict=True):
            remote = self.remote.get(topic)
            if remote is None:
                remote = self.remote[topic] = self.policy.format_remote_topic(self.alias, topic)
            kwargs: dict[str, Any] = {"partition": partition, "key": key, "value": value,
                                      "on_delivery": report(topic, partition, offset)}
            if ts is not None:
                kwargs["timestamp"] = ts
            if headers:
                kwargs["headers"] = [(h["key"], h["value"]) for h in headers]
            while True:
                try:
                    self.producer.produce(remote, **kwargs)
                    break
                except BufferError:
                    self.producer.poll(0.1)
        left = self.producer.flush(TIMEOUT * 4)
        if errors or left:
            raise RuntimeError(f"replicating to the target failed: "
                               f"{errors[0] if errors else f'{left} records undelivered'}")
        if self.syncs_producer is not None:
            self._emit_syncs(delivered)

    def _emit_syncs(self, delivered: list[tuple[str, int, int, int]]) -> None:
        assert self.syncs_producer is not None
        out: list[OffsetSync] = []
        touched: set[tuple[str, int]] = set()
        for topic, partition, upstream, downstream in sorted(delivered):
            tp = (topic, partition)
            state = self.states.get(tp)
            if state is None:
                state = self.states[tp] = PartitionState(self.max_lag)
            touched.add(tp)
            if state.update(upstream, downstream):
                out.append(OffsetSync(topic, partition, upstream, downstream))
        for tp in sorted(touched):
            pair = self.states[tp].promote()
            if pair is not None:
                out.append(OffsetSync(tp[0], tp[1], pair[0], pair[1]))
        for sync in out:
            self.syncs_producer.produce(self.syncs_topic, key=sync.key(), value=sync.value())
        if self.syncs_producer.flush(TIMEOUT) > 0:
            raise RuntimeError(f"offset syncs to {self.syncs_topic} were not delivered")


# ---- MirrorCheckpointTask's round -----------------------------------------------------------
class Checkpointer:
    def __init__(self, config: Mapping[str, str]) -> None:
        self.config = dict(config)
        self.policy = policy_of(config)
        self.alias, _ = aliases(config)
        self.source = cluster_of(config, "source")
        self.target = cluster_of(config, "target")
        self.topics = topic_filter(config)
        self.groups = group_filter(config)
        self.store = OffsetSyncStore()
        self.syncs_topic = syncs_topic(config)
        self.syncs_at = 0  # the next offset of the syncs topic to read
        self.emit = _flag(config, "emit.checkpoints.enabled", "true")
        self.checkpoints_topic = self.policy.checkpoints_topic(self.alias)
        self.sync_groups = _flag(config, "sync.group.offsets.enabled", "false")
        self.sync_interval = float(config.get("sync.group.offsets.interval.seconds", "60"))
        self.last_group_sync = -1e18
        # MM2's refresh.groups: the source's groups are listed at the start and then again
        # every interval (never again when disabled)
        self.refresh_groups = _flag(config, "refresh.groups.enabled", "true")
        self.groups_interval = float(config.get("refresh.groups.interval.seconds", "600"))
        self.known_groups: list[str] | None = None
        self.last_group_list = 0.0
        self.emitted: dict[tuple[str, str, int], Checkpoint] = {}
        self.producer: Any = None
        # One client of each kind for the connector's life (a round runs every few seconds):
        # each Cluster keeps its one admin client (`.admin()`), and the syncs cluster is the
        # source or the target, so it shares theirs.
        self.syncs = syncs_cluster(config, self.source, self.target)
        self.syncs_consumer: Any = None
        self.restored = False

    def read_syncs(self) -> None:
        """Apply the syncs topic's new records; the first read to its end opens translation."""
        from confluent_kafka import TopicPartition

        if self.syncs_topic not in self.syncs.admin().list_topics(timeout=TIMEOUT).topics:
            return
        if self.syncs_consumer is None:
            self.syncs_consumer = self.syncs.consumer()
        consumer = self.syncs_consumer
        tp = TopicPartition(self.syncs_topic, 0)
        low, high = consumer.get_watermark_offsets(tp, timeout=TIMEOUT)
        position = max(self.syncs_at, low)
        if position < high:
            consumer.assign([TopicPartition(self.syncs_topic, 0, position)])
            deadline = time.monotonic() + TIMEOUT * 4
            while position < high:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"reading {self.syncs_topic} stalled at {position}")
                msg = consumer.poll(1.0)
                if msg is None:
                    continue
                if msg.error():
                    raise RuntimeError(f"reading {self.syncs_topic}: {msg.error()}")
                position = msg.offset() + 1
                if msg.key() is not None and msg.value() is not None:
                    self.store.add(OffsetSync.decode(msg.key(), msg.value()))
        self.syncs_at = position
        self.store.read_to_end = True

    def checkpoints(self) -> list[Checkpoint]:
        """Each source group's committed offsets on replicated topics, translated."""
        from confluent_kafka import ConsumerGroupTopicPartitions

        admin = self.source.admin()
        _, target = aliases(self.config)
        out = []
        for group in self.source_groups():
            future = admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group)], request_timeout=TIMEOUT)[group]
            try:
                committed = future.result(timeout=TIMEOUT)
            except Exception as exc:
                log.warning("mirror checkpoints: offsets of group %s: %s", group, exc)
                continue
            for tp in committed.topic_partitions or []:
                if tp.offset < 0 or not replicated(tp.topic, self.topics, self.policy, target):
                    continue
                downstream = self.store.translate(tp.topic, tp.partition, tp.offset)
                if downstream is None or downstream < 0:
                    continue
                remote = self.policy.format_remote_topic(self.alias, tp.topic)
                out.append(Checkpoint(group, remote, tp.partition, tp.offset, downstream,
                                      tp.metadata or ""))
        return out

    def source_groups(self) -> list[str]:
        """The source's groups this connector checkpoints (`groups` minus `groups.exclude`),
        as last listed: at the first round, then every refresh.groups.interval.seconds."""
        due = (self.known_groups is None or (
            self.refresh_groups
            and time.monotonic() - self.last_group_list >= self.groups_interval))
        if due:
            listed = self.source.admin().list_consumer_groups(
                request_timeout=TIMEOUT).result(timeout=TIMEOUT)
            self.known_groups = sorted(g.group_id for g in listed.valid
                                       if self.groups(g.group_id))
            self.last_group_list = time.monotonic()
        assert self.known_groups is not None
        return self.known_groups

    def restore(self) -> None:
        """The checkpoints emitted before this start (MM2 reads its checkpoints topic back),
        so a restart does not emit a worse translation of the same group position."""
        from confluent_kafka import TopicPartition

        self.restored = True
        if self.checkpoints_topic not in self.target.admin().list_topics(timeout=TIMEOUT).topics:
            return
        consumer = self.target.consumer()
        try:
            tp = TopicPartition(self.checkpoints_topic, 0)
            low, high = consumer.get_watermark_offsets(tp, timeout=TIMEOUT)
            position = low
            consumer.assign([TopicPartition(self.checkpoints_topic, 0, low)])
            deadline = time.monotonic() + TIMEOUT * 4
            while position < high and time.monotonic() < deadline:
                msg = consumer.poll(1.0)
                if msg is None or msg.error():
                    continue
                position = msg.offset() + 1
                try:
                    c = Checkpoint.decode(msg.key() or b"", msg.value() or b"")
                except ValueError:
                    continue  # not ours to read: ignored, as MM2 skips what it cannot parse
                self.emitted[(c.group, c.topic, c.partition)] = c
        finally:
            consumer.close()

    def round(self) -> None:
        if not self.restored:
            self.restore()
        self.read_syncs()
        found = [self._no_worse(c) for c in self.checkpoints()]
        if self.emit:
            self._emit([c for c in found
                        if self.emitted.get((c.group, c.topic, c.partition)) != c])
        for c in found:
            self.emitted[(c.group, c.topic, c.partition)] = c
        if self.sync_groups and time.monotonic() - self.last_group_sync >= self.sync_interval:
            self.last_group_sync = time.monotonic()
            self.sync_group_offsets(found)

    def _no_worse(self, c: Checkpoint) -> Checkpoint:
        """A group that moved forward keeps at least its earlier downstream offset: the
        store's coarser slots may translate a later position less closely (MM2 keeps its
        previous checkpoint the same way); a group that went back is taken as it is."""
        prev = self.emitted.get((c.group, c.topic, c.partition))
        if prev is not None and prev.upstream <= c.upstream and prev.downstream > c.downstream:
            return Checkpoint(c.group, c.topic, c.partition, c.upstream, prev.downstream,
                              c.metadata)
        return c

    def _emit(self, new: list[Checkpoint]) -> None:
        if not new:
            return
        if self.producer is None:
            ensure_compacted(self.target, self.checkpoints_topic,
                             int(self.config.get("checkpoints.topic.replication.factor", "3")))
            self.producer = self.target.producer()
        for c in new:
            self.producer.produce(self.checkpoints_topic, key=c.key(), value=c.value())
        if self.producer.flush(TIMEOUT) > 0:
            raise RuntimeError(f"checkpoints to {self.checkpoints_topic} were not delivered")

    def sync_group_offsets(self, found: list[Checkpoint]) -> None:
        """Commit the translated offsets in the target's groups, as MM2 does: only for a group
        with no active members there, and never moving a committed offset backwards."""
        from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, TopicPartition

        admin = self.target.admin()
        partitions = {t: len(m.partitions)
                      for t, m in admin.list_topics(timeout=TIMEOUT).topics.items()}
        by_group: dict[str, list[Checkpoint]] = {}
        for c in found:
            if c.partition < partitions.get(c.topic, 0):
                by_group.setdefault(c.group, []).append(c)
        if not by_group:
            return
        described = admin.describe_consumer_groups(list(by_group), request_timeout=TIMEOUT)
        for group, checkpoints in sorted(by_group.items()):
            try:
                state = described[group].result(timeout=TIMEOUT).state
            except Exception:
                state = ConsumerGroupState.DEAD  # not there: nothing to disturb
            if state not in (ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD):
                continue  # a live group on the target owns its offsets
            current = self._committed(group)
            moves = [TopicPartition(c.topic, c.partition, c.downstream) for c in checkpoints
                     if current.get((c.topic, c.partition), -1) < c.downstream]
            if not moves:
                continue
            future = admin.alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group, moves)], request_timeout=TIMEOUT)[group]
            try:
                future.result(timeout=TIMEOUT)
            except Exception as exc:  # a consumer joined meanwhile: next round
                log.info("mirror: syncing offsets of group %s on the target: %s", group, exc)

    def _committed(self, group: str) -> dict[tuple[str, int], int]:
        from confluent_kafka import ConsumerGroupTopicPartitions

        admin = self.target.admin()
        future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                   request_timeout=TIMEOUT)[group]
        try:
            result = future.result(timeout=TIMEOUT)
        except Exception:
            return {}
        return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions or []}
