"""Where records that do not parse go: a dead-letter topic, or a failed query.

A dead-lettered record keeps its original key, value and headers, and gains headers saying
where it came from and why it failed (named like Kafka Connect's `__connect.errors.*` and
Kafka Streams' `__streams.errors.*`), so it can be inspected and replayed by any client.

Dead-lettering happens inside the Spark task that parses, before the task hands its good rows
on: the task produces its bad records with an idempotent producer and flushes before it
returns the batch, so a finished task's bad records are in the dead-letter topic. Delivery is
at-least-once: a re-executed task (a micro-batch replayed after a crash) writes its bad
records again. Consumers of the dead-letter topic can de-duplicate by the origin headers.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

LOG = logging.getLogger("odradek.spark")

H_TOPIC = "__odradek.errors.topic"
H_PARTITION = "__odradek.errors.partition"
H_OFFSET = "__odradek.errors.offset"
H_MESSAGE = "__odradek.errors.message"
H_FORMAT = "__odradek.errors.format"
ERROR_HEADERS = (H_TOPIC, H_PARTITION, H_OFFSET, H_MESSAGE, H_FORMAT)

ON_ERROR = ("fail", "dead-letter", "column")


class UnparsableRecord(ValueError):
    """Raised in a task when on_error='fail'; the message names topic, partition and offset."""


def describe(topic: Any, partition: Any, offset: Any, reason: str) -> str:
    return f"unparsable record at topic {topic} partition {partition} offset {offset}: {reason}"


@dataclass(frozen=True)
class DeadLetter:
    """The dead-letter topic and how to reach it. `client` holds librdkafka settings (the
    same ones a `kafka.*` option would carry, without the prefix)."""

    topic: str
    bootstrap: str
    client: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.topic or not self.topic.strip():
            raise ValueError("the dead-letter topic name is empty")
        if not self.bootstrap:
            raise ValueError("the dead-letter bootstrap servers are empty")


@dataclass(frozen=True)
class Bad:
    """One record that failed to parse, as read from the source."""

    key: bytes | None
    value: bytes | None
    topic: str | None
    partition: int | None
    offset: int | None
    headers: Sequence[tuple[str, bytes | None]]
    reason: str


class Publisher:
    """Produces dead letters from one task; `flush()` raises if any were not delivered."""

    def __init__(self, target: DeadLetter, fmt: str) -> None:
        self.target = target
        self.fmt = fmt
        self._producer: Producer | None = None
        self._error: KafkaError | None = None
        self.sent = 0

    def _report(self, err: KafkaError | None, _msg: object) -> None:
        if err is not None and self._error is None:
            self._error = err

    def send(self, bad: Bad) -> None:
        if self._producer is None:
            conf: dict[str, Any] = {"linger.ms": 5, "enable.idempotence": True,
                                    "delivery.report.only.error": True, "logger": LOG}
            conf.update(self.target.client)
            conf["bootstrap.servers"] = self.target.bootstrap
            conf["on_delivery"] = self._report
            self._producer = Producer(conf)
        headers = [
            *bad.headers,
            (H_TOPIC, str(bad.topic).encode()),
            (H_PARTITION, str(bad.partition).encode()),
            (H_OFFSET, str(bad.offset).encode()),
            (H_MESSAGE, bad.reason.encode("utf-8", "replace")),
            (H_FORMAT, self.fmt.encode()),
        ]
        while True:
            try:
                self._producer.produce(self.target.topic, bad.value, bad.key, headers=headers)
                break
            except BufferError:
                self._producer.poll(0.05)
        self.sent += 1

    def flush(self) -> None:
        if self._producer is None:
            return
        left = self._producer.flush(120)
        if left:
            raise RuntimeError(f"{left} dead-letter records to {self.target.topic!r} "
                               "were not delivered within 120 s")
        if self._error is not None:
            raise KafkaException(self._error)
