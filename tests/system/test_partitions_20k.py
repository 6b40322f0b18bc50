"""Issue 22, point 5: 20,000 partitions, each with data, created at runtime on a node under
this machine's 20,000-fd limit. The node serves them, restarts after SIGTERM and after kill -9,
and serves them again, within its fd limit throughout. One node shared by every step: creating
20,000 partitions is the expensive part (minutes on this machine)."""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer

from tests.support.broker import BrokerProcess

TOPICS = 40
PER_TOPIC = 500  # 20,000 partitions
NAMES = [f"wide-{i}" for i in range(TOPICS)]


def fd_count(node: BrokerProcess) -> int:
    assert node.proc is not None
    return len(os.listdir(f"/proc/{node.proc.pid}/fd"))


def create_all(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for name in NAMES:  # 500 partitions a CreateTopics
        admin.create_topics([NewTopic(name, PER_TOPIC, 1)], operation_timeout=120)[name].result(120)
    deadline = time.monotonic() + 300
    while True:
        md = admin.list_topics(timeout=60)
        if all(n in md.topics and len(md.topics[n].partitions) == PER_TOPIC
               and all(p.leader >= 0 for p in md.topics[n].partitions.values()) for n in NAMES):
            return
        if time.monotonic() >= deadline:
            pytest.fail("not every partition has a leader")
        time.sleep(1)


def produce_round(bootstrap: str, round_: int) -> None:
    """One record to every partition, its value naming where it belongs."""
    # kafka-python, not librdkafka: librdkafka sends one partition per ProduceRequest
    # (confluentinc/librdkafka#1700), 20,000 round trips five at a time (minutes under
    # load); this producer puts every ready partition led by the node in one request
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True,
                      linger_ms=50, request_timeout_ms=120_000,
                      delivery_timeout_ms=300_000)
    try:
        futures = [p.send(name, value=f"{name}|{part}|{round_}".encode(), partition=part)
                   for name in NAMES for part in range(PER_TOPIC)]
        p.flush(300)
        errors = [str(f.exception) for f in futures if not f.succeeded()]
        assert not errors, errors[:5]
    finally:
        p.close(timeout=60)


def read_all(bootstrap: str, rounds: int) -> None:
    """Every partition holds exactly the records of `rounds` produce rounds, in order."""
    expected = TOPICS * PER_TOPIC * rounds
    # earliest: a reset (after a timed-out request, say) rereads instead of skipping to the
    # end; records are keyed by offset, so a reread counts once and a wrong one still shows
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wide-check",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 100,
                  "auto.offset.reset": "earliest"})
    # from offset 0 (no retention here, so it is each log's start): OFFSET_BEGINNING would
    # cost a ListOffsets request a partition, 20,000 of them, before the first fetch
    c.assign([TopicPartition(n, p, 0) for n in NAMES for p in range(PER_TOPIC)])
    seen: dict[tuple[str, int], dict[int, bytes]] = {}
    got = 0
    deadline = time.monotonic() + 600
    try:
        while got < expected:
            if time.monotonic() >= deadline:
                pytest.fail(f"read {got} of {expected} records")
            for m in c.consume(10_000, 1.0):
                if m.error() is not None:
                    raise KafkaException(m.error())
                records = seen.setdefault((m.topic(), m.partition()), {})
                if m.offset() not in records:
                    records[m.offset()] = m.value()
                    got += 1
    finally:
        c.close()
    assert len(seen) == TOPICS * PER_TOPIC
    for (name, part), records in seen.items():
        want = {r: f"{name}|{part}|{r}".encode() for r in range(rounds)}
        assert records == want, (name, part, records)


def step(what: str, began: float) -> float:
    # shown with the output of a failing run: where the minutes went
    now = time.monotonic()
    print(f"{what}: {now - began:.1f} s (load {os.getloadavg()[0]:.1f})", flush=True)
    return now


@pytest.mark.timeout(1800)
def test_20000_partitions_with_data_are_served_across_restarts(tmp_path: Path) -> None:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    # the node inherits this limit (20,000 on this machine): more partitions than fds
    assert soft <= TOPICS * PER_TOPIC, "the test means more partitions than fds"
    node = BrokerProcess(tmp_path / "data").start(timeout=120)
    try:
        t = time.monotonic()
        create_all(node.bootstrap)
        t = step("create", t)
        produce_round(node.bootstrap, 0)  # every partition written within seconds
        t = step("produce", t)
        assert fd_count(node) < soft
        read_all(node.bootstrap, 1)
        t = step("read", t)

        node.stop(timeout=300)
        t = step("SIGTERM stop", t)
        node.start(timeout=600)
        read_all(node.bootstrap, 1)
        t = step("start and read", t)

        node.kill9()
        node.start(timeout=600)
        read_all(node.bootstrap, 1)
        t = step("kill -9, start and read", t)
        produce_round(node.bootstrap, 1)
        read_all(node.bootstrap, 2)
        step("produce and read", t)
        assert fd_count(node) < soft
        log = node.log()
        assert "Too many open files" not in log and "Traceback" not in log, log[-3000:]
    finally:
        node.stop(timeout=300)
