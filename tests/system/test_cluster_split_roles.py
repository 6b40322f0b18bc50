"""Issue 14: split roles (3 controller-only nodes and 2 broker-only nodes, each its own
process) and min.insync.replicas.

The brokers fetch the metadata log as observers and reach the active controller over its
controller listener; admin requests sent to a broker are forwarded to it. Two brokers hold at
most 2 replicas, so the topics have replication factor 2, and so do the internal topics: as in
Kafka, offsets.topic.replication.factor and transaction.state.log.replication.factor (default
3) are what the internal topics get, never capped in a cluster, so a 2-broker cluster sets
them to 2 as a Kafka user would. With one of a partition's 2 replicas down and
min.insync.replicas=2, acks=all gets NOT_ENOUGH_REPLICAS and appends nothing, while acks=1
still works (the controllers stay up, so the ISR shrinks as Kafka's does).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.protocol.records import iter_batches
from tests.system.cluster_support import Cluster, running_cluster, wait_until

BROKERS = [4, 5]
INTERNAL_RF_2 = {"offsets.topic.replication.factor": "2",
                 "transaction.state.log.replication.factor": "2"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("split") / "c", 2, controllers=3,
                         settings=INTERNAL_RF_2) as c:
        yield c


def produce(bootstrap: str, topic: str, values: list[bytes], acks: str,
            partition: int = 0) -> list[str | None]:
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "message.timeout.ms": 10000,
                  "retries": 0 if acks == "all" else 2147483647})
    results: list[str | None] = []

    def report(err: KafkaError | None, msg: object) -> None:
        results.append(None if err is None else err.name())

    for v in values:
        p.produce(topic, v, partition=partition, on_delivery=report)
    p.flush(60)
    return results


def log_end(cluster: Cluster, node_id: int, topic: str) -> int:
    """The next offset of the partition's log on that node, from its segment files."""
    last = -1
    for seg in sorted((cluster.node(node_id).data_dir / f"{topic}-0").glob("*.log")):
        for h, _ in iter_batches(seg.read_bytes()):
            last = h.last_offset
    return last + 1


def high_watermark(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "hw"})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1])
    finally:
        c.close()


@pytest.mark.timeout(300)
def test_split_roles_produce_consume_and_forwarding(cluster: Cluster) -> None:
    state = cluster.state()
    assert [b["id"] for b in state["brokers"]] == BROKERS  # controllers are not brokers
    quorum = state["quorum"]
    assert sorted(v["node_id"] for v in quorum["voters"]) == [1, 2, 3]
    assert sorted(o["node_id"] for o in quorum["observers"]) == BROKERS
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    # CreateTopics sent to a broker reaches the active controller (a controller-only node)
    admin.create_topics([NewTopic("split", 3, 2)])["split"].result(60)
    parts = cluster.wait_isr("split", 2)
    # both brokers lead: the controller spreads leaders over the brokers, never a controller
    assert {p["leader"] for p in parts.values()} == set(BROKERS)
    assert all(sorted(p["replicas"]) == BROKERS for p in parts.values())
    assert produce(cluster.bootstrap, "split", [b"v%d" % i for i in range(300)], "all") \
        == [None] * 300
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "split-g",
                  "auto.offset.reset": "earliest"})
    c.subscribe(["split"])
    seen: list[bytes] = []

    def done() -> bool:
        seen.extend(m.value() for m in c.consume(300, 1.0) if m.error() is None)
        return len(seen) >= 300

    try:
        wait_until(done, "300 records through the split-role cluster", 120, cluster)
    finally:
        c.close()
    assert sorted(seen) == sorted(b"v%d" % i for i in range(300))
    # the group's offsets live in __consumer_offsets, created with its configured factor
    offsets = cluster.wait_isr("__consumer_offsets", 2)
    assert all(sorted(p["replicas"]) == BROKERS for p in offsets.values())


@pytest.mark.timeout(300)
def test_min_insync_replicas_with_one_of_two_down(cluster: Cluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("misr", 1, 2, config={"min.insync.replicas": "2"})])[
        "misr"].result(60)
    cluster.wait_isr("misr", 2)
    assert produce(cluster.bootstrap, "misr", [b"before"] * 10, "all") == [None] * 10
    leader = cluster.partitions("misr")[0]["leader"]
    down = [b for b in BROKERS if b != leader]
    for b in down:
        cluster.kill9(b)
    alive = cluster.bootstrap_of([leader])
    wait_until(lambda: cluster.partitions("misr")[0]["isr"] == [leader],
               "the ISR to shrink to the leader", 90, cluster)
    hw = high_watermark(alive, "misr")
    end = log_end(cluster, leader, "misr")
    results = produce(alive, "misr", [b"refused"] * 5, "all")
    assert results == ["NOT_ENOUGH_REPLICAS"] * 5, results
    assert high_watermark(alive, "misr") == hw
    assert log_end(cluster, leader, "misr") == end  # nothing appended to the leader's log
    assert produce(alive, "misr", [b"acks1"] * 5, "1") == [None] * 5
    for b in down:
        cluster.restart(b)
    cluster.wait_ready()
    cluster.wait_isr("misr", 2, 120)
    assert produce(cluster.bootstrap, "misr", [b"after"] * 5, "all") == [None] * 5
