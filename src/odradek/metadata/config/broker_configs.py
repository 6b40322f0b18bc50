"""The broker config table and a node's broker config.

`BROKER_CONFIGS` holds Kafka's broker configs that odradek knows: the node's own (identity,
listeners, sockets, cleaner, internal topics, groups) and the broker-level twins of the topic
configs (`log.retention.ms`, ...), plus odradek's own keys (`odradek.event.loop`, `log.level`,
`log.level.<package>`, `log.dir.free.space.min.bytes`). `BrokerConfig` layers a node's values:
Kafka's default < static (server.properties, --set) < dynamic cluster default < dynamic for
this broker, and hands out typed values.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from odradek.metadata.config.config_def import (
    LONG_MAX,
    ConfigDef,
    ConfigError,
    ConfigSource,
    ConfigType,
    Validator,
    at_least,
    between,
    check_value,
    compression_level,
    list_of,
    one_of,
    parse_value,
    to_config_string,
)
from odradek.metadata.config.group_configs import GROUP_COORDINATOR_BROKER_DEFS
from odradek.metadata.config.kafka_dynamic_configs import PER_BROKER_CONFIGS, UNUSED_DYNAMIC_DEFS
from odradek.metadata.config.security_authz_configs import AUTHZ_CONFIG_DEFS
from odradek.metadata.config.security_configs import SECURITY_DEFS
from odradek.metadata.config.topic_configs import COMPRESSION_TYPES, TOPIC_CONFIGS
from odradek.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "BROKER_CONFIGS",
    "BROKER_SYNONYM_GROUPS",
    "DYNAMIC_BROKER_CONFIGS",
    "LOG_LEVELS",
    "LOG_LEVEL_PREFIX",
    "BrokerConfig",
    "validate_broker_configs",
    "validate_broker_dynamic_configs",
]

log = logging.getLogger(__name__)

B, S, I, L, D, LST = (  # noqa: E741
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
)

# log4j's level names, as Kafka's broker loggers take them (case-insensitive here)
LOG_LEVELS = ("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF")
# odradek-only: `log.level.<logger>` sets one package's level, e.g. log.level.odradek.storage
LOG_LEVEL_PREFIX = "log.level."
# Client settings of the services `odradek serve` runs beside the node (cli/service_clients.py):
# Kafka client names after the prefix, known only there.
SERVICE_CLIENT_PREFIXES = ("schema.registry.kafkastore.", "console.kafka.")


def _log_level(name: str, value: Any) -> None:
    if value is not None and value.strip().upper() not in LOG_LEVELS:
        raise ConfigError(
            f"Invalid value {value} for configuration {name}: "
            f"String must be one of: {', '.join(LOG_LEVELS)}"
        )


def _non_empty_list(name: str, value: Any) -> None:
    if value is not None and any(not v for v in value):
        raise ConfigError(f"Invalid value {','.join(value)} for configuration {name}: empty item")


def _host_counts(name: str, value: Any) -> None:
    """max.connections.per.ip.overrides: "host:count,host:count"."""
    for item in (value or "").split(","):
        host, sep, count = item.strip().rpartition(":")
        if item.strip() and not (sep and host and count.strip().isdigit()):
            raise ConfigError(f"Invalid value {value} for configuration {name}: "
                              f"{item.strip()!r} is not host:count")

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
    _b("compression.type", S, "producer", one_of(*COMPRESSION_TYPES),
       "Default compression.type of topics."),
    _b("compression.gzip.level", I, -1, compression_level(1, 9, -1),
       "Default compression.gzip.level."),
    _b("compression.lz4.level", I, 9, compression_level(1, 17),
       "Default compression.lz4.level."),
    _b("compression.zstd.level", I, 3, compression_level(-131072, 22),
       "Default compression.zstd.level."),
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

# Kafka 4's replica fetcher and leader-balance settings (ReplicationConfigs).
_REPLICATION_DEFS = [
    _b("replica.fetch.min.bytes", I, 1, None,
       "Least bytes a follower fetch waits for before it is answered."),
    _b("replica.fetch.wait.max.ms", I, 500, None,
       "Longest a follower fetch waits on the leader; below replica.lag.time.max.ms."),
    _b("replica.fetch.response.max.bytes", I, 10_485_760, at_least(0),
       "Bytes a whole follower fetch response may hold."),
    _b("replica.fetch.backoff.ms", I, 1000, at_least(0),
       "Pause of a replica fetcher after a fetch error."),
    _b("replica.socket.timeout.ms", I, 30_000, None,
       "Timeout of a follower's requests to the leader; at least replica.fetch.wait.max.ms."),
    _b("replica.socket.receive.buffer.bytes", I, 65_536, None,
       "SO_RCVBUF of follower connections."),
    _b("replica.high.watermark.checkpoint.interval.ms", L, 5000, at_least(1),
       "How often high watermarks are checkpointed."),
    _b("replica.selector.class", S, None, None,
       "ReplicaSelector for fetches from followers (KIP-392), e.g. "
       "org.apache.kafka.common.replica.RackAwareReplicaSelector."),
    _b("auto.leader.rebalance.enable", B, True, None,
       "Move leadership back to preferred replicas in the background."),
    _b("leader.imbalance.check.interval.seconds", L, 300, at_least(1),
       "How often the controller checks the leader balance."),
    _b("leader.imbalance.per.broker.percentage", I, 10, None,
       "Imbalance per broker that triggers a preferred election."),
]

# KRaft: the quorum, the controller, broker registration (KRaftConfigs, QuorumConfig).
_KRAFT_DEFS = [
    _b("controller.quorum.bootstrap.servers", LST, [], None,
       "host:port of controllers to discover the quorum from (KIP-853)."),
    _b("controller.quorum.election.timeout.ms", I, 1000, None,
       "Longest time without a leader before a voter starts an election."),
    _b("controller.quorum.fetch.timeout.ms", I, 2000, None,
       "Longest time without a fetch from the leader before a follower starts an election."),
    _b("controller.quorum.election.backoff.max.ms", I, 1000, None,
       "Longest back-off before a new election."),
    _b("controller.quorum.append.linger.ms", I, 25, None,
       "How long the leader gathers appends before writing them."),
    _b("controller.quorum.request.timeout.ms", I, 2000, None,
       "Timeout of the quorum's requests."),
    _b("controller.quorum.retry.backoff.ms", I, 20, None,
       "Back-off before a failed quorum request is retried."),
    _b("broker.heartbeat.interval.ms", I, 2000, None,
       "Time between a broker's heartbeats to the active controller."),
    _b("broker.session.timeout.ms", I, 9000, None,
       "A broker without a heartbeat for this long is fenced."),
    _b("initial.broker.registration.timeout.ms", I, 60_000, None,
       "How long a starting broker tries to register before it gives up."),
    _b("metadata.log.max.record.bytes.between.snapshots", L, 20_971_520, at_least(1),
       "Bytes of metadata records appended after which a new snapshot is written."),
    _b("metadata.log.max.snapshot.interval.ms", L, 3_600_000, at_least(0),
       "Longest time before a new snapshot when records were appended; 0 disables it."),
    _b("metadata.log.segment.bytes", I, 1_073_741_824, at_least(8_388_608),
       "Segment size of the metadata log."),
    _b("metadata.max.retention.bytes", L, 104_857_600, None,
       "Metadata log bytes kept (older segments go once a snapshot covers them)."),
    _b("metadata.max.retention.ms", L, 604_800_000, None,
       "How long metadata log segments are kept once a snapshot covers them."),
    _b("metadata.max.idle.interval.ms", I, 500, at_least(0),
       "How often the active controller writes a NoOpRecord when idle."),
]

_NODE_BROKER_DEFS = [
    _b("node.id", I, 1, None,
       "The id of this node (odradek defaults it to 1 so that a single node needs no config)."),
    _b("broker.id", I, -1, None, "Older name of node.id; when set it must agree with node.id."),
    _b("process.roles", LST, ["broker", "controller"], list_of("broker", "controller"),
       "The roles this node plays: broker, controller or both (odradek defaults to both, a "
       "single node that is its own quorum)."),
    _b("listeners", LST, ["PLAINTEXT://localhost:9092"], _non_empty_list,
       "Comma-separated URIs (NAME://host:port) the node listens on."),
    _b("schema.registry.listeners", LST, ["http://127.0.0.1:8081"], None,
       "Where `odradek serve` runs the Schema Registry beside the node (Confluent's REST API, "
       "schemas kept in _schemas): comma-separated http://host:port; empty disables it. "
       "Served on nodes with the broker role."),
    _b("console.listeners", LST, ["http://127.0.0.1:8080"], None,
       "odradek: where `odradek serve` runs the web console beside the node (overview, topics, "
       "messages, consumer groups and their lag, schemas): comma-separated http://host:port; "
       "empty disables it. Served on nodes with the broker role."),
    _b("connect.listeners", LST, [], None,
       "odradek: where `odradek serve` runs a Kafka Connect worker beside the node (Connect's "
       "REST API, connectors as Spark queries): comma-separated http://host:port; empty (the "
       "default) runs none. Served on nodes with the broker role."),
    _b("connect.config.file", S, "", None,
       "odradek: the worker properties (connect-distributed.properties: group.id, "
       "*.storage.topic, converters) of the worker connect.listeners runs."),
    _b("connect.spark.master", S, "local[2]", None,
       "odradek: the Spark master the connect.listeners worker runs its connectors on."),
    _b("confluent.schema.registry.url", LST, [], None,
       "The Schema Registry that broker-side schema validation (confluent.value.schema."
       "validation on a topic) asks, comma-separated URLs tried in turn; empty: the node's "
       "own registry (the first of schema.registry.listeners)."),
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
    _b("log.dirs", S, None, None,
       "Directories of the logs (JBOD), comma-separated. The data directory (--data-dir, "
       "which holds the metadata log) is always the first; new partitions go to the "
       "directory with the fewest; a failed directory takes only its own partitions "
       "offline."),
    _b("metadata.log.dir", S, None, None, "Directory of the metadata log; defaults to log.dirs."),
    _b("num.partitions", I, 1, at_least(1), "Default partition count of new topics."),
    _b("default.replication.factor", I, 1, None, "Default replication factor of new topics."),
    _b("auto.create.topics.enable", B, True, None,
       "Create a topic when a client asks for its metadata and it does not exist."),
    _b("delete.topic.enable", B, True, None, "Whether topics may be deleted."),
    _b("socket.request.max.bytes", I, 104_857_600, at_least(1),
       "The largest request the node reads."),
    _b("socket.send.buffer.bytes", I, 102_400, None, "SO_SNDBUF of sockets; -1 for the OS."),
    _b("socket.receive.buffer.bytes", I, 102_400, None, "SO_RCVBUF of sockets; -1 for the OS."),
    _b("queued.max.requests", I, 500, at_least(1), "In-flight requests before reading pauses."),
    _b("connections.max.idle.ms", L, 600_000, None, "Idle connections are closed after this."),
    _b("max.connections", I, 2_147_483_647, at_least(0),
       "Most connections the node holds at once; a new connection past it is closed. "
       "Counted in the node's file-descriptor budget."),
    _b("log.open.files.max", I, 256, at_least(1),
       "Odradek-specific: the most files of inactive segments and indexes kept open at once "
       "(a pool, least recently used closed first); Kafka keeps every segment file open."),
    _b("max.connections.per.ip", I, 2_147_483_647, at_least(0),
       "Most connections from one address; a new connection past it is closed."),
    _b("max.connections.per.ip.overrides", S, "", _host_counts,
       "Per-address (or hostname) limits overriding max.connections.per.ip, e.g. "
       "\"hostName:100,127.0.0.1:200\"."),
    _b("fetch.max.bytes", I, 57_671_680, at_least(1024), "Most bytes one fetch returns."),
    _b("replica.fetch.max.bytes", I, 1_048_576, at_least(0),
       "Bytes a follower fetches per partition."),
    _b("replica.lag.time.max.ms", L, 30_000, None,
       "A follower this far behind leaves the ISR."),
    _b("replica.alter.log.dirs.io.max.bytes.per.second", L, LONG_MAX, at_least(0),
       "The most bytes a second copied by replicas moving between this node's log "
       "directories (AlterReplicaLogDirs), all moves together; 0 holds them.", dynamic=True),
    *_REPLICATION_DEFS,
    *_KRAFT_DEFS,
    *AUTHZ_CONFIG_DEFS,
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
    _b("log.format", S, "text", one_of("text", "json"),
       "odradek: the node's log lines: text (one human-readable line per event) or json (one "
       "JSON object per line, for log shippers)."),
    _b("request.slow.log.ms", L, 10_000, at_least(-1),
       "odradek: a request whose total time (received to answered, long-poll waits included) "
       "is longer than this is logged with its client id, API, version and time; -1: never. "
       "Kafka logs every request at DEBUG in kafka.request.logger instead."),
    _b("admin.listeners", S, "http://127.0.0.1:9644", None,
       "odradek: the admin HTTP listener (/metrics, /health/live, /health/ready, /v1/cluster, "
       "/v1/partitions), http://host:port; empty: no admin HTTP and no metrics recorded."),
]


def _log_synonym_dynamic(defn: ConfigDef) -> ConfigDef:
    # Kafka lets the first broker synonym of each topic config change at runtime.
    primaries = {d.synonyms[0].name for d in TOPIC_CONFIGS.values() if d.synonyms}
    primaries.discard("log.message.format.version")
    if defn.name in primaries:
        return ConfigDef(defn.name, defn.type, defn.default, defn.validator, defn.doc, (), True)
    return defn


BROKER_CONFIGS: dict[str, ConfigDef] = {
    d.name: d for d in [*_NODE_BROKER_DEFS, *GROUP_COORDINATOR_BROKER_DEFS, *UNUSED_DYNAMIC_DEFS,
                        *SECURITY_DEFS,
                        *map(_log_synonym_dynamic, _LOG_BROKER_DEFS)]
}
DYNAMIC_BROKER_CONFIGS = frozenset(n for n, d in BROKER_CONFIGS.items() if d.dynamic)

# Which broker configs stand together (Kafka's brokerConfigSynonyms), for describing a broker.
BROKER_SYNONYM_GROUPS: dict[str, tuple[str, ...]] = {}
for _group in (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
):
    for _name in _group:
        BROKER_SYNONYM_GROUPS[_name] = _group
BROKER_SYNONYM_GROUPS["log.flush.interval.ms"] = (
    "log.flush.interval.ms",
    "log.flush.scheduler.interval.ms",
)

for _d in TOPIC_CONFIGS.values():
    for _s in _d.synonyms:
        assert _s.name in BROKER_CONFIGS, _s.name


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
        parsed[name] = check_value(defn, name, raw)
    return parsed


def validate_broker_dynamic_configs(configs: Mapping[str, str | None],
                                    cluster_default: bool = False) -> None:
    """Check a dynamic broker config change: known, dynamic and valid (None deletes); at the
    cluster-wide default (`cluster_default`), none of Kafka's per-broker configs."""
    if cluster_default:
        per_broker = sorted(n for n in configs if n in PER_BROKER_CONFIGS)
        if per_broker:
            raise ConfigError("Cannot update these configs at default cluster level, broker id "
                              f"must be specified: {', '.join(per_broker)}")
    for name, raw in configs.items():
        defn = BROKER_CONFIGS.get(name)
        if defn is None:
            raise ConfigError(f"Unknown broker config name: {name}")
        if not defn.dynamic:
            raise KafkaError(
                ErrorCode.invalid_request, f"Cannot update these configs dynamically: {{{name}}}"
            )
        if raw is not None:
            check_value(defn, name, raw)


# --- a node's broker config --------------------------------------------------------------------


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
                    and not name.startswith((LOG_LEVEL_PREFIX, *SERVICE_CLIENT_PREFIXES))):
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
        # a repr reaches logs and tracebacks: passwords and JAAS entries stay out, as Kafka
        # prints "[hidden]" for them
        return (f"BrokerConfig(values={_masked(self.values)!r}, "
                f"dynamic={_masked(self.dynamic)!r})")


def _secret(name: str) -> bool:
    defn = BROKER_CONFIGS.get(name)
    if defn is not None and defn.sensitive:
        return True
    low = name.lower()  # listener-prefixed keys (listener.name.<l>.<key>) are not in the table
    return "password" in low or low.endswith("jaas.config") or "secret" in low


def _masked(values: Mapping[str, str]) -> dict[str, str]:
    return {k: "[hidden]" if _secret(k) else v for k, v in values.items()}


def _scaled(value: Any, multiplier: int) -> Any:
    if multiplier == 1 or value is None:
        return value
    return min(int(value) * multiplier, LONG_MAX)
