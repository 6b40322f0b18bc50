"""confluent-kafka (librdkafka) against a live node: admin create, 100k records per codec, back."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support import dataset
from tests.support.background import wait_for_topic
from tests.support.broker import BrokerProcess

N = 100_000
PARTITIONS = 6


def produce_all(bootstrap: str, topic: str, codec: str) -> dict[int, tuple[int, int]]:
    delivered: dict[int, tuple[int, int]] = {}
    errors: list[str] = []

    def reporter(seq: int) -> object:
        # librdkafka drops headers from delivery reports, so the record's number rides here
        def on_delivery(err: object, msg: object) -> None:
            if err is not None:
                errors.append(str(err))
                return
            delivered[seq] = (msg.partition(), msg.offset())  # type: ignore[attr-defined]
        return on_delivery

    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                         "linger.ms": 20, "batch.num.messages": 10000, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 200_000, "acks": "all",
                         "error_cb": lambda e: errors.append(f"error_cb: {e}")})
    for i in range(N):
        while True:
            try:
                producer.produce(topic, key=dataset.key(i), value=dataset.value(i),
                                 headers=dataset.headers(i), on_delivery=reporter(i))
                break
            except BufferError:
                producer.poll(0.05)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0, "records left undelivered"
    assert not errors, errors[:10]
    return delivered


def consume_all(bootstrap: str, topic: str, expected: int) -> list[dataset.Consumed]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "never-joined",
                         "enable.auto.commit": False, "fetch.max.bytes": 52428800,
                         "max.partition.fetch.bytes": 10485760, "enable.partition.eof": False})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    out: list[dataset.Consumed] = []
    deadline = time.monotonic() + 120
    try:
        while len(out) < expected and time.monotonic() < deadline:
            for m in consumer.consume(10000, timeout=1.0):
                assert m.error() is None, m.error()
                out.append(dataset.Consumed(m.partition(), m.offset(), m.key(), m.value(),
                                            dataset.normalize_headers(m.headers())))
        # nothing beyond what was produced
        extra = consumer.consume(1000, timeout=1.0)
        assert not [m for m in extra if m.error() is None], "more records than produced"
    finally:
        consumer.close()
    return out


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory):
    n = BrokerProcess(tmp_path_factory.mktemp("confluent") / "data")
    n.start()
    yield n
    assert n.stop() == 0, n.log()


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("codec", dataset.CODECS)
def test_round_trip(node: BrokerProcess, codec: str) -> None:
    topic = f"confluent-{codec}"
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    wait_for_topic(node.bootstrap, topic, PARTITIONS)

    delivered = produce_all(node.bootstrap, topic, codec)
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "x",
                         "enable.auto.commit": False})
    try:
        for p in range(PARTITIONS):
            count = sum(1 for part, _ in delivered.values() if part == p)
            assert consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30) == (0, count)
    finally:
        consumer.close()
    consumed = consume_all(node.bootstrap, topic, N)
    dataset.check_round_trip(N, PARTITIONS, delivered, consumed, dataset.librdkafka_partition)
    assert node.alive()
