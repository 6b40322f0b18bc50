"""Kafka 4.2's client API surface against a node, through kafka-python, which gates its own
tests of DescribeTopicPartitions, ListConfigResources and DescribeQuorum on the broker
reporting Kafka 4.x: it must infer 4.2 from our ApiVersions, then each call must work, and
its producer and consumer (Produce v13 and OffsetCommit/OffsetFetch v10: topics by id) too."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from tests.support.broker import BrokerProcess


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    n = BrokerProcess(tmp_path_factory.mktemp("kafka-42") / "data")
    n.start()
    try:
        yield n
    finally:
        n.stop()


@pytest.fixture(scope="module")
def admin(node: BrokerProcess) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    a.create_topics([NewTopic("dtp-a", 5, 1), NewTopic("dtp-b", 3, 1), NewTopic("dtp-c", 1, 1)])
    try:
        yield a
    finally:
        a.close()


def test_kafka_python_sees_kafka_4_2(admin: KafkaAdminClient) -> None:
    [node_id] = [b["broker_id"] for b in admin.describe_cluster()["brokers"]]
    assert admin.get_broker_version_data(node_id).broker_version >= (4, 2)


def test_describe_topic_partitions_pages_with_a_cursor(admin: KafkaAdminClient) -> None:
    seen: list[tuple[str, int]] = []
    cursor = None
    pages = 0
    while True:
        page = admin.describe_topic_partitions(["dtp-c", "dtp-a", "dtp-b"],
                                               response_partition_limit=2, cursor=cursor)
        pages += 1
        assert sum(len(t["partitions"]) for t in page["topics"]) <= 2
        for t in page["topics"]:
            assert t["error_code"] == 0 and t["topic_id"] is not None
            seen += [(t["name"], p["partition_index"]) for p in t["partitions"]]
            assert all(p["leader_id"] >= 0 and p["isr_nodes"] for p in t["partitions"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
        assert pages < 10
    assert seen == ([("dtp-a", i) for i in range(5)] + [("dtp-b", i) for i in range(3)]
                    + [("dtp-c", 0)])
    assert pages == 5
    # the whole answer at once, and an unknown topic among them
    page = admin.describe_topic_partitions(["dtp-b", "nope"])
    assert page["next_cursor"] is None
    by_name = {t["name"]: t for t in page["topics"]}
    assert len(by_name["dtp-b"]["partitions"]) == 3
    assert by_name["nope"]["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION


def test_list_config_resources(admin: KafkaAdminClient) -> None:
    listed = admin.list_config_resources()
    assert {"dtp-a", "dtp-b", "dtp-c"} <= set(listed["topic"])
    assert listed["broker"] == [str(b["broker_id"]) for b in admin.describe_cluster()["brokers"]]
    only_topics = admin.list_config_resources(["TOPIC"])
    assert set(only_topics) == {"topic"}


def test_describe_metadata_quorum(admin: KafkaAdminClient) -> None:
    quorum = admin.describe_metadata_quorum()
    [topic] = quorum["topics"]
    assert topic["topic_name"] == "__cluster_metadata"
    [part] = topic["partitions"]
    assert part["error"] is None and part["leader_id"] >= 0
    assert part["high_watermark"] > 0


def test_produce_and_commit_by_topic_id(node: BrokerProcess, admin: KafkaAdminClient) -> None:
    p = KafkaProducer(bootstrap_servers=node.bootstrap)
    try:
        meta = [p.send("dtp-c", b"v%d" % i).get(timeout=30) for i in range(5)]
    finally:
        p.close()
    assert [m.offset for m in meta] == list(range(5))
    c = KafkaConsumer(bootstrap_servers=node.bootstrap, group_id="by-id",
                      enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        tp = TopicPartition("dtp-c", 0)
        c.assign([tp])
        got: list[bytes] = []
        for _ in range(60):
            got += [r.value for rs in c.poll(timeout_ms=500).values() for r in rs]
            if len(got) >= 5:
                break
        assert got == [b"v%d" % i for i in range(5)]
        c.commit()
        assert c.committed(tp) == 5
    finally:
        c.close()
    # fetch-all by id: the committed topic comes back named
    assert admin.list_group_offsets("by-id")["by-id"][TopicPartition("dtp-c", 0)].offset == 5
