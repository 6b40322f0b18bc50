"""Issue 14, point 5: coordinators follow leadership on a real 3-node cluster.

The internal topics have replication factor 3. A consumer group keeps its committed offsets
across a kill -9 of its coordinator's node: FindCoordinator moves to the new leader of the
group's `__consumer_offsets` partition, which has the latest commit (it loads its log to the
end, and a commit is acknowledged only once the ISR has it), and the member goes on from
there without re-reading or skipping a record. One cluster for the module.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.coordinator.offsets_topic import partition_for
from tests.system.cluster_support import Cluster, running_cluster, wait_until

TOPIC = "orders"
PARTITIONS = 3
FIRST = 300
LAST = 30
MORE = 300


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("coordinators") / "c", 3) as c:
        yield c


def produce(bootstrap: str, start: int, count: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "message.timeout.ms": 120000})
    for i in range(start, start + count):
        p.produce(TOPIC, str(i).encode(), key=str(i).encode())
        p.poll(0)
    assert p.flush(120) == 0


def commit(consumer: Consumer, positions: dict[int, int], cluster: Cluster) -> None:
    """Commit the next offsets to read, synchronously, until the coordinator acknowledges."""
    offsets = [TopicPartition(TOPIC, p, o) for p, o in sorted(positions.items())]

    def done() -> bool:
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException:
            return False
        return True

    wait_until(done, "the commit acknowledged", 120, cluster, every=0.5)


def group_coordinator(admin: AdminClient, group: str) -> int:
    description = admin.describe_consumer_groups([group])[group].result(10)
    return int(description.coordinator.id)


def test_internal_topics_have_replication_factor_3(cluster: Cluster) -> None:
    # the group and transaction coordinators write their topics with acks=all to 3 replicas
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(60)
    cluster.wait_isr(TOPIC, 3)
    for name in ("__consumer_offsets", "__transaction_state"):
        parts = cluster.wait_isr(name, 3)
        assert parts and all(len(p["replicas"]) == 3 for p in parts.values()), (name, parts)


def consume(consumer: Consumer, seen: dict[int, list[int]], want: int, cluster: Cluster,
            positions: dict[int, int]) -> None:
    """Read until `want` records in all, committing after each poll (what was read)."""

    def more() -> bool:
        got = [m for m in consumer.consume(100, 0.5) if m.error() is None]
        for m in got:
            seen.setdefault(m.partition(), []).append(m.offset())
            positions[m.partition()] = m.offset() + 1
        if got:
            commit(consumer, positions, cluster)
        return sum(len(v) for v in seen.values()) >= want

    wait_until(more, f"{want} records read by the group", 120, cluster)


def test_group_keeps_committed_offsets_across_kill_of_its_coordinator(cluster: Cluster) -> None:
    group = "ledger"
    produce(cluster.bootstrap, 0, FIRST)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 10000, "heartbeat.interval.ms": 500})
    consumer.subscribe([TOPIC])
    seen: dict[int, list[int]] = {}
    positions: dict[int, int] = {}
    try:
        consume(consumer, seen, FIRST, cluster, positions)
        assert sum(len(v) for v in seen.values()) == FIRST  # nothing beyond what was written
        coordinator = group_coordinator(admin, group)
        offsets_partition = partition_for(group, 3)
        leader = cluster.partitions("__consumer_offsets")[offsets_partition]["leader"]
        assert coordinator == leader  # FindCoordinator: the leader of the group's partition

        # the last commit goes right before the kill: the followers' HW has not caught up
        # with it yet, so the new leader must load its log beyond its HW to have it
        produce(cluster.bootstrap, FIRST, LAST)
        consume(consumer, seen, FIRST + LAST, cluster, positions)
        cluster.kill9(coordinator)
        survivors = cluster.bootstrap_of()
        admin = AdminClient({"bootstrap.servers": survivors})

        def moved() -> int | None:
            part = cluster.partitions("__consumer_offsets")[offsets_partition]
            if part["leader"] in (coordinator, -1):
                return None
            now = group_coordinator(admin, group)
            return now if now == part["leader"] else None

        new_coordinator = wait_until(moved, "the group's coordinator on a new leader", 90,
                                     cluster)
        assert new_coordinator != coordinator

        # every committed offset is there on the new coordinator, asked by a fresh client
        probe = Consumer({"bootstrap.servers": survivors, "group.id": group,
                          "enable.auto.commit": False})
        try:
            wanted = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]

            def committed() -> dict[int, int] | None:
                try:
                    got = probe.committed(wanted, timeout=5)
                except KafkaException:
                    return None
                return {tp.partition: tp.offset for tp in got}

            after = wait_until(committed, "the committed offsets from the new coordinator", 60,
                               cluster)
        finally:
            probe.close()
        assert after == {p: positions.get(p, -1001) for p in range(PARTITIONS)}

        # the member goes on: new records are read once each, from where it committed
        produce(survivors, FIRST + LAST, MORE)
        consume(consumer, seen, FIRST + LAST + MORE, cluster, positions)
    finally:
        consumer.close()
    end_offsets = _end_offsets(survivors)
    for p in range(PARTITIONS):
        offsets = seen.get(p, [])
        assert offsets == list(range(end_offsets[p])), f"partition {p}: re-read or skipped"
    assert sum(end_offsets.values()) == FIRST + LAST + MORE

    cluster.restart(coordinator)
    cluster.wait_ready()
    cluster.wait_isr("__consumer_offsets", 3)


def _end_offsets(bootstrap: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "end-offsets-probe"})
    try:
        out: dict[int, Any] = {}
        for p in range(PARTITIONS):
            _, high = c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)
            out[p] = high
        return out
    finally:
        c.close()
