"""Idempotent producers against a node whose connections are cut mid-request, and across
node restarts and kill -9: no duplicates, no gaps, order kept per partition."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker import BrokerProcess
from tests.support.fault_proxy import FaultProxy
from tests.support.jepsen_checker import History, Send, check

PARTITIONS = 3


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[tuple[BrokerProcess, FaultProxy]]:
    """A node that advertises a fault proxy in front of it: every client connection,
    bootstrap and after, goes through the proxy."""
    node = BrokerProcess(tmp_path / "data")
    proxy = FaultProxy(node.port, seed=6).start()
    node.settings["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{proxy.port}"
    proxy.cutting.clear()
    node.start()
    try:
        yield node, proxy
    finally:
        proxy.stop()
        node.stop() if node.alive() else node.kill9()


def create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(30)


def read_all(bootstrap: str, topic: str) -> list[tuple[int, int, str]]:
    """Every record of every partition, read_committed, up to each end offset."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic_ns()}",
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                for p in range(PARTITIONS)}
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        out: list[tuple[int, int, str]] = []
        pos = dict.fromkeys(ends, 0)
        deadline = time.monotonic() + 60
        while any(pos[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            out.append((m.partition(), m.offset(), m.value().decode()))
            pos[m.partition()] = m.offset() + 1
        return out
    finally:
        c.close()


def confluent_idempotent(bootstrap: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                     "linger.ms": 2, "batch.num.messages": 50, "message.timeout.ms": 120000,
                     "retry.backoff.ms": 20, "reconnect.backoff.ms": 20,
                     "reconnect.backoff.max.ms": 200, "socket.timeout.ms": 10000})


def produce_confluent(p: Producer, topic: str, h: History, start: int, count: int,
                      producer: str = "p") -> None:
    def report(err: object, msg: object, send: Send) -> None:
        send.outcome = "ok" if err is None else "fail"

    for i in range(start, start + count):
        part = i % PARTITIONS
        s = Send(part, f"{producer}-{i}", outcome="info", producer=producer, seq=i)
        h.sends.append(s)
        p.produce(topic, s.value.encode(), partition=part,
                  on_delivery=lambda err, msg, s=s: report(err, msg, s))
        if i % 250 == 249:
            # paced so that the run spans many connections (and cuts)
            p.flush(120)
    assert p.flush(120) == 0


def assert_clean(h: History, bootstrap: str, topic: str) -> None:
    h.final = read_all(bootstrap, topic)
    assert all(s.outcome == "ok" for s in h.sends), [s for s in h.sends if s.outcome != "ok"][:5]
    assert check(h) == {}
    assert sorted(v for _, _, v in h.final) == sorted(s.value for s in h.sends)


def test_confluent_idempotent_through_cut_connections(proxied: tuple[BrokerProcess, FaultProxy]) -> None:
    _node, proxy = proxied
    bootstrap = f"127.0.0.1:{proxy.port}"
    create_topic(bootstrap, "idem-c")
    h = History()
    p = confluent_idempotent(bootstrap)
    proxy.cutting.set()
    produce_confluent(p, "idem-c", h, 0, 6000)
    proxy.cutting.clear()
    assert proxy.cuts >= 5
    assert_clean(h, bootstrap, "idem-c")


def test_kafka_python_idempotent_through_cut_connections(
        proxied: tuple[BrokerProcess, FaultProxy]) -> None:
    from kafka import KafkaProducer

    _node, proxy = proxied
    bootstrap = f"127.0.0.1:{proxy.port}"
    create_topic(bootstrap, "idem-k")
    h = History()
    p = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all",
                      linger_ms=2, retries=1000, retry_backoff_ms=20, request_timeout_ms=10000,
                      reconnect_backoff_ms=20, reconnect_backoff_max_ms=200,
                      delivery_timeout_ms=120000, batch_size=2000)
    proxy.cutting.set()
    futures = []
    for i in range(3000):
        if i % 60 == 59:
            p.flush(120)
        part = i % PARTITIONS
        s = Send(part, f"k-{i}", outcome="info", producer="k", seq=i)
        h.sends.append(s)
        futures.append((s, p.send("idem-k", s.value.encode(), partition=part)))
    p.flush(120)
    for s, f in futures:
        try:
            f.get(60)
            s.outcome = "ok"
        except Exception:
            s.outcome = "fail"
    p.close(10)
    proxy.cutting.clear()
    assert proxy.cuts >= 5
    assert_clean(h, bootstrap, "idem-k")


def test_idempotence_survives_restart_and_kill9(tmp_path: Path) -> None:
    """The producer keeps its id across node restarts; batches retried after a clean restart
    or a kill -9 are recognised from the rebuilt producer state (snapshot + log scan)."""
    node = BrokerProcess(tmp_path / "data", settings={"log.segment.bytes": "65536"})
    node.start()
    try:
        create_topic(node.bootstrap, "idem-r")
        h = History()
        p = confluent_idempotent(node.bootstrap)
        produce_confluent(p, "idem-r", h, 0, 2000)
        node.restart()
        produce_confluent(p, "idem-r", h, 2000, 2000)
        for round_ in range(2):
            base = 4000 + round_ * 3000
            for i in range(base, base + 3000):
                part = i % PARTITIONS
                s = Send(part, f"p-{i}", outcome="info", seq=i)
                h.sends.append(s)
                p.produce("idem-r", s.value.encode(), partition=part,
                          on_delivery=lambda err, msg, s=s: setattr(
                              s, "outcome", "ok" if err is None else "fail"))
                if i == base + 1500:
                    p.poll(0.05)
                    node.kill9()
                    node.start()
                if i % 100 == 0:
                    p.poll(0.01)
            assert p.flush(120) == 0
        assert (tmp_path / "data" / "idem-r-0").is_dir()
        assert list((tmp_path / "data" / "idem-r-0").glob("*.snapshot"))
        assert_clean(h, node.bootstrap, "idem-r")
    finally:
        node.stop() if node.alive() else node.kill9()
