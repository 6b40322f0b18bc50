from __future__ import annotations

from confluent_kafka import Node, TopicPartitionInfo, Uuid
from confluent_kafka.admin import ConfigEntry, ConfigSource, TopicDescription

from odradek.cli.topic import kafka_uuid, render_description


def _description() -> TopicDescription:
    n1, n2 = Node(1, "h", 1), Node(2, "h", 2)
    parts = [TopicPartitionInfo(1, n2, [n2, n1], [n2]), TopicPartitionInfo(0, n1, [n1, n2], [n1, n2])]
    return TopicDescription("clicks", Uuid(0x7EE83E390D674B13, -0x5F9FF34BC679B25B), False, parts)


def _entries() -> dict[str, ConfigEntry]:
    return {
        "retention.ms": ConfigEntry("retention.ms", "86400000",
                                    source=ConfigSource.DYNAMIC_TOPIC_CONFIG),
        "cleanup.policy": ConfigEntry("cleanup.policy", "delete",
                                      source=ConfigSource.DEFAULT_CONFIG, is_default=True),
        "segment.bytes": ConfigEntry("segment.bytes", "1000",
                                     source=ConfigSource.DYNAMIC_TOPIC_CONFIG),
    }


def test_kafka_uuid_is_url_safe_base64_without_padding() -> None:
    assert kafka_uuid(Uuid(0x7EE83E390D674B13, -0x5F9FF34BC679B25B)) == "fug-OQ1nSxOgYAy0OYZNpQ"


def test_describe_lines_like_kafka_topics() -> None:
    text = render_description(_description(), _entries())
    assert text.splitlines() == [
        "Topic: clicks\tTopicId: fug-OQ1nSxOgYAy0OYZNpQ\tPartitionCount: 2\tReplicationFactor: 2"
        "\tConfigs: retention.ms=86400000,segment.bytes=1000",
        "\tTopic: clicks\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2",
        "\tTopic: clicks\tPartition: 1\tLeader: 2\tReplicas: 2,1\tIsr: 2",
    ]


def test_all_configs_with_sources() -> None:
    lines = render_description(_description(), _entries(), all_configs=True).splitlines()
    assert lines[3:] == [
        "\tConfigs:",
        "\t\tcleanup.policy=delete\t(DEFAULT_CONFIG)",
        "\t\tretention.ms=86400000\t(DYNAMIC_TOPIC_CONFIG)",
        "\t\tsegment.bytes=1000\t(DYNAMIC_TOPIC_CONFIG)",
    ]
