"""Kafka Connect's error handling (KIP-298) for what happens to a record before the
connector gets it: converting its key and value, and the transforms.

- `errors.tolerance`: `none` (the default) fails the task at the first error; `all` skips
  the record and carries on.
- `errors.deadletterqueue.topic.name` (sink connectors): the skipped record's original key,
  value and headers go to that topic (created when missing, with
  `errors.deadletterqueue.topic.replication.factor`, default 3 as in Kafka) and, with
  `errors.deadletterqueue.context.headers.enable`, Kafka's `__connect.errors.*` headers
  saying where it came from and what failed.
- `errors.log.enable` logs each failure (`errors.log.include.messages` adds the record's
  topic, partition and offset).

The DLQ records are flushed before the batch that met them is acknowledged, so a record is
never counted done before its dead letter is written.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from odradek.connect.cluster import Cluster

log = logging.getLogger(__name__)

PREFIX = "__connect.errors."
HEADER_TOPIC = PREFIX + "topic"
HEADER_PARTITION = PREFIX + "partition"
HEADER_OFFSET = PREFIX + "offset"
HEADER_CONNECTOR = PREFIX + "connector.name"
HEADER_TASK = PREFIX + "task.id"
HEADER_STAGE = PREFIX + "stage"
HEADER_CLASS = PREFIX + "class.name"
HEADER_EXCEPTION = PREFIX + "exception.class.name"
HEADER_MESSAGE = PREFIX + "exception.message"
HEADER_STACKTRACE = PREFIX + "exception.stacktrace"

# Stage names as Kafka's Stage enum spells them.
KEY_CONVERTER, VALUE_CONVERTER, TRANSFORMATION = "KEY_CONVERTER", "VALUE_CONVERTER", \
    "TRANSFORMATION"


class ToleranceExceeded(RuntimeError):
    """errors.tolerance=none met an error: the task fails with this (Kafka's words)."""


@dataclass(frozen=True)
class Original:
    """The consumed record as it came from Kafka (what the DLQ gets back)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def context_headers(original: Original, connector: str, task: int, stage: str,
                    executing: str, error: BaseException) -> list[tuple[str, bytes]]:
    """DeadLetterQueueReporter's headers, every value a UTF-8 string."""
    trace = "".join(traceback.format_exception(error)).strip()
    pairs = [(HEADER_TOPIC, original.topic), (HEADER_PARTITION, str(original.partition)),
             (HEADER_OFFSET, str(original.offset)), (HEADER_CONNECTOR, connector),
             (HEADER_TASK, str(task)), (HEADER_STAGE, stage), (HEADER_CLASS, executing),
             (HEADER_EXCEPTION, exception_class(error)), (HEADER_MESSAGE, str(error)),
             (HEADER_STACKTRACE, trace)]
    return [(k, v.encode()) for k, v in pairs]


def exception_class(error: BaseException) -> str:
    """The Java class a Connect user looks for where one fits (DataException for what
    converters and transforms raise), else the Python one."""
    from odradek.connect.data import DataError
    from odradek.connect.transforms.base import ConfigError

    if isinstance(error, DataError):
        return "org.apache.kafka.connect.errors.DataException"
    if isinstance(error, ConfigError):
        return "org.apache.kafka.common.config.ConfigException"
    return f"{type(error).__module__}.{type(error).__qualname__}"


@dataclass
class ErrorPolicy:
    tolerance: str = "none"
    dlq_topic: str = ""
    dlq_replication: int = 3
    context_headers: bool = False
    log_errors: bool = False
    log_messages: bool = False

    @classmethod
    def of(cls, config: Mapping[str, str]) -> ErrorPolicy:
        return cls(tolerance=config.get("errors.tolerance", "none").strip().lower(),
                   dlq_topic=config.get("errors.deadletterqueue.topic.name", "").strip(),
                   dlq_replication=int(config.get(
                       "errors.deadletterqueue.topic.replication.factor", "3")),
                   context_headers=_true(config, "errors.deadletterqueue.context.headers.enable"),
                   log_errors=_true(config, "errors.log.enable"),
                   log_messages=_true(config, "errors.log.include.messages"))


def _true(config: Mapping[str, str], key: str) -> bool:
    return config.get(key, "false").strip().lower() == "true"


@dataclass
class ErrorReporter:
    """One connector's: `failed` for each bad record, `flush` before the batch is done."""

    policy: ErrorPolicy
    connector: str
    cluster: Cluster | None = None
    task: int = 0
    _producer: Any = None
    _delivered: list[Any] = field(default_factory=list)
    _topic_ready: bool = False
    count: int = 0

    def failed(self, original: Original, stage: str, executing: str,
               error: BaseException) -> None:
        """Skip the record (tolerance all) or raise ToleranceExceeded (none)."""
        if self.policy.log_errors:
            where = (f" in {original.topic}-{original.partition} at offset {original.offset}"
                     if self.policy.log_messages else "")
            log.error("connector %s: error in stage %s (%s)%s: %s", self.connector, stage,
                      executing, where, error)
        if self.policy.tolerance != "all":
            raise ToleranceExceeded("Tolerance exceeded in error handler") from error
        self.count += 1
        if self.policy.dlq_topic and self.cluster is not None:
            self._dead_letter(original, stage, executing, error)

    def _dead_letter(self, original: Original, stage: str, executing: str,
                     error: BaseException) -> None:
        if not self._topic_ready:
            self._ensure_topic()
        if self._producer is None:
            assert self.cluster is not None
            self._producer = self.cluster.producer({"acks": "all", "linger.ms": 5})
        headers = list(original.headers)
        if self.policy.context_headers:
            headers += context_headers(original, self.connector, self.task, stage, executing,
                                       error)

        def done(err: Any, msg: Any) -> None:
            self._delivered.append(err)

        self._producer.produce(self.policy.dlq_topic, key=original.key, value=original.value,
                               headers=headers or None, on_delivery=done)

    def _ensure_topic(self) -> None:
        from confluent_kafka.admin import NewTopic

        assert self.cluster is not None
        admin = self.cluster.admin()
        topic = self.policy.dlq_topic
        if topic not in admin.list_topics(timeout=30).topics:
            future = admin.create_topics([NewTopic(
                topic, num_partitions=1,
                replication_factor=self.policy.dlq_replication)])[topic]
            try:
                future.result(timeout=30)
            except Exception as exc:
                if "TOPIC_ALREADY_EXISTS" not in str(exc) and "already exists" not in str(exc):
                    raise RuntimeError(f"cannot create the dead letter queue topic {topic}: "
                                       f"{exc}") from exc
        self._topic_ready = True

    def flush(self, timeout: float = 60.0) -> None:
        if self._producer is None:
            return
        left = self._producer.flush(timeout)
        failed = [e for e in self._delivered if e is not None]
        self._delivered.clear()
        if left or failed:
            raise RuntimeError(f"writing to the dead letter queue "
                               f"{self.policy.dlq_topic} failed: "
                               f"{failed[0] if failed else f'{left} records unsent'}")
