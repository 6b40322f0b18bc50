"""Per-log configuration: the topic configs the storage layer acts on, with Kafka's defaults.

A `LogConfig` holds typed values (ints, bools, a float, strings); each field is a Kafka topic
config's name with underscores for dots (`segment.bytes` -> `segment_bytes`). Storage parses
no config strings: the config table in `odradek.metadata.config` parses and validates them and
builds a `LogConfig` from the typed values (`odradek.metadata.config.log_config.log_config`).
"""

from __future__ import annotations

from dataclasses import dataclass

# Kafka encodes "never" for flush.messages / flush.ms as Long.MAX_VALUE.
LONG_MAX = 9223372036854775807


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
    cleanup_policy: str = "delete"  # comma-separated: "delete", "compact" or both
    file_delete_delay_ms: int = 60000
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    compression_type: str = "producer"
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    preallocate: bool = False
