"""Issue 22, point 4: file descriptors are a budget, not a cliff. Real `odradek serve`
processes under a real RLIMIT_NOFILE (prlimit), real confluent-kafka clients."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from tests.support.background import create_topic
from tests.support.broker import BrokerProcess

LIMIT = 1024
POLICY_VIOLATION = 44


class LimitedBroker(BrokerProcess):
    """A node started under `prlimit --nofile=N:N` (soft and hard: it cannot raise it)."""

    def __init__(self, data_dir: Path, nofile: int, **kwargs: object) -> None:
        super().__init__(data_dir, **kwargs)  # type: ignore[arg-type]
        self.nofile = nofile

    def command(self) -> list[str]:
        return ["prlimit", f"--nofile={self.nofile}:{self.nofile}", "--", *super().command()]


def fd_count(node: BrokerProcess) -> int:
    assert node.proc is not None
    return len(os.listdir(f"/proc/{node.proc.pid}/fd"))


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int,
            size: int = 300) -> None:
    # one record a batch: with a tiny segment.bytes, each batch must fit a segment
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20,
                  "enable.idempotence": True, "batch.num.messages": 1})
    errors: list[str] = []

    def cb(err: object, _m: object) -> None:
        if err is not None:
            errors.append(str(err))

    for i in range(per_partition):
        for part in range(partitions):
            p.produce(topic, partition=part, value=b"%d|%d|" % (part, i) + b"x" * size,
                      on_delivery=cb)
            p.poll(0)
    assert p.flush(120) == 0 and not errors, errors[:5]


def count_records(bootstrap: str, topics: dict[str, int], expected: int) -> dict[tuple[str, int], int]:
    """Read every partition from its start; records per partition."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "fd-check",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 50,
                  "auto.offset.reset": "earliest"})
    # from offset 0, each log's start (no retention here; a start past 0 would be out of
    # range, reset to earliest and miss records): OFFSET_BEGINNING costs a ListOffsets request
    # a partition before the first fetch, thousands of them at each read
    c.assign([TopicPartition(t, p, 0) for t, n in topics.items() for p in range(n)])
    counts: dict[tuple[str, int], int] = {}
    got = 0
    deadline = time.monotonic() + 300
    try:
        while got < expected and time.monotonic() < deadline:
            for m in c.consume(1000, 1.0):
                if m.error() is not None:
                    raise KafkaException(m.error())
                key = (m.topic(), m.partition())
                counts[key] = counts.get(key, 0) + 1
                got += 1
    finally:
        c.close()
    return counts


def test_a_fresh_data_dir_starts_and_serves_under_1024_fds(tmp_path: Path) -> None:
    node = LimitedBroker(tmp_path / "data", LIMIT).start(timeout=120)
    try:
        create_topic(node.bootstrap, "small", 3)
        produce(node.bootstrap, "small", 3, 5)
        counts = count_records(node.bootstrap, {"small": 3}, 15)
        assert counts == {("small", p): 5 for p in range(3)}
        assert fd_count(node) < LIMIT
        assert "file descriptors: soft limit 1024" in node.log()
    finally:
        node.stop()


def test_create_topics_past_the_budget_is_refused_and_creates_nothing(tmp_path: Path) -> None:
    # Partitions past the pool's write pins take turns and cost no more fds, so the budget
    # binds when max.connections eats into those pins: 1024 - 300 connections - the pool,
    # reads and the node's own leave write pins for about 148 partitions.
    node = LimitedBroker(tmp_path / "data", LIMIT,
                         settings={"max.connections": "300"}).start(timeout=120)
    try:
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        fs = admin.create_topics([NewTopic("too-many", 2000, 1)], operation_timeout=30)
        with pytest.raises(KafkaException) as info:
            fs["too-many"].result(30)
        err = info.value.args[0]
        assert err.code() == POLICY_VIOLATION
        assert "RLIMIT_NOFILE" in err.str() and "1024" in err.str()
        # CreatePartitions past the budget: refused the same way, the topic keeps its count
        create_topic(node.bootstrap, "grows", 1)
        fs2 = admin.create_partitions([NewPartitions("grows", 3000)], operation_timeout=30)
        with pytest.raises(KafkaException) as info2:
            fs2["grows"].result(30)
        assert info2.value.args[0].code() == POLICY_VIOLATION
        md = admin.list_topics(timeout=30)
        assert "too-many" not in md.topics
        assert len(md.topics["grows"].partitions) == 1
        data = tmp_path / "data"
        assert not any(d.name.startswith("too-many-") for d in data.iterdir())
        assert not (data / "grows-1").exists()
        # what fits is still created
        create_topic(node.bootstrap, "fits", 10)
    finally:
        node.stop()


# past the suite's 300 s: its own waits allow 300 s for each of two starts; ~1 min idle, 2.5-5.5
# min at load 12-18
@pytest.mark.timeout(900)
def test_thousands_of_partitions_hold_far_fewer_fds_and_survive_restarts(tmp_path: Path) -> None:
    topics = {f"many-{i}": 300 for i in range(10)}  # 3,000 partitions
    per_partition = 3
    total = sum(topics.values()) * per_partition
    data = tmp_path / "data"
    # log.segment.bytes 1000: every partition's 3 records of ~370 bytes span 2 segments
    settings = {"log.segment.bytes": "1000"}
    node = BrokerProcess(data, settings=settings).start(timeout=120)
    try:
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        for name, n in topics.items():
            admin.create_topics([NewTopic(name, n, 1)], operation_timeout=60)[name].result(60)
        for name, n in topics.items():
            produce(node.bootstrap, name, n, per_partition)
        assert len(list((data / "many-0-0").glob("*.log"))) >= 2
        expected = {(t, p): per_partition for t, n in topics.items() for p in range(n)}
        assert count_records(node.bootstrap, topics, total) == expected
        # idle active segments give their fds back within two checkpoint rounds (5 s each)
        deadline = time.monotonic() + 60
        while fd_count(node) > 1000 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert fd_count(node) < 1000  # 3,000 partitions, 6,000+ segments
        node.stop()
        node.start(timeout=300)
        assert fd_count(node) < 1000
        assert count_records(node.bootstrap, topics, total) == expected
        node.kill9()
        node.start(timeout=300)
        assert fd_count(node) < 1000
        assert count_records(node.bootstrap, topics, total) == expected
    finally:
        node.stop()
