"""aiokafka against a live node: AIOKafkaAdminClient create, 100k records per codec, back."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from tests.support import dataset
from tests.support.background import wait_for_topic
from tests.support.broker import BrokerProcess

N = 100_000
PARTITIONS = 6


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory):
    n = BrokerProcess(tmp_path_factory.mktemp("aiokafka") / "data")
    n.start()
    yield n
    assert n.stop() == 0, n.log()


async def create_topic(bootstrap: str, topic: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        resp = await admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
        assert [(t[0], t[1]) for t in resp.topic_errors] == [(topic, 0)], resp
    finally:
        await admin.close()


async def produce_all(bootstrap: str, topic: str, codec: str) -> dict[int, tuple[int, int]]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap,
                                compression_type=None if codec == "none" else codec,
                                linger_ms=50, max_batch_size=512 * 1024,
                                max_request_size=8 * 1024 * 1024, acks=1)
    await producer.start()
    try:
        futures = []
        for i in range(N):
            futures.append(await producer.send(topic, key=dataset.key(i), value=dataset.value(i),
                                               headers=dataset.headers(i)))
        await producer.flush()
        results = await asyncio.gather(*futures)
        return {i: (md.partition, md.offset) for i, md in enumerate(results)}
    finally:
        await producer.stop()


async def consume_all(bootstrap: str, topic: str, expected: int) -> list[dataset.Consumed]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                enable_auto_commit=False, fetch_max_bytes=52428800,
                                max_partition_fetch_bytes=10485760)
    await consumer.start()
    out: list[dataset.Consumed] = []
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        deadline = time.monotonic() + 150
        while len(out) < expected and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=1000, max_records=20000)
            for tp, records in batches.items():
                for r in records:
                    out.append(dataset.Consumed(tp.partition, r.offset, r.key, r.value,
                                                dataset.normalize_headers(r.headers)))
        assert len(out) == expected, f"consumed {len(out)} of {expected} records in time"
        extra = await consumer.getmany(timeout_ms=1000)
        assert not any(extra.values()), "more records than produced"
        ends = await consumer.end_offsets(tps)
        assert ends == {tp: sum(1 for c in out if c.partition == tp.partition) for tp in tps}
    finally:
        await consumer.stop()
    return out


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize("codec", dataset.CODECS)
def test_round_trip(node: BrokerProcess, codec: str) -> None:
    topic = f"aiokafka-{codec}"
    asyncio.run(create_topic(node.bootstrap, topic))
    wait_for_topic(node.bootstrap, topic, PARTITIONS)

    delivered = asyncio.run(produce_all(node.bootstrap, topic, codec))
    consumed = asyncio.run(consume_all(node.bootstrap, topic, N))
    dataset.check_round_trip(N, PARTITIONS, delivered, consumed, dataset.java_partition)
    assert node.alive()
