"""The replication settings of a broker, with Kafka's names and defaults, and the types of
the AlterPartition round trip a leader starts through the injected `alter_partition` callable
(the node implements it: an AlterPartition request to the active controller)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from odradek.protocol.errors import ErrorCode

__all__ = ["RACK_AWARE_SELECTOR", "AlterPartitionItem", "AlterPartitionResult",
           "ReplicationConfig"]

RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@dataclass(frozen=True, slots=True)
class ReplicationConfig:
    num_replica_fetchers: int = 1                 # num.replica.fetchers
    replica_fetch_max_bytes: int = 1_048_576      # replica.fetch.max.bytes (per partition)
    replica_fetch_response_max_bytes: int = 10_485_760  # replica.fetch.response.max.bytes
    replica_fetch_wait_max_ms: int = 500          # replica.fetch.wait.max.ms
    replica_fetch_min_bytes: int = 1              # replica.fetch.min.bytes
    replica_fetch_backoff_ms: int = 1_000         # replica.fetch.backoff.ms
    replica_lag_time_max_ms: int = 30_000         # replica.lag.time.max.ms
    replica_socket_timeout_ms: int = 30_000       # replica.socket.timeout.ms
    replica_selector_class: str | None = None     # replica.selector.class (KIP-392)
    broker_rack: str | None = None                # broker.rack

    @classmethod
    def from_config(cls, config: Any) -> ReplicationConfig:
        """From a BrokerConfig (anything with `get(name)`, None for unset) or a plain dict."""
        get = config.get

        def num(name: str, default: int) -> int:
            value = get(name)
            return default if value in (None, "") else int(value)

        def text(name: str) -> str | None:
            value = get(name)
            return None if value in (None, "") else str(value)

        d = cls()
        return cls(
            num_replica_fetchers=max(1, num("num.replica.fetchers", d.num_replica_fetchers)),
            replica_fetch_max_bytes=num("replica.fetch.max.bytes", d.replica_fetch_max_bytes),
            replica_fetch_response_max_bytes=num("replica.fetch.response.max.bytes",
                                                 d.replica_fetch_response_max_bytes),
            replica_fetch_wait_max_ms=num("replica.fetch.wait.max.ms",
                                          d.replica_fetch_wait_max_ms),
            replica_fetch_min_bytes=num("replica.fetch.min.bytes", d.replica_fetch_min_bytes),
            replica_fetch_backoff_ms=num("replica.fetch.backoff.ms", d.replica_fetch_backoff_ms),
            replica_lag_time_max_ms=num("replica.lag.time.max.ms", d.replica_lag_time_max_ms),
            replica_socket_timeout_ms=num("replica.socket.timeout.ms",
                                          d.replica_socket_timeout_ms),
            replica_selector_class=text("replica.selector.class"),
            broker_rack=text("broker.rack"),
        )


@dataclass(frozen=True, slots=True)
class AlterPartitionItem:
    """One partition's proposed ISR (AlterPartition v3: the ISR with each member's broker
    epoch, -1 where the leader has not seen one)."""
    topic: str
    topic_id: uuid.UUID
    partition: int
    leader_id: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]
    broker_epochs: dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AlterPartitionResult:
    """The controller's answer for that partition: on success the partition as it now is."""
    error: ErrorCode
    leader_id: int = -1
    leader_epoch: int = -1
    partition_epoch: int = -1
    isr: tuple[int, ...] = ()
