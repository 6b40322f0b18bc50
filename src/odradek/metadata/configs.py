"""The config table: Kafka's topic and broker config names, types, defaults and validation.

One table (`TOPIC_CONFIGS`, `BROKER_CONFIGS`) drives parsing, validation, DescribeConfigs
(values, sources, synonyms) and the `LogConfig` a partition's log is opened with.
A topic config without an override takes its value from the first of its broker synonyms
that is set (in Kafka's order), else from that synonym list's first default.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from odradek.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from odradek.storage.config import LogConfig

__all__ = [
    "BROKER_CONFIGS",
    "DYNAMIC_BROKER_CONFIGS",
    "LOG_LEVELS",
    "LOG_LEVEL_PREFIX",
    "TOPIC_CONFIGS",
    "BrokerConfig",
    "ConfigDef",
    "ConfigEntry",
    "ConfigError",
    "ConfigSource",
    "ConfigSynonym",
    "ConfigType",
    "Synonym",
    "describe_broker_configs",
    "describe_topic_configs",
    "effective_topic_configs",
    "log_config",
    "parse_properties",
    "parse_value",
    "to_config_string",
    "validate_broker_configs",
    "validate_broker_dynamic_configs",
    "validate_topic_configs",
]

log = logging.getLogger(__name__)

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
_HOURS = 3_600_000
_MINUTES = 60_000


class ConfigType(IntEnum):
    """DescribeConfigs' config_type ids (KIP-569)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """DescribeConfigs' config_source ids."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


class ConfigError(KafkaError):
    """A config name or value Kafka refuses: INVALID_CONFIG naming the key."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.invalid_config, message)


Validator = Callable[[str, Any], None]


@dataclass(frozen=True, slots=True)
class Synonym:
    """A broker config standing in for a topic config; its value times `multiplier`."""

    name: str
    multiplier: int = 1


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    type: ConfigType
    default: Any  # the parsed default, None when Kafka has none
    validator: Validator | None
    doc: str
    synonyms: tuple[Synonym, ...] = ()  # topic configs only: broker synonyms in Kafka's order
    dynamic: bool = False  # broker configs only: alterable at runtime

    @property
    def sensitive(self) -> bool:
        return self.type is ConfigType.PASSWORD


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    read_only: bool
    source: ConfigSource
    sensitive: bool
    synonyms: list[ConfigSynonym] = field(default_factory=list)
    type: ConfigType = ConfigType.UNKNOWN
    documentation: str | None = None


# --- validators (messages follow Kafka's ConfigDef validators) ---------------------------------


def at_least(minimum: float) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is not None and value < minimum:
            raise ConfigError(
                f"Invalid value {to_config_string(value)} for configuration {name}: "
                f"Value must be at least {minimum}"
            )

    return check


def between(low: float, high: float) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is not None and not (low <= value <= high):
            raise ConfigError(
                f"Invalid value {to_config_string(value)} for configuration {name}: "
                f"Value must be no less than {low} and no more than {high}"
            )

    return check


def one_of(*allowed: str) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is not None and value not in allowed:
            raise ConfigError(
                f"Invalid value {value} for configuration {name}: "
                f"String must be one of: {', '.join(allowed)}"
            )

    return check


def list_of(*allowed: str) -> Validator:
    def check(name: str, value: Any) -> None:
        for item in value or ():
            if item not in allowed:
                raise ConfigError(
                    f"Invalid value {item} for configuration {name}: "
                    f"String must be one of: {', '.join(allowed)}"
                )

    return check


def _level(low: int, high: int, extra: int | None = None) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is None or value == extra or low <= value <= high:
            return
        allowed = f"[{extra}, {low},...,{high}]" if extra is not None else f"[{low},...,{high}]"
        raise ConfigError(
            f"Invalid value {value} for configuration {name}: Value must be one of {allowed}"
        )

    return check


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


# log4j's level names, as Kafka's broker loggers take them (case-insensitive here)
LOG_LEVELS = ("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF")
# odradek-only: `log.level.<logger>` sets one package's level, e.g. log.level.odradek.storage
LOG_LEVEL_PREFIX = "log.level."


def _log_level(name: str, value: Any) -> None:
    if value is not None and value.strip().upper() not in LOG_LEVELS:
        raise ConfigError(
            f"Invalid value {value} for configuration {name}: "
            f"String must be one of: {', '.join(LOG_LEVELS)}"
        )


def _non_empty_list(name: str, value: Any) -> None:
    if value is not None and any(not v for v in value):
        raise ConfigError(f"Invalid value {','.join(value)} for configuration {name}: empty item")


# --- parsing and printing values ---------------------------------------------------------------

_INT_RANGES = {
    ConfigType.SHORT: (-(2**15), 2**15 - 1),
    ConfigType.INT: (-(2**31), 2**31 - 1),
    ConfigType.LONG: (-(2**63), 2**63 - 1),
}


def parse_value(name: str, ctype: ConfigType, raw: str | None) -> Any:
    """Parse a config string as Kafka's ConfigDef.parseType does; ConfigError names the key."""
    if raw is None:
        return None
    if ctype is ConfigType.PASSWORD:
        return raw
    text = raw.strip()
    if ctype is ConfigType.BOOLEAN:
        low = text.lower()
        if low in ("true", "false"):
            return low == "true"
        raise ConfigError(
            f"Invalid value {raw} for configuration {name}: Expected value to be either true or false"
        )
    if ctype in _INT_RANGES:
        lo, hi = _INT_RANGES[ctype]
        try:
            number = int(text, 10)
        except ValueError:
            number = None
        if number is None or not lo <= number <= hi or not _is_java_integer(text):
            raise ConfigError(
                f"Invalid value {raw} for configuration {name}: "
                f"Not a number of type {ctype.name}"
            )
        return number
    if ctype is ConfigType.DOUBLE:
        try:
            number = float(text)
        except ValueError:
            number = math.nan
        if math.isnan(number) or "_" in text:
            raise ConfigError(
                f"Invalid value {raw} for configuration {name}: Not a number of type DOUBLE"
            )
        return number
    if ctype is ConfigType.LIST:
        if not text:
            return []
        return [item.strip() for item in text.split(",")]
    return text


def _is_java_integer(text: str) -> bool:
    # Python's int() accepts "1_000" and surrounding whitespace; Java's parseLong does not.
    body = text[1:] if text[:1] in "+-" else text
    return body.isdigit() and body.isascii()


def to_config_string(value: Any) -> str | None:
    """Print a parsed value the way Kafka's ConfigDef.convertToString does."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


# --- the tables --------------------------------------------------------------------------------


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

_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

_TOPIC_DEFS = [
    _t("cleanup.policy", LST, ["delete"], list_of("compact", "delete"),
       "What to do with old log segments: 'delete' removes them once past the retention limits, "
       "'compact' keeps the latest record per key; both may be given.",
       "log.cleanup.policy"),
    _t("compression.type", S, "producer", one_of(*_COMPRESSION),
       "The compression codec batches are stored with; 'producer' keeps what the producer sent, "
       "'uncompressed' stores them uncompressed.", "compression.type"),
    _t("compression.gzip.level", I, -1, _level(1, 9, -1),
       "Compression level used when compression.type is gzip.", "compression.gzip.level"),
    _t("compression.lz4.level", I, 9, _level(1, 17),
       "Compression level used when compression.type is lz4.", "compression.lz4.level"),
    _t("compression.zstd.level", I, 3, _level(-131072, 22),
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
]

TOPIC_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in _TOPIC_DEFS}


def _b(
    name: str,
    ctype: ConfigType,
    default: Any,
    validator: Validator | None,
    doc: str,
    dynamic: bool = False,
) -> ConfigDef:
    return ConfigDef(name, ctype, default, validator, doc, (), dynamic)


# Broker-level twins of the topic configs (their synonyms).
_LOG_BROKER_DEFS = [
    _b("log.cleanup.policy", LST, ["delete"], list_of("compact", "delete"),
       "Default cleanup.policy of topics."),
    _b("compression.type", S, "producer", one_of(*_COMPRESSION),
       "Default compression.type of topics."),
    _b("compression.gzip.level", I, -1, _level(1, 9, -1), "Default compression.gzip.level."),
    _b("compression.lz4.level", I, 9, _level(1, 17), "Default compression.lz4.level."),
    _b("compression.zstd.level", I, 3, _level(-131072, 22), "Default compression.zstd.level."),
    _b("log.cleaner.delete.retention.ms", L, 86_400_000, at_least(0),
       "Default delete.retention.ms of topics."),
    _b("log.segment.delete.delay.ms", L, 60_000, at_least(0),
       "Default file.delete.delay.ms of topics."),
    _b("log.flush.interval.messages", L, LONG_MAX, at_least(1),
       "Default flush.messages of topics."),
    _b("log.flush.interval.ms", L, None, None,
       "Default flush.ms of topics; when unset log.flush.scheduler.interval.ms is used."),
    _b("log.flush.scheduler.interval.ms", L, LONG_MAX, None,
       "How often the flusher checks whether a log needs an fsync."),
    _b("log.index.interval.bytes", I, 4096, at_least(0),
       "Default index.interval.bytes of topics."),
    _b("log.local.retention.bytes", L, -2, at_least(-2), "Default local.retention.bytes."),
    _b("log.local.retention.ms", L, -2, at_least(-2), "Default local.retention.ms."),
    _b("log.cleaner.max.compaction.lag.ms", L, LONG_MAX, at_least(1),
       "Default max.compaction.lag.ms of topics."),
    _b("message.max.bytes", I, 1_048_588, at_least(0),
       "The largest record batch the broker accepts; default max.message.bytes of topics."),
    _b("log.message.downconversion.enable", B, True, None,
       "Default message.downconversion.enable of topics."),
    _b("log.message.format.version", S, "3.0-IV1", None, "Deprecated and ignored."),
    _b("log.message.timestamp.after.max.ms", L, LONG_MAX, at_least(0),
       "Default message.timestamp.after.max.ms of topics."),
    _b("log.message.timestamp.before.max.ms", L, LONG_MAX, at_least(0),
       "Default message.timestamp.before.max.ms of topics."),
    _b("log.message.timestamp.difference.max.ms", L, LONG_MAX, at_least(0),
       "Deprecated default message.timestamp.difference.max.ms of topics."),
    _b("log.message.timestamp.type", S, "CreateTime", one_of("CreateTime", "LogAppendTime"),
       "Default message.timestamp.type of topics."),
    _b("log.cleaner.min.cleanable.ratio", D, 0.5, between(0, 1),
       "Default min.cleanable.dirty.ratio of topics."),
    _b("log.cleaner.min.compaction.lag.ms", L, 0, at_least(0),
       "Default min.compaction.lag.ms of topics."),
    _b("min.insync.replicas", I, 1, at_least(1), "Default min.insync.replicas of topics."),
    _b("log.preallocate", B, False, None, "Default preallocate of topics."),
    _b("log.retention.bytes", L, -1, at_least(-1), "Default retention.bytes of topics."),
    _b("log.retention.ms", L, None, None,
       "Default retention.ms of topics; takes precedence over minutes and hours."),
    _b("log.retention.minutes", I, None, None,
       "Default retention of topics in minutes; takes precedence over hours."),
    _b("log.retention.hours", I, 168, None, "Default retention of topics in hours."),
    _b("log.segment.bytes", I, 1_073_741_824, at_least(14), "Default segment.bytes of topics."),
    _b("log.index.size.max.bytes", I, 10_485_760, at_least(4),
       "Default segment.index.bytes of topics."),
    _b("log.roll.jitter.ms", L, None, None,
       "Default segment.jitter.ms of topics; takes precedence over hours."),
    _b("log.roll.jitter.hours", I, 0, at_least(0), "Default segment jitter in hours."),
    _b("log.roll.ms", L, None, None,
       "Default segment.ms of topics; takes precedence over hours."),
    _b("log.roll.hours", I, 168, at_least(1), "Default segment age before rolling, in hours."),
    _b("unclean.leader.election.enable", B, False, None,
       "Default unclean.leader.election.enable of topics."),
]

_NODE_BROKER_DEFS = [
    _b("node.id", I, 1, None,
       "The id of this node (odradek defaults it to 1 so that a single node needs no config)."),
    _b("broker.id", I, -1, None, "Older name of node.id; when set it must agree with node.id."),
    _b("process.roles", LST, ["broker", "controller"], list_of("broker", "controller"),
       "The roles this node plays."),
    _b("listeners", LST, ["PLAINTEXT://localhost:9092"], _non_empty_list,
       "Comma-separated URIs (NAME://host:port) the node listens on."),
    _b("advertised.listeners", LST, None, None,
       "Listeners handed to clients in metadata; defaults to listeners."),
    _b("controller.listener.names", LST, None, None, "Names of the controller listeners."),
    _b("controller.quorum.voters", LST, [], None, "The controller quorum: id@host:port,..."),
    _b("inter.broker.listener.name", S, None, None, "Listener used between brokers."),
    _b("listener.security.protocol.map", S,
       "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT", None,
       "Listener name to security protocol."),
    _b("broker.rack", S, None, None, "The rack of this node."),
    _b("log.dir", S, "/tmp/kafka-logs", None,
       "Directory of the logs (used when log.dirs is unset)."),
    _b("log.dirs", S, None, None, "Directories of the logs; the first one is used."),
    _b("metadata.log.dir", S, None, None, "Directory of the metadata log; defaults to log.dirs."),
    _b("num.partitions", I, 1, at_least(1), "Default partition count of new topics."),
    _b("default.replication.factor", I, 1, None, "Default replication factor of new topics."),
    _b("auto.create.topics.enable", B, True, None,
       "Create a topic when a client asks for its metadata and it does not exist."),
    _b("delete.topic.enable", B, True, None, "Whether topics may be deleted."),
    _b("socket.request.max.bytes", I, 104_857_600, at_least(1),
       "The largest request the node reads."),
    _b("max.connections", I, INT_MAX, at_least(0),
       "The most connections the node accepts; counted in its file-descriptor budget."),
    _b("log.open.files.max", I, 256, at_least(1),
       "Odradek-specific: the most files of inactive segments and indexes kept open at once "
       "(a pool, least recently used closed first); Kafka keeps every segment file open."),
    _b("socket.send.buffer.bytes", I, 102_400, None, "SO_SNDBUF of sockets; -1 for the OS."),
    _b("socket.receive.buffer.bytes", I, 102_400, None, "SO_RCVBUF of sockets; -1 for the OS."),
    _b("queued.max.requests", I, 500, at_least(1), "In-flight requests before reading pauses."),
    _b("connections.max.idle.ms", L, 600_000, None, "Idle connections are closed after this."),
    _b("fetch.max.bytes", I, 57_671_680, at_least(1024), "Most bytes one fetch returns."),
    _b("replica.fetch.max.bytes", I, 1_048_576, at_least(0),
       "Bytes a follower fetches per partition."),
    _b("replica.lag.time.max.ms", L, 30_000, None,
       "A follower this far behind leaves the ISR."),
    _b("num.network.threads", I, 3, at_least(1),
       "Accepted for compatibility; odradek serves from one event loop.", dynamic=True),
    _b("num.io.threads", I, 8, at_least(1),
       "Accepted for compatibility; odradek serves from one event loop.", dynamic=True),
    _b("num.replica.fetchers", I, 1, None, "Fetcher tasks per source broker.", dynamic=True),
    _b("num.recovery.threads.per.data.dir", I, 1, at_least(1),
       "Threads recovering logs at start.", dynamic=True),
    _b("background.threads", I, 10, at_least(1), "Background task threads.", dynamic=True),
    _b("log.dir.free.space.min.bytes", L, -1, at_least(-1),
       "odradek-specific (Kafka has no such key; Redpanda has a like floor): below this much "
       "free space in a log directory produces are refused with KAFKA_STORAGE_ERROR (clients "
       "retry it) while reads, deletes, retention and compaction go on; they resume once space "
       "is back. -1: the smaller of 256 MiB and 5% of the disk; 0: refuse only when full."),
    _b("log.retention.check.interval.ms", L, 300_000, at_least(1),
       "How often logs are checked for segments to delete."),
    _b("log.flush.offset.checkpoint.interval.ms", I, 60_000, at_least(0),
       "How often the recovery-point checkpoint is written."),
    _b("log.flush.start.offset.checkpoint.interval.ms", I, 60_000, at_least(0),
       "How often the log-start-offset checkpoint is written."),
    _b("log.cleaner.enable", B, True, None, "Run the log cleaner (compaction)."),
    _b("log.cleaner.threads", I, 1, at_least(0), "Log cleaner threads.", dynamic=True),
    _b("log.cleaner.backoff.ms", L, 15_000, at_least(0),
       "How long the cleaner sleeps when no log needs cleaning.", dynamic=True),
    _b("log.cleaner.dedupe.buffer.size", L, 134_217_728, None,
       "Memory of the cleaner's key -> offset map, over all cleaner threads.", dynamic=True),
    _b("log.cleaner.io.buffer.load.factor", D, 0.9, None,
       "How full the cleaner's offset map may get.", dynamic=True),
    _b("log.cleaner.io.buffer.size", I, 524_288, at_least(0),
       "The cleaner's I/O buffer size, over all cleaner threads.", dynamic=True),
    _b("log.cleaner.io.max.bytes.per.second", D, 1.7976931348623157e308, None,
       "Cleaner I/O throttle (not enforced by odradek).", dynamic=True),
    _b("offsets.topic.num.partitions", I, 50, at_least(1),
       "Partitions of __consumer_offsets."),
    _b("offsets.topic.replication.factor", ConfigType.SHORT, 3, at_least(1),
       "Replication factor of __consumer_offsets (capped at the live brokers for one node)."),
    _b("offsets.topic.segment.bytes", I, 104_857_600, at_least(1),
       "segment.bytes of __consumer_offsets."),
    _b("offsets.retention.minutes", I, 10_080, at_least(1),
       "How long committed offsets of empty groups are kept."),
    _b("transaction.state.log.num.partitions", I, 50, at_least(1),
       "Partitions of __transaction_state."),
    _b("transaction.state.log.replication.factor", ConfigType.SHORT, 3, at_least(1),
       "Replication factor of __transaction_state."),
    _b("transaction.state.log.min.isr", I, 2, at_least(1), "min.insync.replicas of it."),
    _b("group.initial.rebalance.delay.ms", I, 3000, None,
       "How long the first rebalance of a new classic group waits for more members."),
    _b("group.min.session.timeout.ms", I, 6000, None, "Smallest session timeout allowed."),
    _b("group.max.session.timeout.ms", I, 1_800_000, None, "Largest session timeout allowed."),
    _b("odradek.event.loop", S, "auto", one_of("auto", "asyncio", "uvloop"),
       "odradek: the asyncio event loop implementation the node runs on."),
    _b("log.level", S, "INFO", _log_level,
       "odradek: the level of the node's log (TRACE, DEBUG, INFO, WARN, ERROR, FATAL, OFF). "
       "One package's level: log.level.<package>, e.g. log.level.odradek.storage=DEBUG. "
       "Kafka sets these in log4j.properties instead."),
]


def _log_synonym_dynamic(defn: ConfigDef) -> ConfigDef:
    # Kafka lets the first broker synonym of each topic config change at runtime.
    primaries = {d.synonyms[0].name for d in _TOPIC_DEFS if d.synonyms}
    primaries.discard("log.message.format.version")
    if defn.name in primaries:
        return ConfigDef(defn.name, defn.type, defn.default, defn.validator, defn.doc, (), True)
    return defn


BROKER_CONFIGS: dict[str, ConfigDef] = {
    d.name: d for d in [*_NODE_BROKER_DEFS, *map(_log_synonym_dynamic, _LOG_BROKER_DEFS)]
}
DYNAMIC_BROKER_CONFIGS = frozenset(n for n, d in BROKER_CONFIGS.items() if d.dynamic)

# Which broker configs stand together (Kafka's brokerConfigSynonyms), for describing a broker.
_BROKER_SYNONYM_GROUPS: dict[str, tuple[str, ...]] = {}
for _group in (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
):
    for _name in _group:
        _BROKER_SYNONYM_GROUPS[_name] = _group
_BROKER_SYNONYM_GROUPS["log.flush.interval.ms"] = (
    "log.flush.interval.ms",
    "log.flush.scheduler.interval.ms",
)

for _d in _TOPIC_DEFS:
    for _s in _d.synonyms:
        assert _s.name in BROKER_CONFIGS, _s.name


# --- validation --------------------------------------------------------------------------------


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, Any]:
    """Parse and check topic configs; the first bad one raises INVALID_CONFIG naming its key."""
    parsed: dict[str, Any] = {}
    for name, raw in configs.items():
        defn = TOPIC_CONFIGS.get(name)
        if defn is None:
            raise ConfigError(f"Unknown topic config name: {name}")
        if raw is None:
            raise ConfigError(f"Null value not supported for topic configs: {name}")
        value = parse_value(name, defn.type, raw)
        if defn.validator is not None:
            defn.validator(name, value)
        parsed[name] = value
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


def validate_broker_configs(configs: Mapping[str, str]) -> dict[str, Any]:
    """Parse and check broker configs; unknown keys are kept unparsed (Kafka warns and ignores)."""
    parsed: dict[str, Any] = {}
    for name, raw in configs.items():
        defn = BROKER_CONFIGS.get(name)
        if defn is None and name.startswith(LOG_LEVEL_PREFIX):
            defn = BROKER_CONFIGS["log.level"]  # a per-package level: same type and values
        if defn is None:
            parsed[name] = raw
            continue
        value = parse_value(name, defn.type, raw)
        if defn.validator is not None:
            defn.validator(name, value)
        parsed[name] = value
    return parsed


def validate_broker_dynamic_configs(configs: Mapping[str, str | None]) -> None:
    """Check a dynamic broker config change: known, dynamic and valid (None deletes)."""
    for name, raw in configs.items():
        defn = BROKER_CONFIGS.get(name)
        if defn is None:
            raise ConfigError(f"Unknown broker config name: {name}")
        if not defn.dynamic:
            raise KafkaError(
                ErrorCode.invalid_request, f"Cannot update these configs dynamically: {{{name}}}"
            )
        if raw is None:
            continue
        value = parse_value(name, defn.type, raw)
        if defn.validator is not None:
            defn.validator(name, value)


# --- broker config -----------------------------------------------------------------------------


class BrokerConfig:
    """A node's broker config: static properties plus dynamic overrides from the metadata log.

    `values` holds the explicitly set static keys as strings; `dynamic` (this broker) and
    `dynamic_default` (cluster-wide) come from ConfigRecords of resource type BROKER.
    """

    def __init__(
        self,
        values: Mapping[str, str] | None = None,
        dynamic: Mapping[str, str] | None = None,
        dynamic_default: Mapping[str, str] | None = None,
    ) -> None:
        self.values: dict[str, str] = dict(values or {})
        self.dynamic: dict[str, str] = dict(dynamic or {})
        self.dynamic_default: dict[str, str] = dict(dynamic_default or {})
        self._parsed = validate_broker_configs(
            {**self.values, **self.dynamic_default, **self.dynamic}
        )

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> BrokerConfig:
        """Validate static properties (raises INVALID_CONFIG naming the key); unknown keys warn."""
        for name in props:
            if (name not in BROKER_CONFIGS and name not in TOPIC_CONFIGS
                    and not name.startswith(LOG_LEVEL_PREFIX)):
                log.warning("The configuration '%s' was supplied but isn't a known config.", name)
        config = cls(props)
        node_id, broker_id = props.get("node.id"), props.get("broker.id")
        if (
            node_id is not None
            and broker_id is not None
            and config.get("node.id") != parse_value("broker.id", ConfigType.INT, broker_id)
        ):
            raise ConfigError(
                f"broker.id ({broker_id.strip()}) must match node.id ({node_id.strip()})"
            )
        return config

    def with_dynamic(
        self, dynamic: Mapping[str, str], dynamic_default: Mapping[str, str]
    ) -> BrokerConfig:
        return BrokerConfig(self.values, dynamic, dynamic_default)

    # -- lookups

    def is_set(self, name: str) -> bool:
        return name in self.dynamic or name in self.dynamic_default or name in self.values

    def get(self, name: str) -> Any:
        """The typed effective value: dynamic > dynamic default > static > Kafka's default."""
        if name in self._parsed:
            return self._parsed[name]
        defn = BROKER_CONFIGS.get(name)
        return None if defn is None else defn.default

    def source_of(self, name: str) -> ConfigSource | None:
        if name in self.dynamic:
            return ConfigSource.DYNAMIC_BROKER_CONFIG
        if name in self.dynamic_default:
            return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        if name in self.values:
            return ConfigSource.STATIC_BROKER_CONFIG
        defn = BROKER_CONFIGS.get(name)
        if defn is not None and defn.default is not None:
            return ConfigSource.DEFAULT_CONFIG
        return None

    def get_int(self, name: str) -> int:
        value = self.get(name)
        if value is None:
            raise KeyError(name)
        return int(value)

    def get_bool(self, name: str) -> bool:
        value = self.get(name)
        if isinstance(value, str):
            return value.strip().lower() == "true"
        return bool(value)

    def get_str(self, name: str) -> str | None:
        value = self.get(name)
        if value is None or isinstance(value, str):
            return value
        return to_config_string(value)

    def get_list(self, name: str) -> list[str]:
        value = self.get(name)
        if value is None:
            return []
        if isinstance(value, str):
            return [v.strip() for v in value.split(",") if v.strip()]
        return list(value)

    def get_float(self, name: str) -> float:
        return float(self.get(name))

    # -- the node's identity and addresses

    @property
    def node_id(self) -> int:
        if "node.id" not in self._parsed and "broker.id" in self._parsed:
            return int(self._parsed["broker.id"])
        return self.get_int("node.id")

    @property
    def listeners(self) -> list[str]:
        return self.get_list("listeners")

    @property
    def advertised_listeners(self) -> list[str]:
        return self.get_list("advertised.listeners") or self.listeners

    @property
    def log_dirs(self) -> list[str]:
        return self.get_list("log.dirs") or self.get_list("log.dir")

    def topic_default(self, name: str) -> tuple[Any, str | None, ConfigSource]:
        """A topic config's broker-level value: (value, synonym it came from, source)."""
        defn = TOPIC_CONFIGS[name]
        for syn in defn.synonyms:
            source = self.source_of(syn.name)
            if source is not None and source is not ConfigSource.DEFAULT_CONFIG:
                return _scaled(self.get(syn.name), syn.multiplier), syn.name, source
        for syn in defn.synonyms:
            syn_def = BROKER_CONFIGS[syn.name]
            if syn_def.default is not None:
                return _scaled(syn_def.default, syn.multiplier), syn.name, ConfigSource.DEFAULT_CONFIG
        return defn.default, None, ConfigSource.DEFAULT_CONFIG

    def __repr__(self) -> str:
        return f"BrokerConfig(values={self.values!r}, dynamic={self.dynamic!r})"


def _scaled(value: Any, multiplier: int) -> Any:
    if multiplier == 1 or value is None:
        return value
    return min(int(value) * multiplier, LONG_MAX)


# --- effective topic configs, DescribeConfigs, LogConfig -----------------------------------------


def effective_topic_configs(
    topic_overrides: Mapping[str, str], broker_config: BrokerConfig
) -> dict[str, Any]:
    """Every topic config's typed effective value: override > broker synonyms > default."""
    result: dict[str, Any] = {}
    for name, defn in TOPIC_CONFIGS.items():
        if name in topic_overrides:
            result[name] = parse_value(name, defn.type, topic_overrides[name])
        else:
            result[name] = broker_config.topic_default(name)[0]
    return result


def _broker_synonyms(broker_config: BrokerConfig, names: Iterable[str]) -> list[ConfigSynonym]:
    # Per synonym name, every source that sets it, most specific first (Kafka's configSynonyms).
    out: list[ConfigSynonym] = []
    for name in names:
        defn = BROKER_CONFIGS.get(name)
        sensitive = defn is not None and defn.sensitive
        for source, mapping in (
            (ConfigSource.DYNAMIC_BROKER_CONFIG, broker_config.dynamic),
            (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, broker_config.dynamic_default),
            (ConfigSource.STATIC_BROKER_CONFIG, broker_config.values),
        ):
            if name in mapping:
                out.append(ConfigSynonym(name, None if sensitive else mapping[name], source))
        if defn is not None and defn.default is not None:
            value = None if sensitive else to_config_string(defn.default)
            out.append(ConfigSynonym(name, value, ConfigSource.DEFAULT_CONFIG))
    return out


def describe_topic_configs(
    topic_overrides: Mapping[str, str],
    broker_config: BrokerConfig,
    include_synonyms: bool = False,
    include_documentation: bool = False,
    names: Iterable[str] | None = None,
) -> list[ConfigEntry]:
    """DescribeConfigs entries of a topic, in name order (or for `names`, unknown ones skipped)."""
    wanted = sorted(TOPIC_CONFIGS) if names is None else [n for n in names if n in TOPIC_CONFIGS]
    entries = []
    for name in wanted:
        defn = TOPIC_CONFIGS[name]
        synonyms = _broker_synonyms(broker_config, (s.name for s in defn.synonyms))
        if name in topic_overrides:
            value = to_config_string(parse_value(name, defn.type, topic_overrides[name]))
            synonyms.insert(0, ConfigSynonym(name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        else:
            value = to_config_string(broker_config.topic_default(name)[0])
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        entries.append(
            ConfigEntry(
                name=name,
                value=None if defn.sensitive else value,
                read_only=False,
                source=source,
                sensitive=defn.sensitive,
                synonyms=synonyms if include_synonyms else [],
                type=defn.type,
                documentation=defn.doc if include_documentation else None,
            )
        )
    return entries


def describe_broker_configs(
    broker_config: BrokerConfig,
    include_synonyms: bool = False,
    include_documentation: bool = False,
    names: Iterable[str] | None = None,
) -> list[ConfigEntry]:
    """DescribeConfigs entries of this broker: every known config plus unknown keys that were set."""
    if names is None:
        wanted = sorted(
            set(BROKER_CONFIGS)
            | set(broker_config.values)
            | set(broker_config.dynamic)
            | set(broker_config.dynamic_default)
        )
    else:
        wanted = list(names)
    entries = []
    for name in wanted:
        defn = BROKER_CONFIGS.get(name)
        if defn is None and not broker_config.is_set(name):
            continue
        group = _BROKER_SYNONYM_GROUPS.get(name, (name,))
        # a synonym group lists the key itself first, then its lower-priority twins
        group = (name, *[g for g in group if g != name and group.index(g) > group.index(name)])
        synonyms = _broker_synonyms(broker_config, group)
        sensitive = defn is not None and defn.sensitive
        value = broker_config.get_str(name) if defn is not None else broker_config.get(name)
        entries.append(
            ConfigEntry(
                name=name,
                value=None if sensitive else value,
                read_only=name not in DYNAMIC_BROKER_CONFIGS,
                source=synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
                sensitive=sensitive,
                synonyms=synonyms if include_synonyms else [],
                type=defn.type if defn is not None else ConfigType.UNKNOWN,
                documentation=(defn.doc if defn is not None else None)
                if include_documentation
                else None,
            )
        )
    return entries


def log_config(topic_overrides: Mapping[str, str], broker_config: BrokerConfig) -> LogConfig:
    """The storage LogConfig of a topic: its overrides over the broker's defaults."""
    from odradek.storage.config import LogConfig

    effective = effective_topic_configs(topic_overrides, broker_config)
    as_strings = {name: to_config_string(value) for name, value in effective.items()}
    return LogConfig.from_topic_configs({k: v for k, v in as_strings.items() if v is not None})


# --- server.properties ------------------------------------------------------------------------

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_WS = " \t\f"


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java properties syntax (what Kafka's server.properties uses) into a dict."""
    result: dict[str, str] = {}
    for logical in _logical_lines(text):
        key, value = _split_key_value(logical)
        result[_unescape(key)] = _unescape(value)
    return result


def _logical_lines(text: str) -> Iterable[str]:
    natural = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    i = 0
    while i < len(natural):
        line = natural[i].lstrip(_WS)
        i += 1
        if not line or line[0] in "#!":
            continue  # a comment line never continues, even when it ends in a backslash
        parts = []
        while _ends_with_continuation(line):
            parts.append(line[:-1])
            if i >= len(natural):
                line = ""
                break
            line = natural[i].lstrip(_WS)
            i += 1
        parts.append(line)
        yield "".join(parts)


def _ends_with_continuation(line: str) -> bool:
    count = len(line) - len(line.rstrip("\\"))
    return count % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=:" or ch in _WS:
            break
        i += 1
    key = line[:i]
    rest = line[i:]
    rest = rest.lstrip(_WS)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_WS)
    return key, rest


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        if i + 1 >= len(text):
            i += 1  # a lone trailing backslash (end of input) is dropped, as Java does
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise ValueError(f"Malformed \\uxxxx encoding in properties: {text!r}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)
