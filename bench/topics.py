"""Create the benchmark topic when it is missing."""

from __future__ import annotations

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic


def ensure_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions,
                                            replication_factor=1)],
                                  operation_timeout=timeout, request_timeout=timeout)
    try:
        futures[topic].result(timeout)
    except KafkaException as exc:
        if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":
            raise
