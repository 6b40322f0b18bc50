"""The topic config table: Kafka's topic configs, their types, defaults and broker synonyms.

`TOPIC_CONFIGS` maps each name to its `ConfigDef`; a topic config without an override takes
its value from the first of its broker synonyms that is set (in Kafka's order), else from the
first synonym's default (`BrokerConfig.topic_default`). `validate_topic_configs` is what
CreateTopics and AlterConfigs run on a topic's overrides.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from odradek.metadata.config.config_def import (
    LONG_MAX,
    ConfigDef,
    ConfigError,
    ConfigType,
    Synonym,
    Validator,
    at_least,
    between,
    check_value,
    compression_level,
    list_of,
    one_of,
)

__all__ = ["COMPRESSION_TYPES", "TOPIC_CONFIGS", "validate_topic_configs"]

_HOURS = 3_600_000
_MINUTES = 60_000


def _throttled_replicas(name: str, value: Any) -> None:
    # "*" or a list of partition:broker pairs (Kafka's ThrottledReplicaListValidator)
    items = [v.strip() for v in value or ()]
    if items == ["*"]:
        return
    for item in items:
        part, sep, broker = item.partition(":")
        if not (sep and part.strip().isdigit() and broker.strip().isdigit()):
            raise ConfigError(
                f"Invalid value {','.join(items)} for configuration {name}: "
                "must be the literal '*' or a list of replicas in the following format: "
                "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
            )


def _t(
    name: str,
    ctype: ConfigType,
    default: Any,
    validator: Validator | None,
    doc: str,
    *synonyms: str | Synonym,
) -> ConfigDef:
    syns = tuple(s if isinstance(s, Synonym) else Synonym(s) for s in synonyms)
    return ConfigDef(name, ctype, default, validator, doc, syns)


B, S, I, L, D, LST = (  # noqa: E741
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
)

TOPIC_NAME_STRATEGY = "io.confluent.kafka.serializers.subject.TopicNameStrategy"
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

_TOPIC_DEFS = [
    _t("cleanup.policy", LST, ["delete"], list_of("compact", "delete"),
       "What to do with old log segments: 'delete' removes them once past the retention limits, "
       "'compact' keeps the latest record per key; both may be given.",
       "log.cleanup.policy"),
    _t("compression.type", S, "producer", one_of(*COMPRESSION_TYPES),
       "The compression codec batches are stored with; 'producer' keeps what the producer sent, "
       "'uncompressed' stores them uncompressed.", "compression.type"),
    _t("compression.gzip.level", I, -1, compression_level(1, 9, -1),
       "Compression level used when compression.type is gzip.", "compression.gzip.level"),
    _t("compression.lz4.level", I, 9, compression_level(1, 17),
       "Compression level used when compression.type is lz4.", "compression.lz4.level"),
    _t("compression.zstd.level", I, 3, compression_level(-131072, 22),
       "Compression level used when compression.type is zstd.", "compression.zstd.level"),
    _t("delete.retention.ms", L, 86_400_000, at_least(0),
       "How long delete tombstones stay readable in a compacted topic.",
       "log.cleaner.delete.retention.ms"),
    _t("file.delete.delay.ms", L, 60_000, at_least(0),
       "How long a deleted segment file waits before it is removed from disk.",
       "log.segment.delete.delay.ms"),
    _t("flush.messages", L, LONG_MAX, at_least(1),
       "Force an fsync of the log after this many messages; the default leaves flushing to the OS.",
       "log.flush.interval.messages"),
    _t("flush.ms", L, LONG_MAX, at_least(0),
       "Force an fsync of the log when this much time passed since the last one; the default "
       "leaves flushing to the OS.", "log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    _t("follower.replication.throttled.replicas", LST, [], _throttled_replicas,
       "Replicas (partition:broker, or '*') whose follower-side replication is throttled."),
    _t("index.interval.bytes", I, 4096, at_least(0),
       "How many bytes of log lie between two entries of the offset index.",
       "log.index.interval.bytes"),
    _t("leader.replication.throttled.replicas", LST, [], _throttled_replicas,
       "Replicas (partition:broker, or '*') whose leader-side replication is throttled."),
    _t("local.retention.bytes", L, -2, at_least(-2),
       "With tiered storage, the bytes kept locally per partition; -2 means retention.bytes.",
       "log.local.retention.bytes"),
    _t("local.retention.ms", L, -2, at_least(-2),
       "With tiered storage, how long segments stay local; -2 means retention.ms.",
       "log.local.retention.ms"),
    _t("max.compaction.lag.ms", L, LONG_MAX, at_least(1),
       "The longest a record may stay uncompacted in a compacted topic.",
       "log.cleaner.max.compaction.lag.ms"),
    _t("max.message.bytes", I, 1_048_588, at_least(0),
       "The largest record batch (after compression) the topic accepts.", "message.max.bytes"),
    _t("message.downconversion.enable", B, True, None,
       "Whether fetches by old consumers may down-convert batches to an older message format.",
       "log.message.downconversion.enable"),
    _t("message.format.version", S, "3.0-IV1", None,
       "Deprecated: ignored since message format v2 is always used.",
       "log.message.format.version"),
    _t("message.timestamp.after.max.ms", L, LONG_MAX, at_least(0),
       "How far a CreateTime timestamp may lie after the broker's clock.",
       "log.message.timestamp.after.max.ms"),
    _t("message.timestamp.before.max.ms", L, LONG_MAX, at_least(0),
       "How far a CreateTime timestamp may lie before the broker's clock.",
       "log.message.timestamp.before.max.ms"),
    _t("message.timestamp.difference.max.ms", L, LONG_MAX, at_least(0),
       "Deprecated: the largest allowed distance between a CreateTime timestamp and the broker's "
       "clock.", "log.message.timestamp.difference.max.ms"),
    _t("message.timestamp.type", S, "CreateTime", one_of("CreateTime", "LogAppendTime"),
       "Whether record timestamps are the producer's (CreateTime) or the broker's append time "
       "(LogAppendTime).", "log.message.timestamp.type"),
    _t("min.cleanable.dirty.ratio", D, 0.5, between(0, 1),
       "The share of uncompacted log that makes a compacted log eligible for cleaning.",
       "log.cleaner.min.cleanable.ratio"),
    _t("min.compaction.lag.ms", L, 0, at_least(0),
       "The shortest time a record stays uncompacted in a compacted topic.",
       "log.cleaner.min.compaction.lag.ms"),
    _t("min.insync.replicas", I, 1, at_least(1),
       "With acks=all, the fewest in-sync replicas that must acknowledge a write.",
       "min.insync.replicas"),
    _t("preallocate", B, False, None,
       "Whether a new segment file is preallocated on disk.", "log.preallocate"),
    _t("remote.log.copy.disable", B, False, None,
       "With tiered storage, stop copying segments to remote storage."),
    _t("remote.log.delete.on.disable", B, False, None,
       "With tiered storage, delete remote segments when tiering is turned off."),
    _t("remote.storage.enable", B, False, None, "Whether the topic uses tiered storage."),
    # Kafka itself takes any long here; a negative value other than -1 is refused (issue 5)
    _t("retention.bytes", L, -1, at_least(-1),
       "The most bytes a partition keeps before old segments are deleted; -1 means no limit.",
       "log.retention.bytes"),
    _t("retention.ms", L, 604_800_000, at_least(-1),
       "How long a segment is kept before it is deleted; -1 means no limit.",
       "log.retention.ms", Synonym("log.retention.minutes", _MINUTES),
       Synonym("log.retention.hours", _HOURS)),
    _t("segment.bytes", I, 1_073_741_824, at_least(14),
       "The size at which a segment file is rolled.", "log.segment.bytes"),
    _t("segment.index.bytes", I, 10_485_760, at_least(4),
       "The size of the offset index (and time index) files of a segment.",
       "log.index.size.max.bytes"),
    _t("segment.jitter.ms", L, 0, at_least(0),
       "A random amount subtracted from segment.ms so that segments do not all roll together.",
       "log.roll.jitter.ms", Synonym("log.roll.jitter.hours", _HOURS)),
    _t("segment.ms", L, 604_800_000, at_least(1),
       "The age at which a segment is rolled even when it is not full.",
       "log.roll.ms", Synonym("log.roll.hours", _HOURS)),
    _t("unclean.leader.election.enable", B, False, None,
       "Whether a replica outside the ISR may become leader, at the cost of losing data.",
       "unclean.leader.election.enable"),
] + [
    # Confluent Server's broker-side schema ID validation (issue 17), with its names: a produce
    # whose records lack a schema id registered under the topic's subject is refused
    _t(f"confluent.{part}.schema.validation", B, False, None,
       f"Refuse records whose {part} does not carry, in the Confluent wire format, the id of a "
       f"schema registered under the subject <topic>-{part} (null {part}s pass).")
    for part in ("key", "value")
] + [
    _t(f"confluent.{part}.subject.name.strategy", S, TOPIC_NAME_STRATEGY,
       one_of(TOPIC_NAME_STRATEGY),
       f"How the {part}'s subject is named for schema validation; odradek serves Confluent's "
       "default TopicNameStrategy (<topic>-key, <topic>-value) and refuses the others.")
    for part in ("key", "value")
]

TOPIC_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in _TOPIC_DEFS}


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, Any]:
    """Parse and check topic configs; the first bad one raises INVALID_CONFIG naming its key."""
    parsed: dict[str, Any] = {}
    for name, raw in configs.items():
        defn = TOPIC_CONFIGS.get(name)
        if defn is None:
            raise ConfigError(f"Unknown topic config name: {name}")
        if raw is None:
            raise ConfigError(f"Null value not supported for topic configs: {name}")
        parsed[name] = check_value(defn, name, raw)
    _check_compaction_lags(parsed)
    return parsed


def _check_compaction_lags(parsed: Mapping[str, Any]) -> None:
    low = parsed.get("min.compaction.lag.ms")
    high = parsed.get("max.compaction.lag.ms")
    if low is not None and high is not None and low > high:
        raise ConfigError(
            f"conflict topic config setting min.compaction.lag.ms ({low}) > "
            f"max.compaction.lag.ms ({high})"
        )
