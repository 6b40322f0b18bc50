"""Sink connectors' offsets live where Kafka keeps them: in the consumer group
`connect-<connector>` (SinkUtils.consumerGroupId), committed through the admin API, so
`kafka-consumer-groups --describe --group connect-<name>` shows a sink's progress and lag.

As KIP-875 shows them: partition `{"kafka_topic": t, "kafka_partition": p}`, offset
`{"kafka_offset": o}`.
"""

from __future__ import annotations

from typing import Any

from odradek.connect.cluster import Cluster

Committed = dict[str, dict[int, int]]


def group_of(connector: str) -> str:
    return f"connect-{connector}"


def read(cluster: Cluster, connector: str, timeout: float = 30.0) -> Committed:
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = cluster.admin()
    group = group_of(connector)
    future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                               request_timeout=timeout)[group]
    out: Committed = {}
    try:
        result = future.result(timeout=timeout)
    except Exception as exc:  # a group never committed to is not an error: no offsets
        if "GROUP_ID_NOT_FOUND" in str(exc):
            return out
        raise
    for tp in result.topic_partitions or []:
        if tp.offset >= 0:
            out.setdefault(tp.topic, {})[tp.partition] = tp.offset
    return out


def write(cluster: Cluster, connector: str, offsets: Committed, timeout: float = 30.0) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    if not offsets:
        return
    admin = cluster.admin()
    group = group_of(connector)
    tps = [TopicPartition(t, p, o) for t, parts in offsets.items() for p, o in parts.items()]
    future = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, tps)],
                                                request_timeout=timeout)[group]
    result = future.result(timeout=timeout)
    failed = [tp for tp in result.topic_partitions or [] if tp.error is not None]
    if failed:
        raise RuntimeError(f"committing {group}: {failed[0].topic}-{failed[0].partition}: "
                           f"{failed[0].error}")


def reset(cluster: Cluster, connector: str, timeout: float = 30.0) -> None:
    """Forget every committed offset (the group goes): the next start reads from the
    beginning, as `auto.offset.reset=earliest` says for Connect's sink consumers."""
    admin = cluster.admin()
    group = group_of(connector)
    future = admin.delete_consumer_groups([group], request_timeout=timeout)[group]
    try:
        future.result(timeout=timeout)
    except Exception as exc:
        if "GROUP_ID_NOT_FOUND" not in str(exc):
            raise


def delete(cluster: Cluster, connector: str, partitions: list[tuple[str, int]],
           timeout: float = 30.0) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    if not partitions:
        return
    admin = cluster.admin()
    group = group_of(connector)
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p) for t, p in partitions])
    future = admin.delete_consumer_group_offsets([request], request_timeout=timeout)[group]
    try:
        future.result(timeout=timeout)
    except Exception as exc:
        if "GROUP_ID_NOT_FOUND" not in str(exc):
            raise


def as_rest(committed: Committed) -> list[dict[str, Any]]:
    return [{"partition": {"kafka_topic": t, "kafka_partition": p},
             "offset": {"kafka_offset": o}}
            for t in sorted(committed) for p, o in sorted(committed[t].items())]


def parse_rest(partition: Any, offset: Any) -> tuple[str, int, int | None]:
    """A KIP-875 entry for a sink: (topic, partition, offset or None to reset). ValueError
    with Kafka's wording when it is not one."""
    if not isinstance(partition, dict):
        raise ValueError("The partition for a sink connector offset must be a JSON object")
    topic = partition.get("kafka_topic")
    part = partition.get("kafka_partition")
    if not isinstance(topic, str) or not topic:
        raise ValueError("Kafka topic names must be valid strings")
    if not isinstance(part, int) or isinstance(part, bool) or part < 0:
        raise ValueError("Kafka partitions must be valid integers and non-negative")
    if offset is None:
        return topic, part, None
    if not isinstance(offset, dict) or "kafka_offset" not in offset:
        raise ValueError("The offset for a sink connector must contain 'kafka_offset'")
    off = offset["kafka_offset"]
    if not isinstance(off, int) or isinstance(off, bool) or off < 0:
        raise ValueError("Kafka offsets must be valid integers and non-negative")
    return topic, part, off
