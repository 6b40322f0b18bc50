"""The group coordinator's vocabulary: its config, the requests and answers its protocols
take and give, and its clocks. No state and no I/O."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from odradek.coordinator.group.classic import ClassicGroup
from odradek.coordinator.group.consumer import ConsumerGroup
from odradek.coordinator.group.lag import LagStatus
from odradek.protocol.errors import ErrorCode

E = ErrorCode
# the backstop sweep of every group (sessions expire at their deadlines, deadlines.py)
SWEEP_INTERVAL_S = 1.0
# a new member that never completes its first join is dropped after this (Kafka's value)
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000


def now_ms() -> int:
    return int(time.time() * 1000)


def mono_ms() -> float:
    return time.monotonic() * 1000


@dataclass(slots=True)
class GroupConfig:
    num_partitions: int = 50
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    offsets_retention_ms: int = 10_080 * 60_000
    offsets_retention_check_interval_ms: int = 600_000
    consumer_session_timeout_ms: int = 45_000
    consumer_heartbeat_interval_ms: int = 5_000
    consumer_assignors: list[str] = field(default_factory=lambda: ["uniform", "range"])
    # group.consumer.migration.policy (KIP-848's online upgrade and downgrade)
    migration_policy: str = "bidirectional"
    # group.max.size (classic groups) and group.consumer.max.size (KIP-848 groups)
    classic_max_size: int = 2**31 - 1
    consumer_max_size: int = 2**31 - 1

    @classmethod
    def from_broker_config(cls, config: Any) -> GroupConfig:
        def get(name: str, default: int) -> int:
            try:
                value = config.get(name)
            except Exception:
                value = None
            if value is None:
                value = config.values.get(name, default) if hasattr(config, "values") else default
            return int(value)

        assignors = default = ["uniform", "range"]
        raw = getattr(config, "values", {}).get("group.consumer.assignors")
        if raw:
            assignors = [a.strip().rsplit(".", 1)[-1].replace("Assignor", "").lower()
                         for a in raw.split(",") if a.strip()] or default
        return cls(
            num_partitions=get("offsets.topic.num.partitions", 50),
            initial_rebalance_delay_ms=get("group.initial.rebalance.delay.ms", 3000),
            min_session_timeout_ms=get("group.min.session.timeout.ms", 6000),
            max_session_timeout_ms=get("group.max.session.timeout.ms", 1_800_000),
            offsets_retention_ms=get("offsets.retention.minutes", 10_080) * 60_000,
            offsets_retention_check_interval_ms=get("offsets.retention.check.interval.ms",
                                                    600_000),
            consumer_session_timeout_ms=get("group.consumer.session.timeout.ms", 45_000),
            consumer_heartbeat_interval_ms=get("group.consumer.heartbeat.interval.ms", 5_000),
            consumer_assignors=assignors,
            classic_max_size=get("group.max.size", 2**31 - 1),
            consumer_max_size=get("group.consumer.max.size", 2**31 - 1),
            migration_policy=str(getattr(config, "values", {}).get(
                "group.consumer.migration.policy") or "bidirectional"),
        )


@dataclass(slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool


@dataclass(slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass(slots=True)
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(slots=True)
class OffsetCommitEntry:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


@dataclass(slots=True)
class HeartbeatResult:
    """ConsumerGroupHeartbeat's answer; assignment is topic name -> partitions."""
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: dict[str, list[int]] | None = None


@dataclass(slots=True)
class PartitionLagInfo:
    topic: str
    partition: int
    committed: int  # -1: none
    log_end_offset: int
    lag: int
    lag_ms: int
    status: LagStatus
    member_id: str | None = None


Group = ClassicGroup | ConsumerGroup

# TopicInfo lookup: name -> (topic id, partition count) or None
TopicLookup = Callable[[str], tuple[uuid.UUID, int] | None]

CONSUMER_STATE_NAMES = {"empty": "Empty", "assigning": "Assigning",
                        "reconciling": "Reconciling", "stable": "Stable", "dead": "Dead"}
