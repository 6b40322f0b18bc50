"""The columnar producer (odradek's own Produce client) against a real node, read back with
confluent-kafka: every record arrives once, in order, at contiguous offsets; Kafka errors
come back as errors instead of hangs; `odradek bench produce --client columnar` prints the
kafka-producer-perf-test line. Expected contents come from what the test built, never from
the tool."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator

import numpy as np
import pytest
from confluent_kafka import Consumer, TopicPartition

from odradek.client.batch_builder import Binary, build_columnar_batch, fixed_column
from odradek.client.producer_columnar import (
    ColumnarProducer,
    ProduceError,
    Settings,
)
from odradek.perf import confluent as perf
from odradek.perf.runs import run_producer_columnar
from tests.integration.cli_support import odradek, ok
from tests.integration.test_cli_bench import PRODUCER_SUMMARY
from tests.support.broker import BrokerProcess

PARTITIONS = 6
UNKNOWN_TOPIC_OR_PARTITION, MESSAGE_TOO_LARGE = 3, 10
Expected = dict[int, list[tuple[bytes | None, bytes | None]]]


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp("columnar-producer") / "data")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def _topic(node: BrokerProcess, name: str, *configs: str) -> str:
    args = ["topic", "create", name, "--partitions", str(PARTITIONS)]
    for c in configs:
        args += ["-c", c]
    ok(*args, bootstrap=node.bootstrap)
    return name


def read_all(bootstrap: str, topic: str, expected_count: int,
             timeout_s: float = 60.0) -> dict[int, list[tuple[int, bytes | None, bytes | None]]]:
    """Every record of every partition as (offset, key, value), read with confluent-kafka."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}",
                         "enable.auto.commit": False, "enable.partition.eof": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got: dict[int, list[tuple[int, bytes | None, bytes | None]]] = {
        p: [] for p in range(PARTITIONS)}
    count = 0
    deadline = time.monotonic() + timeout_s
    try:
        while count < expected_count:
            if time.monotonic() > deadline:
                pytest.fail(f"read {count} of {expected_count} records of {topic}")
            for msg in consumer.consume(10000, timeout=0.5):
                if msg.error():
                    pytest.fail(f"consumer error: {msg.error()}")
                got[msg.partition()].append((msg.offset(), msg.key(), msg.value()))
                count += 1
        # Nothing beyond what was expected.
        assert not consumer.consume(1000, timeout=1.0)
    finally:
        consumer.close()
    return got


def _mixed_batch(rng: random.Random, n: int) -> tuple[Binary, Binary,
                                                       list[tuple[bytes | None, bytes | None]]]:
    keys = [None if rng.random() < 0.2 else rng.randbytes(rng.randrange(0, 20))
            for _ in range(n)]
    values = [None if rng.random() < 0.05 else rng.randbytes(rng.choice((0, 7, 100, 9000)))
              for _ in range(n)]

    def column(items: list[bytes | None]) -> Binary:
        return Binary(b"".join(x for x in items if x is not None),
                      np.array([-1 if x is None else len(x) for x in items], np.int64))

    return column(keys), column(values), list(zip(keys, values, strict=True))


@pytest.mark.parametrize("acks", [1, -1, 0])
def test_every_record_arrives_once_in_order(node: BrokerProcess, acks: int) -> None:
    topic = _topic(node, f"columnar-acks{acks}".replace("-1", "all"))
    rng = random.Random(acks)
    expected: Expected = {p: [] for p in range(PARTITIONS)}
    with ColumnarProducer(node.bootstrap, topic, Settings(acks=acks, max_in_flight=3)) as prod:
        assert prod.partitions == list(range(PARTITIONS))
        for _round in range(4):
            batches = []
            for p in range(PARTITIONS):
                keys, values, pairs = _mixed_batch(rng, rng.randrange(1, 300))
                batches.append((p, build_columnar_batch(values, keys,
                                                        base_timestamp=int(time.time() * 1000))))
                expected[p] += pairs
            prod.send(batches)
        prod.flush()
        total = sum(len(v) for v in expected.values())
        assert prod.sent_records == total
        assert not prod.errors, prod.first_error
        assert prod.acked_records == (0 if acks == 0 else total)
    got = read_all(node.bootstrap, topic, total)
    for p in range(PARTITIONS):
        assert [o for o, _, _ in got[p]] == list(range(len(expected[p])))
        assert [(k, v) for _, k, v in got[p]] == expected[p]


@pytest.mark.parametrize("processes", [1, 2])
def test_perf_run_counts_and_stores_every_record(node: BrokerProcess, processes: int) -> None:
    topic = _topic(node, f"columnar-perf-{processes}")
    n = 20011
    result = run_producer_columnar(node.bootstrap, topic, n, 100, "1",
                                   {"batch.num.messages": "700", "batches.per.request": "4"},
                                   out=None, processes=processes)
    assert (result.records, result.errors) == (n, 0)
    got = read_all(node.bootstrap, topic, n)
    payload = perf.make_payload(100)
    assert sum(len(v) for v in got.values()) == n
    for records in got.values():
        assert [o for o, _, _ in records] == list(range(len(records)))
        assert all(k is None and v == payload for _, k, v in records)
    # Round robin per batch: every partition got batches.
    assert all(len(records) >= 700 for records in got.values())


def test_missing_topic_is_a_kafka_error(node: BrokerProcess) -> None:
    with pytest.raises(ProduceError) as err:
        ColumnarProducer(node.bootstrap, "no-such-topic")
    assert err.value.code == UNKNOWN_TOPIC_OR_PARTITION
    assert "UNKNOWN_TOPIC_OR_PARTITION" in str(err.value)


def test_partition_errors_are_counted_not_dropped(node: BrokerProcess) -> None:
    topic = _topic(node, "columnar-errors", "max.message.bytes=5000")
    ok_batch = build_columnar_batch(fixed_column(b"x" * 10, 5), base_timestamp=1)
    big_batch = build_columnar_batch(fixed_column(b"y" * 1000, 10), base_timestamp=1)
    with ColumnarProducer(node.bootstrap, topic, Settings(acks=1)) as prod:
        prod.send([(0, ok_batch), (PARTITIONS + 3, ok_batch), (2, big_batch)])
        prod.flush()
        assert prod.acked_records == 5
        assert prod.failed_records == 15
        assert prod.errors == {(PARTITIONS + 3, UNKNOWN_TOPIC_OR_PARTITION): 1,
                               (2, MESSAGE_TOO_LARGE): 1}
        assert prod.first_error is not None and "UNKNOWN_TOPIC_OR_PARTITION" in prod.first_error
    got = read_all(node.bootstrap, topic, 5)
    assert [v for _, _, v in got[0]] == [b"x" * 10] * 5


def test_refused_acks0_request_is_an_error(node: BrokerProcess) -> None:
    """With acks=0 the node answers a refused request by closing the connection (Kafka's
    way); flush's round trip finds that out instead of reporting success."""
    topic = _topic(node, "columnar-acks0-errors")
    batch = build_columnar_batch(fixed_column(b"z" * 10, 3), base_timestamp=1)
    with ColumnarProducer(node.bootstrap, topic, Settings(acks=0)) as prod:
        prod.send([(1, batch)])
        prod.flush()
        assert not prod.errors
        prod.send([(PARTITIONS + 1, batch)])
        prod.flush()
        assert prod.errors == {(-1, -1): 1}
        assert prod.first_error is not None and "closed the connection" in prod.first_error
        # A later send opens a new connection.
        prod.send([(1, batch)])
        prod.flush()
        assert prod.errors == {(-1, -1): 1}
    got = read_all(node.bootstrap, topic, 6)
    assert [o for o, _, _ in got[1]] == list(range(6))


def test_cli_prints_the_perf_test_line(node: BrokerProcess) -> None:
    for processes in ("1", "2"):
        topic = f"columnar-cli-{processes}"
        out = ok("bench", "produce", "--client", "columnar", "-t", topic, "-n", "5003",
                 "-s", "50", "--processes", processes, "-X", "batch.num.messages=600",
                 bootstrap=node.bootstrap)
        assert "# client: columnar" in out and "not confluent-kafka" in out, out
        summary = PRODUCER_SUMMARY.search(out)
        assert summary, out
        assert int(summary.group(1)) == 5003
        got = read_all(node.bootstrap, topic, 5003)
        assert all(v == perf.make_payload(50) for recs in got.values() for _, _, v in recs)


def test_cli_refuses_an_unknown_client(node: BrokerProcess) -> None:
    res = odradek("bench", "produce", "--client", "nope", bootstrap=node.bootstrap)
    assert res.returncode == 1
    assert "--client must be one of" in res.stderr


def test_idempotent_producer_bumps_its_epoch_when_the_leader_loses_its_sequence(
        node: BrokerProcess) -> None:
    """KIP-360 as librdkafka's idempotent producer does it: a batch the leader answers
    OUT_OF_ORDER_SEQUENCE_NUMBER at the head of its partition fails (counted, not sent again:
    it could duplicate), the batches behind it go again, and the producer goes on under the
    next epoch with every sequence from 0: nothing else is lost or repeated."""
    topic = _topic(node, "columnar-kip360")
    rng = random.Random(360)
    expected: Expected = {p: [] for p in range(PARTITIONS)}
    settings = Settings(acks=-1, max_in_flight=5, enable_idempotence=True)

    def one_round(prod: ColumnarProducer, lost: int | None = None) -> None:
        batches = []
        for p in range(PARTITIONS):
            keys, values, pairs = _mixed_batch(rng, rng.randrange(1, 200))
            batches.append((p, build_columnar_batch(values, keys,
                                                    base_timestamp=int(time.time() * 1000))))
            if p != lost:
                expected[p] += pairs
        prod.send(batches)

    with ColumnarProducer(node.bootstrap, topic, settings) as prod:
        assert prod.producer_id >= 0 and prod.producer_epoch == 0
        one_round(prod)
        prod.flush()
        assert not prod.errors, prod.first_error
        # the producer's and the leader's sequences of partition 0 part (what a leader that
        # lost the producer's last batches answers): its next batch is out of order
        prod._sequence[0] += 7
        one_round(prod, lost=0)
        one_round(prod)
        one_round(prod)
        prod.flush()
        assert dict(prod.errors) == {(0, 45): 1}, prod.first_error  # OUT_OF_ORDER_SEQUENCE
        assert prod.epoch_bumps == 1 and prod.producer_epoch == 1
        one_round(prod)  # every partition under the new epoch, from sequence 0
        prod.flush()
        assert dict(prod.errors) == {(0, 45): 1}, prod.first_error
        total = sum(len(v) for v in expected.values())
        assert prod.acked_records == total
    got = read_all(node.bootstrap, topic, total)
    for p in range(PARTITIONS):
        assert [o for o, _, _ in got[p]] == list(range(len(expected[p])))
        assert [(k, v) for _, k, v in got[p]] == expected[p], f"partition {p}"
