"""End-to-end smoke test: real node, real clients (confluent-kafka and kcat)."""

from __future__ import annotations

import subprocess
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker import BrokerProcess


def _create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    futures[name].result(timeout=30)
    md = admin.list_topics(name, timeout=30)
    assert len(md.topics[name].partitions) == partitions


def _consume(bootstrap: str, topic: str, partitions: int, expected: int) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "smoke",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append(msg)
    finally:
        consumer.close()
    return got


def test_confluent_kafka_round_trip(broker: BrokerProcess) -> None:
    topic = "smoke"
    _create_topic(broker.bootstrap, topic, 3)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    sent = {}
    errors = []

    def on_delivery(err, msg) -> None:
        if err is not None:
            errors.append(err)
        else:
            sent[(msg.partition(), msg.offset())] = (msg.key(), msg.value())

    for i in range(1000):
        producer.produce(topic, key=f"k{i}".encode(), value=bytes([i % 256]) * (i % 50 + 1),
                         partition=i % 3, headers=[("h", f"{i}".encode())],
                         on_delivery=on_delivery)
    assert producer.flush(30) == 0
    assert errors == []
    assert len(sent) == 1000

    got = _consume(broker.bootstrap, topic, 3, 1000)
    assert len(got) == 1000
    received = {(m.partition(), m.offset()): (m.key(), m.value()) for m in got}
    assert received == sent
    for p in range(3):
        offsets = sorted(o for (part, o) in received if part == p)
        assert offsets == list(range(len(offsets)))


def test_kcat_metadata_produce_consume(broker: BrokerProcess) -> None:
    lines = [f"line-{i}" for i in range(5)]
    subprocess.run(["kcat", "-b", broker.bootstrap, "-P", "-t", "kc", "-p", "0"],
                   input="\n".join(lines) + "\n", text=True, check=True, timeout=30)
    listing = subprocess.run(["kcat", "-b", broker.bootstrap, "-L"], capture_output=True,
                             text=True, check=True, timeout=30).stdout
    assert 'topic "kc" with 1 partitions' in listing
    assert "broker 1 at 127.0.0.1:" in listing
    out = subprocess.run(["kcat", "-b", broker.bootstrap, "-C", "-t", "kc", "-e", "-f",
                          "%o %s\\n"], capture_output=True, text=True, check=True,
                         timeout=30).stdout
    assert out.splitlines() == [f"{i} {line}" for i, line in enumerate(lines)]


def test_restart_keeps_data_and_offsets_continue(broker: BrokerProcess) -> None:
    subprocess.run(["kcat", "-b", broker.bootstrap, "-P", "-t", "again"], input="a\nb\n",
                   text=True, check=True, timeout=30)
    assert broker.stop() == 0
    broker.start()
    subprocess.run(["kcat", "-b", broker.bootstrap, "-P", "-t", "again"], input="c\n",
                   text=True, check=True, timeout=30)
    out = subprocess.run(["kcat", "-b", broker.bootstrap, "-C", "-t", "again", "-e", "-f",
                          "%o %s\\n"], capture_output=True, text=True, check=True,
                         timeout=30).stdout
    assert out.splitlines() == ["0 a", "1 b", "2 c"]


def test_uvloop_node_serves_large_fetches(tmp_path) -> None:
    """The uvloop event loop (no add_writer on transport sockets): big fetch responses still
    arrive whole, through sendfile while the socket takes them and pread + write after."""
    node = BrokerProcess(tmp_path / "data", settings={"odradek.event.loop": "uvloop"})
    node.start()
    try:
        producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 5})
        values = [bytes([i % 251]) * 2000 + i.to_bytes(4, "big") for i in range(5000)]
        for v in values:
            producer.produce("big", v, partition=0)
        assert producer.flush(30) == 0
        got = _consume(node.bootstrap, "big", 1, len(values))
        assert [m.value() for m in got] == values
        assert node.stop() == 0
    finally:
        node.kill9()
