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
    "CreatableTopic",
    "CreatePartitionsResult",
    "CreatePartitionsTopic",
    "CreateTopicResult",
    "DeleteTopicResult",
    "IncrementalAlterConfigsResource",
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
