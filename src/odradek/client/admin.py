"""Admin helpers over confluent-kafka that tools, benchmarks and tests share."""

from __future__ import annotations

from confluent_kafka import KafkaException
from confluent_kafka.admin import NewTopic

from odradek.client.factory import admin_client

__all__ = ["ensure_topic"]


def ensure_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0,
                 settings: dict[str, object] | None = None) -> None:
    """Create `topic` with `partitions` partitions (replication factor 1) unless it exists.
    Any other refusal raises the KafkaException. `settings`: librdkafka's (security)."""
    admin = admin_client(bootstrap, settings) if settings else admin_client(bootstrap)
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions,
                                            replication_factor=1)],
                                  operation_timeout=timeout, request_timeout=timeout)
    try:
        futures[topic].result(timeout)
    except KafkaException as exc:
        if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":
            raise
