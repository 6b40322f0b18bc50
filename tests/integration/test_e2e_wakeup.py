"""A fetch waiting in the node's long poll is answered by the next append, not by its timer.

The consumer asks the node to wait up to a minute for data (fetch.wait.max.ms=60000,
fetch.min.bytes=1) and is parked in that wait before anything is produced. Records produced
then must reach it well inside the minute: a node that only answered on the timer would make
these tests run into their deadline (half the wait) and fail. No timing is asserted; the
deadline only bounds how long a broken wake-up is waited for.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.client.admin import ensure_topic
from odradek.replication.partition import Partition
from odradek.replication.purgatory import DelayedFetch, DelayedOperationPurgatory
from odradek.storage.config import LogConfig
from odradek.storage.log import Log
from tests.support.broker import BrokerProcess

WAIT_MS = 60_000
DEADLINE_S = WAIT_MS / 1000 / 2


def long_poll_consumer(bootstrap: str, topic: str, partitions: int, **extra: str) -> Consumer:
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"wakeup-{topic}",
        "enable.auto.commit": False,
        "fetch.wait.max.ms": WAIT_MS,
        "fetch.min.bytes": 1,
        # librdkafka wants the socket timeout above the fetch wait
        "socket.timeout.ms": WAIT_MS * 2,
        **extra,
    })
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    # The topic is empty: this poll only gets the first fetch parked in the node's wait.
    assert consumer.poll(1.0) is None
    return consumer


def produce(bootstrap: str, topic: str, values: list[tuple[int, bytes]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "1"})
    for partition, value in values:
        producer.produce(topic, value, partition=partition)
    assert producer.flush(30) == 0


def receive(consumer: Consumer, count: int) -> list[tuple[int, bytes]]:
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(got) < count:
        if time.monotonic() > deadline:
            pytest.fail(f"{len(got)} of {count} records after {DEADLINE_S} s: the waiting fetch "
                        "was not woken by the appends")
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        got.append((msg.partition(), msg.value()))
    return got


def by_partition(records: list[tuple[int, bytes]]) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = {}
    for partition, value in records:
        out.setdefault(partition, []).append(value)
    return out


def test_a_waiting_fetch_is_answered_by_the_next_produce(broker: BrokerProcess) -> None:
    ensure_topic(broker.bootstrap, "wake", 3)
    consumer = long_poll_consumer(broker.bootstrap, "wake", 3)
    try:
        # Three rounds: the watchers a wait registers must be in place again for each new wait.
        for round_ in range(3):
            sent = [(i % 3, f"r{round_}-{i}".encode()) for i in range(30)]
            produce(broker.bootstrap, "wake", sent)
            got = receive(consumer, len(sent))
            # Every record once, each partition in the order produced.
            assert by_partition(got) == by_partition(sent)
            # Parked again: nothing more is there to read.
            assert consumer.poll(0.5) is None
    finally:
        consumer.close()


def test_one_record_wakes_a_fetch_waiting_on_many_partitions(broker: BrokerProcess) -> None:
    ensure_topic(broker.bootstrap, "wake-one", 6)
    consumer = long_poll_consumer(broker.bootstrap, "wake-one", 6)
    try:
        # A single small record on the last partition is enough for fetch.min.bytes=1.
        produce(broker.bootstrap, "wake-one", [(5, b"only")])
        assert receive(consumer, 1) == [(5, b"only")]
    finally:
        consumer.close()


def test_read_committed_wait_is_woken_by_the_commit(broker: BrokerProcess) -> None:
    ensure_topic(broker.bootstrap, "wake-txn", 2)
    consumer = long_poll_consumer(broker.bootstrap, "wake-txn", 2,
                                  **{"isolation.level": "read_committed"})
    producer = Producer({"bootstrap.servers": broker.bootstrap,
                         "transactional.id": "wake-txn-producer"})
    try:
        producer.init_transactions(30)
        producer.begin_transaction()
        values = [(i % 2, f"t{i}".encode()) for i in range(10)]
        for partition, value in values:
            producer.produce("wake-txn", value, partition=partition)
        producer.flush(30)
        # Uncommitted: the read_committed consumer gets nothing yet (its wait goes on).
        assert consumer.poll(1.0) is None
        producer.commit_transaction(30)
        got = receive(consumer, len(values))
        assert by_partition(got) == by_partition(values)
    finally:
        consumer.close()


def test_complete_all_answers_every_waiting_fetch(tmp_path: Path) -> None:
    # What a stopping node calls so it need not wait out its consumers' fetch.wait.max.ms.
    log = Log.open(tmp_path / "t-0", LogConfig())
    part = Partition("t", 0, uuid.uuid4(), log, leader=1, leader_epoch=0, replicas=[1], isr=[1])

    async def scenario() -> tuple[int, list[bool], int]:
        purgatory = DelayedOperationPurgatory("Fetch")
        waits = [asyncio.ensure_future(DelayedFetch([part], 1, 0, purgatory=purgatory)
                                       .wait(WAIT_MS))
                 for _ in range(3)]
        for _ in range(1000):  # each task parks its fetch on its first run
            if len(purgatory) == 3:
                break
            await asyncio.sleep(0)
        woken = purgatory.complete_all()
        done = await asyncio.wait_for(asyncio.gather(*waits), DEADLINE_S)
        return woken, done, purgatory.complete_all()

    try:
        woken, done, left = asyncio.run(scenario())
    finally:
        log.close()
    assert woken == 3
    assert done == [False, False, False]  # answered without min_bytes: nothing was appended
    assert left == 0  # no wait is still registered once answered
