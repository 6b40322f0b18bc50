"""MirrorMaker 2's connectors, with its class and config names, each a Spark query.

MirrorSourceConnector: the source cluster's topics (`topics` regexes minus `topics.exclude`,
never MM2's internal topics nor topics that came from the target) read as a stream from the
source cluster and copied to remote topics on the target (`replication.policy.class`:
DefaultReplicationPolicy `<alias>.<topic>`, IdentityReplicationPolicy the same name), same
partition, key, value, headers and timestamp. Remote topics are created with the source's
partition count and its set configs (`sync.topic.configs.enabled`, minus
`config.properties.exclude`), kept in step every `sync.topic.configs.interval.seconds`. Each
delivered record's (upstream, downstream) offsets feed MM2's offset-sync rule, and the syncs
go to `mm2-offset-syncs.<target>.internal` on the source (`offset-syncs.topic.location`).
Its Connect offsets are MM2's: partition {cluster, topic, partition}, offset {offset} (the
last upstream offset copied), so a restart resumes after it. At-least-once, as MM2 without
exactly-once source support: a crash between the copy and the offset write copies again.
With `refresh.topics.enabled` (default true) the source's topics are listed again every
`refresh.topics.interval.seconds` (default 600); a new matching topic, or a topic with more
partitions, restarts the query (MM2 reconfigures its tasks) to read it from its start.

MirrorCheckpointConnector: every `emit.checkpoints.interval.seconds` it reads the offset
syncs, translates the committed offsets of the source's groups (`groups` minus
`groups.exclude`, listed at the start and, with `refresh.groups.enabled`, again every
`refresh.groups.interval.seconds`: defaults true and 600) on replicated topics with MM2's conservative rule (mirror_sync), writes
checkpoints to `<source>.checkpoints.internal` on the target and, with
`sync.group.offsets.enabled`, commits them in the target's groups that have no live members
(never backwards). A consumer that moves to the target then misses nothing; it may re-read
the records between the sync used and its real position.

MirrorHeartbeatConnector: a heartbeat to `heartbeats` on the target every
`emit.heartbeats.interval.seconds`.

The periodic connectors run on Spark's rate source as their clock (a micro-batch per
interval); the records they write are small and written from the driver.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from odradek.connect import converters
from odradek.connect.configdef import Field, as_list
from odradek.connect.connectors import mirror_io, sink_query
from odradek.connect.connectors.mirror_sync import (
    CONFIGS_EXCLUDE,
    GROUPS_EXCLUDE,
    POLICIES,
    TOPICS_EXCLUDE,
    Heartbeat,
)
from odradek.connect.plugins import ConnectorPlugin, NotReady, RunContext

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger(__name__)
VERSION = "0.1.0"
PACKAGE = "org.apache.kafka.connect.mirror."


def _regexes(raw: str, config: Mapping[str, str]) -> list[str]:
    out = []
    for p in raw.split(","):
        try:
            re.compile(p.strip())
        except re.error as exc:
            out.append(f"Invalid regex {p.strip()!r}: {exc}")
    return out


def _required(raw: str, config: Mapping[str, str]) -> list[str]:
    return [] if raw.strip() else ["must not be empty"]


CLUSTERS = (
    Field("source.cluster.alias", "STRING", "source", "HIGH",
          "Alias of the source cluster (names its remote topics).", group="Mirror",
          check=_required),
    Field("target.cluster.alias", "STRING", "target", "HIGH", "Alias of the target cluster.",
          group="Mirror", check=_required),
    Field("source.cluster.bootstrap.servers", "LIST", None, "HIGH",
          "The source cluster's bootstrap servers.", group="Mirror", check=_required),
    Field("target.cluster.bootstrap.servers", "LIST", None, "HIGH",
          "The target cluster's bootstrap servers.", group="Mirror", check=_required),
    Field("replication.policy.class", "CLASS", POLICIES[0], "LOW",
          "Class which defines the remote topic naming convention.", group="Mirror",
          recommended=POLICIES),
    Field("replication.policy.separator", "STRING", ".", "LOW",
          "Separator used in remote topic naming convention.", group="Mirror"),
)
TOPICS = (
    Field("topics", "LIST", ".*", "HIGH", "Topics to replicate. Supports comma-separated "
          "topic names and regexes.", group="Mirror", check=_regexes),
    Field("topics.exclude", "LIST", TOPICS_EXCLUDE, "HIGH", "Topics to exclude. Supports "
          "comma-separated topic names and regexes.", group="Mirror", check=_regexes),
)
SYNCS = (
    Field("offset-syncs.topic.location", "STRING", "source", "LOW",
          "The cluster the offset-syncs topic is on.", group="Mirror",
          recommended=("source", "target")),
)


class _Mirror(ConnectorPlugin):
    type = "source"
    version = VERSION

    def extra_errors(self, config: Mapping[str, str]) -> dict[str, list[str]]:
        # MM2 copies bytes: a converter that is not ByteArray would re-encode them, and SMTs
        # are not applied on this path, so both are refused rather than ignored.
        out: dict[str, list[str]] = {}
        if as_list(config.get("transforms")):
            out["transforms"] = [f"{self.class_name.rsplit('.', 1)[-1]} copies records as "
                                 "they are: remove 'transforms'"]
        for which in ("key.converter", "value.converter"):
            if which in config and config[which].strip() != converters.BYTES:
                out[which] = [f"MirrorMaker connectors copy bytes: {which} must be "
                              f"{converters.BYTES}"]
        return out

    def _clock(self, ctx: RunContext, seconds: float, tick: Any) -> StreamingQuery:
        """A query on Spark's rate source whose micro-batches call `tick` every `seconds`."""
        def each(batch: DataFrame, batch_id: int) -> None:
            try:
                tick()
            except Exception as exc:
                # As MM2's periodic tasks: a failed round (a cluster briefly unreachable) is
                # logged and the next interval tries again; nothing is lost by waiting.
                log.warning("%s: this round failed, retrying in the next: %s", ctx.name, exc)

        rate = ctx.spark.readStream.format("rate").option("rowsPerSecond", "1").load()
        return (rate.writeStream.foreachBatch(each).queryName(sink_query.query_name(ctx.name))
                .option("checkpointLocation", ctx.checkpoint)
                .trigger(processingTime=f"{max(int(seconds * 1000), 100)} milliseconds")
                .start())


class MirrorSource(_Mirror):
    class_name = PACKAGE + "MirrorSourceConnector"
    fields = (*CLUSTERS, *TOPICS, *SYNCS,
              Field("replication.factor", "INT", "2", "HIGH",
                    "Replication factor for newly created remote topics.", group="Mirror",
                    at_least=1),
              Field("refresh.topics.enabled", "BOOLEAN", "true", "LOW",
                    "Whether to periodically check for new topics and partitions.",
                    group="Mirror"),
              Field("refresh.topics.interval.seconds", "LONG", "600", "LOW",
                    "Frequency of topic refresh.", group="Mirror", at_least=1),
              Field("sync.topic.configs.enabled", "BOOLEAN", "true", "LOW",
                    "Whether to periodically configure remote topics to match their "
                    "corresponding upstream topics.", group="Mirror"),
              Field("sync.topic.configs.interval.seconds", "LONG", "600", "LOW",
                    "Frequency of topic config sync.", group="Mirror", at_least=1),
              Field("config.properties.exclude", "LIST", CONFIGS_EXCLUDE, "HIGH",
                    "Topic configuration properties that should not be replicated.",
                    group="Mirror", check=_regexes),
              Field("emit.offset-syncs.enabled", "BOOLEAN", "true", "LOW",
                    "Whether to store the new offset of the replicated records in offset-syncs "
                    "topic or not.", group="Mirror"),
              Field("offset-syncs.topic.replication.factor", "SHORT", "3", "LOW",
                    "Replication factor for the offset-syncs topic.", group="Mirror",
                    at_least=1),
              Field("offset.lag.max", "LONG", "100", "LOW",
                    "How out-of-sync a remote partition can be before it is resynced.",
                    group="Mirror", at_least=0))

    def offset_errors(self, partition: dict[str, Any], offset: dict[str, Any] | None) -> list[str]:
        if (set(partition) != {"cluster", "topic", "partition"}
                or not isinstance(partition.get("partition"), int)):
            return ["Partitions for MirrorSourceConnector must have the keys 'cluster', "
                    "'topic' and 'partition' (an integer)"]
        if offset is not None and (set(offset) != {"offset"}
                                   or not isinstance(offset["offset"], int)
                                   or offset["offset"] < 0):
            return ["The value for the 'offset' key must be a non-negative integer"]
        return []

    def start(self, ctx: RunContext) -> StreamingQuery:
        from pyspark.sql import functions as F

        source = mirror_io.cluster_of(ctx.config, "source")
        topics = mirror_io.source_topics(ctx.config, source)
        if not topics:
            raise NotReady("no topic of the source cluster matches 'topics'")
        replicator = mirror_io.Replicator(ctx.config, source)
        replicator.prepare(topics)
        alias, _ = mirror_io.aliases(ctx.config)
        stored = {(p.get("topic"), p.get("partition")): int(o["offset"])
                  for p, o in ctx.offsets or [] if p.get("cluster") == alias and o}
        # MM2 stores the last offset copied: resume after it; a new partition from the start.
        starting = {t: {str(p): stored[(t, p)] + 1 if (t, p) in stored else sink_query.EARLIEST
                        for p in range(n)} for t, n in topics.items()}
        df = (ctx.spark.readStream.format("odradek").options(**source.spark_options())
              .option("subscribe", ",".join(topics)).option("includeHeaders", "true")
              .option("startingOffsets", json.dumps(starting)).load())
        rows = df.select("topic", "partition", "offset",
                         F.unix_millis(F.col("timestamp")).alias("ts"), "key", "value", "headers")

        def write(batch: DataFrame, batch_id: int) -> None:
            # each partition's records in offset order, whatever Spark's partitioning did
            table = batch.toArrow().sort_by([("topic", "ascending"),
                                             ("partition", "ascending"),
                                             ("offset", "ascending")])
            if table.num_rows:
                replicator.replicate({c: table.column(c).to_pylist() for c in table.column_names},
                                     topics)

        query = sink_query.start_each_batch(ctx, rows, write)
        if ctx.config.get("refresh.topics.enabled", "true").strip().lower() == "true":
            seconds = float(ctx.config.get("refresh.topics.interval.seconds", "600"))
            threading.Thread(target=_watch_topics, args=(ctx, source, topics, seconds),
                             name=f"mirror-topics-{ctx.name}", daemon=True).start()
        return query

    def source_offset(self, config: Mapping[str, str],
                      end: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        alias, _ = mirror_io.aliases(config)
        return [({"cluster": alias, "topic": t, "partition": int(p)}, {"offset": int(o) - 1})
                for t, parts in sorted(end.items()) for p, o in sorted(parts.items())
                if int(o) > 0]


def _watch_topics(ctx: RunContext, source: Any, known: dict[str, int], seconds: float) -> None:
    """MM2's topic refresh for one start of the source query: until the query stops, list the
    source's topics every `seconds`; a new one (or new partitions) asks for a new start."""
    while not ctx.stopped.wait(seconds):
        try:
            now = mirror_io.source_topics(ctx.config, source)
        except Exception as exc:  # the source briefly unreachable: the next round tries again
            log.warning("%s: listing the source's topics failed: %s", ctx.name, exc)
            continue
        changed = sorted(t for t, n in now.items() if n > known.get(t, 0))
        if changed:
            ctx.reconfigure(f"new topics or partitions on the source: {', '.join(changed)}")
            return


class MirrorCheckpoint(_Mirror):
    class_name = PACKAGE + "MirrorCheckpointConnector"
    fields = (*CLUSTERS, *TOPICS, *SYNCS,
              Field("groups", "LIST", ".*", "HIGH", "Consumer groups to replicate. Supports "
                    "comma-separated group IDs and regexes.", group="Mirror", check=_regexes),
              Field("groups.exclude", "LIST", GROUPS_EXCLUDE, "HIGH", "Consumer groups to "
                    "exclude.", group="Mirror", check=_regexes),
              Field("refresh.groups.enabled", "BOOLEAN", "true", "LOW",
                    "Whether to periodically check for new consumer groups.", group="Mirror"),
              Field("refresh.groups.interval.seconds", "LONG", "600", "LOW",
                    "Frequency of group refresh.", group="Mirror", at_least=1),
              Field("emit.checkpoints.enabled", "BOOLEAN", "true", "LOW",
                    "Whether to replicate consumer offsets to target cluster.", group="Mirror"),
              Field("emit.checkpoints.interval.seconds", "LONG", "60", "LOW",
                    "Frequency of checkpoints.", group="Mirror", at_least=1),
              Field("sync.group.offsets.enabled", "BOOLEAN", "false", "LOW",
                    "Whether to periodically write the translated offsets to __consumer_offsets "
                    "topic in target cluster, as long as no active consumers in that group "
                    "are connected to the target cluster.", group="Mirror"),
              Field("sync.group.offsets.interval.seconds", "LONG", "60", "LOW",
                    "Frequency of consumer group offset sync.", group="Mirror", at_least=1),
              Field("checkpoints.topic.replication.factor", "SHORT", "3", "LOW",
                    "Replication factor for checkpoints topic.", group="Mirror", at_least=1))

    def start(self, ctx: RunContext) -> StreamingQuery:
        checkpointer = mirror_io.Checkpointer(ctx.config)
        seconds = [float(ctx.config.get("emit.checkpoints.interval.seconds", "60"))]
        if ctx.config.get("sync.group.offsets.enabled", "false").strip().lower() == "true":
            seconds.append(float(ctx.config.get("sync.group.offsets.interval.seconds", "60")))
        return self._clock(ctx, min(seconds), checkpointer.round)


class MirrorHeartbeat(_Mirror):
    class_name = PACKAGE + "MirrorHeartbeatConnector"
    fields = (*CLUSTERS[:4],
              Field("emit.heartbeats.enabled", "BOOLEAN", "true", "LOW",
                    "Whether to emit heartbeats to target cluster.", group="Mirror"),
              Field("emit.heartbeats.interval.seconds", "LONG", "1", "LOW",
                    "Frequency of heartbeats.", group="Mirror", at_least=1),
              Field("heartbeats.topic.replication.factor", "SHORT", "3", "LOW",
                    "Replication factor for heartbeats topic.", group="Mirror", at_least=1))

    def start(self, ctx: RunContext) -> StreamingQuery:
        config = ctx.config
        source, target = mirror_io.aliases(config)
        cluster = mirror_io.cluster_of(config, "target")
        enabled = config.get("emit.heartbeats.enabled", "true").strip().lower() == "true"
        state: dict[str, Any] = {}

        def beat() -> None:
            if not enabled:
                return
            if "producer" not in state:
                mirror_io.ensure_compacted(
                    cluster, "heartbeats",
                    int(config.get("heartbeats.topic.replication.factor", "3")))
                state["producer"] = cluster.producer()
            beat = Heartbeat(source, target, int(time.time() * 1000))
            state["producer"].produce("heartbeats", key=beat.key(), value=beat.value())
            if state["producer"].flush(mirror_io.TIMEOUT) > 0:
                raise RuntimeError("a heartbeat was not delivered")

        return self._clock(ctx, float(config.get("emit.heartbeats.interval.seconds", "1")), beat)
