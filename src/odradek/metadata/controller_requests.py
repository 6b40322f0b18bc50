"""What the controller's operations take and return: one dataclass per request item and result,
as the broker's handlers build them from (and turn them into) Kafka requests and responses."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import IntEnum

from odradek.metadata.config.config_def import ConfigEntry
from odradek.protocol.errors import ErrorCode

__all__ = [
    "ZERO_UUID",
    "AlterConfigsResource",
    "AlterConfigsResult",
    "AlterOp",
    "AlterPartitionItem",
    "AlterPartitionResult",
    "BrokerHeartbeatReply",
    "BrokerHeartbeatRequest",
    "BrokerRegistrationReply",
    "BrokerRegistrationRequest",
    "CreatableTopic",
    "CreatePartitionsResult",
    "CreatePartitionsTopic",
    "CreateTopicResult",
    "DeleteTopicResult",
    "ElectLeadersResult",
    "FeatureUpdate",
    "FeatureUpdateResult",
    "IncrementalAlterConfigsResource",
    "OngoingReassignment",
    "ReassignmentResult",
    "ReassignmentTarget",
]

ZERO_UUID = uuid.UUID(int=0)


class AlterOp(IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass
class CreatableTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: dict[int, list[int]] | None = None  # partition -> replicas
    configs: dict[str, str | None] = field(default_factory=dict)


@dataclass
class CreateTopicResult:
    name: str
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None
    topic_id: uuid.UUID = ZERO_UUID
    num_partitions: int = -1
    replication_factor: int = -1
    configs: list[ConfigEntry] = field(default_factory=list)


@dataclass
class DeleteTopicResult:
    name: str | None
    topic_id: uuid.UUID
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None


@dataclass
class CreatePartitionsTopic:
    name: str
    count: int
    assignments: list[list[int]] | None = None  # replicas of each new partition


@dataclass
class CreatePartitionsResult:
    name: str
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None


@dataclass
class AlterConfigsResource:
    resource_type: int
    resource_name: str
    # pairs as the request lists them, so a key given twice can be refused as Kafka does
    configs: dict[str, str | None] | list[tuple[str, str | None]]


@dataclass
class IncrementalAlterConfigsResource:
    resource_type: int
    resource_name: str
    ops: list[tuple[str, int, str | None]]  # (name, AlterOp, value)


@dataclass
class AlterConfigsResult:
    resource_type: int
    resource_name: str
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None


# --- the cluster: brokers, partitions, reassignments, features (issue 14) ----------------------


@dataclass
class BrokerRegistrationRequest:
    """BrokerRegistration (62): a broker asks to join. `listeners` are (name, host, port,
    security protocol); `features` are (name, min supported, max supported)."""

    broker_id: int
    cluster_id: str | None
    incarnation_id: uuid.UUID
    listeners: list[tuple[str, str, int, int]] = field(default_factory=list)
    features: list[tuple[str, int, int]] = field(default_factory=list)
    rack: str | None = None
    is_migrating_zk_broker: bool = False
    log_dirs: list[uuid.UUID] = field(default_factory=list)
    previous_broker_epoch: int = -1


@dataclass
class BrokerRegistrationReply:
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None
    broker_epoch: int = -1


@dataclass
class BrokerHeartbeatRequest:
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int = -1
    want_fence: bool = False
    want_shut_down: bool = False
    # v1+: the broker's log directories that failed (KIP-858)
    offline_log_dirs: list[uuid.UUID] = field(default_factory=list)


@dataclass
class BrokerHeartbeatReply:
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False


@dataclass
class AlterPartitionItem:
    """One partition of an AlterPartition request: the leader's proposed ISR. `new_isr` holds
    (broker id, broker epoch) pairs; -1 as the epoch means 'not given' (versions before 3)."""

    topic_id: uuid.UUID
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: list[tuple[int, int]]
    leader_recovery_state: int = 0
    topic_name: str | None = None  # AlterPartition v0-1 name topics, not ids


@dataclass
class AlterPartitionResult:
    topic_id: uuid.UUID
    partition: int
    error_code: ErrorCode = ErrorCode.none
    leader_id: int = -1
    leader_epoch: int = -1
    isr: list[int] = field(default_factory=list)
    leader_recovery_state: int = 0
    partition_epoch: int = -1
    topic_name: str | None = None


@dataclass
class ElectLeadersResult:
    topic: str
    partition: int
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None


@dataclass
class ReassignmentTarget:
    """One partition of AlterPartitionReassignments: `replicas` None cancels."""

    topic: str
    partition: int
    replicas: list[int] | None


@dataclass
class ReassignmentResult:
    topic: str
    partition: int
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None


@dataclass
class OngoingReassignment:
    topic: str
    partition: int
    replicas: list[int]
    adding_replicas: list[int]
    removing_replicas: list[int]


@dataclass
class FeatureUpdate:
    """One item of UpdateFeatures: upgrade_type 1 upgrade, 2 safe downgrade, 3 unsafe."""

    feature: str
    max_version_level: int
    upgrade_type: int = 1


@dataclass
class FeatureUpdateResult:
    feature: str
    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None
