"""A clean restart (SIGTERM, start again on the same data dir and port) keeps everything."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from tests.support.background import wait_for_topic
from tests.support.broker import BrokerProcess

TOPICS = {"restart-a": 3, "restart-b": 1}
RETENTION = "123456789"


def produce(bootstrap: str, topic: str, start: int, count: int) -> list[tuple[int, int, int]]:
    """(seq, partition, offset) of each record, as the delivery reports say."""
    delivered: list[tuple[int, int, int]] = []
    errors: list[str] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            delivered.append((int(msg.value()), msg.partition(), msg.offset()))  # type: ignore[attr-defined]

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    for i in range(start, start + count):
        p.produce(topic, key=b"key%d" % (i % 11), value=b"%d" % i, headers=[("h", b"%d" % i)],
                  timestamp=1_700_000_000_000 + i, on_delivery=on_delivery)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(30) == 0
    assert not errors, errors[:5]
    return delivered


def read_all(bootstrap: str, topic: str, partitions: int) -> list[tuple]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    out: list[tuple] = []
    eof: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while len(eof) < partitions and time.monotonic() < deadline:
            for m in c.consume(1000, timeout=0.5):
                if m.error() is not None:
                    assert m.error().code() == -191, m.error()  # _PARTITION_EOF
                    eof.add(m.partition())
                    continue
                out.append((m.partition(), m.offset(), m.key(), m.value(), m.headers(),
                            m.timestamp()))
    finally:
        c.close()
    assert len(eof) == partitions, "did not reach the end of every partition"
    return sorted(out)


def describe(bootstrap: str) -> dict[str, tuple[str, int]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.describe_topics(TopicCollection(list(TOPICS)))
    return {name: (str(f.result(30).topic_id), len(f.result(30).partitions))
            for name, f in fs.items()}


def retention(bootstrap: str, topic: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ResourceType.TOPIC, topic)
    configs = admin.describe_configs([res])[res].result(30)
    return configs["retention.ms"].value


@pytest.mark.timeout(300)
def test_restart_keeps_topics_records_and_continues_offsets(tmp_path: Path) -> None:
    node = BrokerProcess(tmp_path / "data")
    node.start()
    try:
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        new = [NewTopic(t, n, 1, config={"retention.ms": RETENTION}) for t, n in TOPICS.items()]
        for f in admin.create_topics(new).values():
            f.result(30)
        for t, n in TOPICS.items():
            wait_for_topic(node.bootstrap, t, n)
        for t in TOPICS:
            produce(node.bootstrap, t, 0, 5000)
        before = {t: read_all(node.bootstrap, t, n) for t, n in TOPICS.items()}
        ids_before = describe(node.bootstrap)
        assert all(len(v) == 5000 for v in before.values())

        total = 5000
        for round_ in range(2):
            assert node.stop() == 0, f"unclean exit on SIGTERM:\n{node.log()}"
            node.start()
            for t, n in TOPICS.items():
                wait_for_topic(node.bootstrap, t, n)
            assert describe(node.bootstrap) == ids_before, "topic ids or partitions changed"
            for t in TOPICS:
                assert retention(node.bootstrap, t) == RETENTION
            after = {t: read_all(node.bootstrap, t, n) for t, n in TOPICS.items()}
            assert after == before, f"records differ after restart {round_}"

            # a new produce continues exactly after the old end of each partition
            for t, n in TOPICS.items():
                ends = {p: 0 for p in range(n)}
                for part, off, *_ in before[t]:
                    ends[part] = max(ends[part], off + 1)
                fresh = produce(node.bootstrap, t, total, 500)
                by_part: dict[int, list[int]] = {}
                for _, part, off in sorted(fresh):
                    by_part.setdefault(part, []).append(off)
                for part, offs in by_part.items():
                    assert offs == list(range(ends[part], ends[part] + len(offs))), (
                        f"{t}-{part}: new offsets {offs[:3]}... do not follow the old end {ends[part]}")
                before[t] = read_all(node.bootstrap, t, n)
                assert len(before[t]) == total + 500
            total += 500
        assert node.stop() == 0, node.log()
    finally:
        if node.alive():
            node.kill9()
