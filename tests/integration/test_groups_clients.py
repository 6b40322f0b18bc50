"""3 consumers of one group over 6 partitions, for every client and group protocol:
disjoint assignments covering all partitions, every record consumed exactly once."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter

import pytest
from aiokafka import AIOKafkaConsumer
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer

from tests.integration.group_support import (
    Member,
    confluent_conf,
    disjoint_cover,
    new_topic,
    produce,
    start_node,
    wait_until,
)

N = 600


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    n = start_node(tmp_path_factory.mktemp("groups-clients") / "data")
    yield n
    n.stop()


def committed_total(bootstrap: str, group: str, topic: str) -> int:
    """The group's committed offsets summed over the 6 partitions (read by a non-member)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        parts = c.committed([TopicPartition(topic, p) for p in range(6)], timeout=30)
    finally:
        c.close()
    return sum(max(tp.offset, 0) for tp in parts)


def check_exactly_once(values: list[bytes]) -> None:
    counts = Counter(values)
    assert len(counts) == N, f"{N - len(counts)} records never consumed"
    assert set(counts.values()) == {1}, f"duplicates: {[v for v, c in counts.items() if c > 1][:5]}"


@pytest.mark.parametrize(("protocol", "strategy"), [
    ("classic", "range"), ("classic", "cooperative-sticky"), ("consumer", "uniform")])
def test_confluent_group(node, protocol, strategy):
    topic = new_topic(node.bootstrap, f"cg-{protocol}-{strategy}")
    members = [Member(confluent_conf(node.bootstrap, topic, protocol, strategy), [topic]).start()
               for _ in range(3)]
    try:
        wait_until(lambda: all(m.assignment for m in members)
                   and disjoint_cover([m.assignment for m in members], 6),
                   what="3 members sharing 6 partitions")
        produce(node.bootstrap, topic, N)
        wait_until(lambda: sum(m.count() for m in members) >= N, what="all records")
        # every record is committed: a duplicate could only come from a fetch restarting
        # below a committed offset, so what the members hold now is all they will ever get
        wait_until(lambda: committed_total(node.bootstrap, topic, topic) == N,
                   what="every record committed")
        assert disjoint_cover([m.assignment for m in members], 6)
        for m in members:
            assert {p for p, _, _ in m.records} <= m.assignment
        check_exactly_once([v for m in members for _, _, v in m.records])
    finally:
        for m in members:
            m.stop()
    # the commits landed: a new member of the group starts after everything
    late = Member(confluent_conf(node.bootstrap, topic, protocol, strategy), [topic]).start()
    try:
        wait_until(lambda: late.assignment == set(range(6)), what="late member assigned")
        # one new record per partition: the late member reads each partition in order from
        # its committed offset, so once it has all six, any record it had to re-read before
        # them is in late.records too
        sentinels = [b"after-%d" % p for p in range(6)]
        producer = Producer({"bootstrap.servers": node.bootstrap})
        for p, value in enumerate(sentinels):
            producer.produce(topic, value, partition=p)
        assert producer.flush(30) == 0
        wait_until(lambda: late.count() >= 6, what="the late member reading the new records")
        assert [v for _, _, v in late.records if v not in sentinels] == []
    finally:
        late.stop()


def test_kafka_python_group(node):
    topic = new_topic(node.bootstrap, "cg-kafka-python")
    stop = threading.Event()
    consumers = [KafkaConsumer(topic, bootstrap_servers=node.bootstrap, group_id=topic,
                               auto_offset_reset="earliest", enable_auto_commit=False,
                               session_timeout_ms=6000, heartbeat_interval_ms=500)
                 for _ in range(3)]
    got: list[list[tuple[int, bytes]]] = [[] for _ in consumers]
    assigned: list[set[int]] = [set() for _ in consumers]
    errors: list[BaseException] = []

    def run(i: int) -> None:
        c = consumers[i]
        try:
            while not stop.is_set():
                batch = c.poll(timeout_ms=100)
                assigned[i] = {tp.partition for tp in c.assignment()}
                for _tp, msgs in batch.items():
                    got[i].extend((m.partition, m.value) for m in msgs)
                if batch:
                    c.commit()
        except BaseException as exc:  # reported by the test
            errors.append(exc)
        finally:
            c.close()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(3)]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: all(assigned) and disjoint_cover(assigned, 6), timeout=60,
                   what="kafka-python members sharing 6 partitions")
        produce(node.bootstrap, topic, N)
        wait_until(lambda: sum(len(g) for g in got) >= N, what="all records")
        wait_until(lambda: committed_total(node.bootstrap, topic, topic) == N,
                   what="every record committed")
        assert not errors, errors
        assert disjoint_cover(assigned, 6)
        check_exactly_once([v for g in got for _, v in g])
    finally:
        stop.set()
        for t in threads:
            t.join(30)


def test_aiokafka_group(node):
    topic = new_topic(node.bootstrap, "cg-aiokafka")

    async def run() -> None:
        consumers = [AIOKafkaConsumer(topic, bootstrap_servers=node.bootstrap, group_id=topic,
                                      auto_offset_reset="earliest", enable_auto_commit=False,
                                      session_timeout_ms=6000, heartbeat_interval_ms=500)
                     for _ in range(3)]
        for c in consumers:
            await c.start()
        got: list[bytes] = []

        async def poll(c: AIOKafkaConsumer) -> None:
            batch = await c.getmany(timeout_ms=100)
            for _tp, msgs in batch.items():
                got.extend(m.value for m in msgs)
            if batch:
                await c.commit()

        try:
            deadline = time.monotonic() + 60
            while True:
                await asyncio.gather(*[poll(c) for c in consumers])
                sets = [{tp.partition for tp in c.assignment()} for c in consumers]
                if all(sets) and disjoint_cover(sets, 6):
                    break
                if time.monotonic() >= deadline:
                    pytest.fail(f"timed out waiting for aiokafka members to share: {sets}")
            await asyncio.to_thread(produce, node.bootstrap, topic, N)
            deadline = time.monotonic() + 60
            while len(got) < N:
                await asyncio.gather(*[poll(c) for c in consumers])
                if time.monotonic() >= deadline:
                    pytest.fail(f"timed out waiting for {N} records, got {len(got)}")
            for _ in range(3):
                await asyncio.gather(*[poll(c) for c in consumers])
            sets = [{tp.partition for tp in c.assignment()} for c in consumers]
            assert disjoint_cover(sets, 6)
            check_exactly_once(got)
        finally:
            for c in consumers:
                await c.stop()

    asyncio.run(run())
