"""kafka-python against a live node: KafkaAdminClient create, 100k records per codec, back."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient

from tests.support import dataset
from tests.support.background import wait_for_topic
from tests.support.broker import BrokerProcess

N = 100_000
PARTITIONS = 6


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory):
    n = BrokerProcess(tmp_path_factory.mktemp("kafka-python") / "data")
    n.start()
    yield n
    assert n.stop() == 0, n.log()


def produce_all(bootstrap: str, topic: str, codec: str) -> dict[int, tuple[int, int]]:
    producer = KafkaProducer(bootstrap_servers=bootstrap,
                             compression_type=None if codec == "none" else codec,
                             linger_ms=50, batch_size=512 * 1024, max_request_size=8 * 1024 * 1024,
                             acks=1)
    try:
        futures = [producer.send(topic, key=dataset.key(i), value=dataset.value(i),
                                 headers=dataset.headers(i)) for i in range(N)]
        producer.flush(120)
        delivered: dict[int, tuple[int, int]] = {}
        for i, f in enumerate(futures):
            md = f.get(timeout=60)
            delivered[i] = (md.partition, md.offset)
        return delivered
    finally:
        producer.close(30)


def consume_all(bootstrap: str, topic: str, expected: int) -> list[dataset.Consumed]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             fetch_max_bytes=52428800, max_partition_fetch_bytes=10485760,
                             max_poll_records=20000)
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    out: list[dataset.Consumed] = []
    deadline = time.monotonic() + 150
    try:
        while len(out) < expected and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=1000).items():
                for r in records:
                    out.append(dataset.Consumed(tp.partition, r.offset, r.key, r.value,
                                                dataset.normalize_headers(r.headers)))
        assert len(out) == expected, f"consumed {len(out)} of {expected} records in time"
        extra = consumer.poll(timeout_ms=1000)
        assert not any(extra.values()), "more records than produced"
        assert consumer.end_offsets(tps) == {
            tp: sum(1 for c in out if c.partition == tp.partition) for tp in tps}
        assert consumer.beginning_offsets(tps) == dict.fromkeys(tps, 0)
    finally:
        consumer.close()
    return out


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize("codec", dataset.CODECS)
def test_round_trip(node: BrokerProcess, codec: str) -> None:
    topic = f"kafka-python-{codec}"
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        result = admin.create_topics({topic: {"num_partitions": PARTITIONS,
                                              "replication_factor": 1}})
        assert [t["error_code"] for t in result["topics"]] == [0], result
    finally:
        admin.close()
    wait_for_topic(node.bootstrap, topic, PARTITIONS)

    delivered = produce_all(node.bootstrap, topic, codec)
    consumed = consume_all(node.bootstrap, topic, N)
    dataset.check_round_trip(N, PARTITIONS, delivered, consumed, dataset.java_partition)
    assert node.alive()
