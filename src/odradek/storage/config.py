"""Per-log configuration: Kafka's topic configs, with Kafka's defaults.

Only what the storage layer acts on is interpreted here; the full config table
(validation, synonyms, describe) lives in `odradek.metadata.configs`, which
builds a `LogConfig` with `LogConfig.from_topic_configs`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

# Kafka encodes "never" for flush.messages / flush.ms as Long.MAX_VALUE.
LONG_MAX = 9223372036854775807


def _bool(value: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise ValueError(f"not a boolean: {value!r}")


def _optional_long(value: str) -> int | None:
    n = int(value)
    return None if n >= LONG_MAX else n


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    index_interval_bytes: int = 4096
    segment_index_bytes: int = 10485760
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    # None means "never" (Kafka's Long.MAX_VALUE default): no fsync on append.
    flush_messages: int | None = None
    flush_ms: int | None = None
    retention_ms: int = 604800000
    retention_bytes: int = -1
    cleanup_policy: str = "delete"
    file_delete_delay_ms: int = 60000
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    compression_type: str = "producer"
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    preallocate: bool = False

    @classmethod
    def from_topic_configs(
        cls, configs: dict[str, str], base: LogConfig | None = None
    ) -> LogConfig:
        """Build from Kafka topic config names (`segment.bytes` ...) over `base` (default: Kafka's).

        Unknown keys are ignored (they belong to other layers); a malformed value raises ValueError
        naming the key.
        """
        changes: dict[str, Any] = {}
        for key, raw in configs.items():
            spec = _KEYS.get(key)
            if spec is None or raw is None:
                continue
            field, convert = spec
            try:
                changes[field] = convert(raw)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"invalid value {raw!r} for {key}: {exc}") from None
        start = base if base is not None else cls()
        return dataclasses.replace(start, **changes) if changes else start


def _policy(value: str) -> str:
    return ",".join(p.strip() for p in value.split(",") if p.strip())


_KEYS: dict[str, tuple[str, Any]] = {
    "segment.bytes": ("segment_bytes", int),
    "segment.ms": ("segment_ms", int),
    "segment.jitter.ms": ("segment_jitter_ms", int),
    "index.interval.bytes": ("index_interval_bytes", int),
    "segment.index.bytes": ("segment_index_bytes", int),
    "max.message.bytes": ("max_message_bytes", int),
    "message.timestamp.type": ("message_timestamp_type", str),
    "message.timestamp.before.max.ms": ("message_timestamp_before_max_ms", int),
    "message.timestamp.after.max.ms": ("message_timestamp_after_max_ms", int),
    "flush.messages": ("flush_messages", _optional_long),
    "flush.ms": ("flush_ms", _optional_long),
    "retention.ms": ("retention_ms", int),
    "retention.bytes": ("retention_bytes", int),
    "cleanup.policy": ("cleanup_policy", _policy),
    "file.delete.delay.ms": ("file_delete_delay_ms", int),
    "delete.retention.ms": ("delete_retention_ms", int),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", int),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", int),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", float),
    "compression.type": ("compression_type", str),
    "min.insync.replicas": ("min_insync_replicas", int),
    "unclean.leader.election.enable": ("unclean_leader_election_enable", _bool),
    "preallocate": ("preallocate", _bool),
}

TOPIC_CONFIG_KEYS = frozenset(_KEYS)
