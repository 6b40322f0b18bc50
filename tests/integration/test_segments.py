"""A topic with a small segment.bytes: fetch and ListOffsets (by timestamp) across segments."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition

from tests.support.background import create_topic
from tests.support.broker import BrokerProcess
from tests.support.segments import check_partition_dir

TOPIC = "small-segments"
PARTITIONS = 2
N = 3000
T0 = int(time.time() * 1000) - 3_600_000


def timestamp(p: int, i: int) -> int:
    """Partition 0: strictly increasing; partition 1: every 7th record steps back a second."""
    ts = T0 + 10 * i
    if p == 1 and i % 7 == 3:
        ts -= 1000
    return ts


def value(p: int, i: int) -> bytes:
    return b"%d-%d|" % (p, i) + bytes((i + j) % 251 for j in range(150))


def first_offset_at_or_after(p: int, t: int) -> int:
    return next((i for i in range(N) if timestamp(p, i) >= t), -1)


def targets(p: int) -> list[int]:
    ts = [timestamp(p, i) for i in range(N)]
    picks = [T0 - 60_000, T0 - 1, T0, T0 + 1, max(ts), max(ts) + 1, max(ts) + 3_600_000]
    for i in range(0, N, 97):
        picks += [ts[i], ts[i] - 1, ts[i] + 1, ts[i] + 5]
    return picks


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory):
    n = BrokerProcess(tmp_path_factory.mktemp("segments") / "data")
    n.start()
    create_topic(n.bootstrap, TOPIC, PARTITIONS, {"segment.bytes": "16384"})
    producer = Producer({"bootstrap.servers": n.bootstrap, "linger.ms": 2, "batch.size": 4096,
                         "acks": "all"})
    errors: list[str] = []
    for i in range(N):
        for p in range(PARTITIONS):
            producer.produce(TOPIC, partition=p, key=b"%d" % i, value=value(p, i),
                             timestamp=timestamp(p, i),
                             on_delivery=lambda e, m: errors.append(str(e)) if e else None)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors[:5]
    yield n
    assert n.stop() == 0, n.log()


def test_several_segment_files_and_valid_indexes(node: BrokerProcess) -> None:
    for p in range(PARTITIONS):
        d = node.data_dir / f"{TOPIC}-{p}"
        logs = sorted(d.glob("*.log"))
        assert len(logs) >= 5, f"{d}: only {len(logs)} segments with segment.bytes=16384"
        assert all(f.stat().st_size <= 16384 + 4096 for f in logs[:-1]), "a segment grew far past segment.bytes"
        batches = check_partition_dir(d)
        assert sum(b.records for b in batches) == N


def test_consume_from_beginning_across_segments(node: BrokerProcess) -> None:
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "unused",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        got: dict[int, list[tuple[int, bytes, int]]] = {p: [] for p in range(PARTITIONS)}
        deadline = time.monotonic() + 60
        while sum(map(len, got.values())) < N * PARTITIONS and time.monotonic() < deadline:
            for m in c.consume(1000, timeout=0.5):
                assert m.error() is None, m.error()
                got[m.partition()].append((m.offset(), m.value(), m.timestamp()[1]))
        for p in range(PARTITIONS):
            assert [o for o, _, _ in got[p]] == list(range(N)), f"partition {p}: offsets"
            assert [v for _, v, _ in got[p]] == [value(p, i) for i in range(N)]
            assert [t for _, _, t in got[p]] == [timestamp(p, i) for i in range(N)]
            assert c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30) == (0, N)
    finally:
        c.close()


def test_fetch_starting_at_segment_boundaries(node: BrokerProcess) -> None:
    d = node.data_dir / f"{TOPIC}-0"
    bases = sorted(int(f.stem) for f in d.glob("*.log"))[1:6]
    starts = sorted({o for b in bases for o in (b - 1, b, b + 1)})
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "unused",
                  "enable.auto.commit": False})
    try:
        for start in starts:
            c.assign([TopicPartition(TOPIC, 0, start)])
            msgs: list = []
            deadline = time.monotonic() + 20
            while len(msgs) < 50 and time.monotonic() < deadline:
                msgs += [m for m in c.consume(50, timeout=0.5) if m.error() is None]
            assert [m.offset() for m in msgs[:50]] == list(range(start, start + 50)), start
            assert [m.value() for m in msgs[:50]] == [value(0, i) for i in range(start, start + 50)]
            c.unassign()
    finally:
        c.close()


def test_offsets_for_times_confluent(node: BrokerProcess) -> None:
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "unused",
                  "enable.auto.commit": False})
    try:
        for p in range(PARTITIONS):
            for t in targets(p):
                (r,) = c.offsets_for_times([TopicPartition(TOPIC, p, t)], timeout=30)
                assert r.error is None, r.error
                assert r.offset == first_offset_at_or_after(p, t), (p, t - T0, r.offset)
    finally:
        c.close()


def test_offsets_for_times_kafka_python(node: BrokerProcess) -> None:
    c = KafkaConsumer(bootstrap_servers=node.bootstrap, group_id=None, enable_auto_commit=False)
    try:
        for p in range(PARTITIONS):
            tp = KTopicPartition(TOPIC, p)
            for t in targets(p):
                found = c.offsets_for_times({tp: t})[tp]
                want = first_offset_at_or_after(p, t)
                if want == -1:
                    assert found is None, (p, t - T0, found)
                else:
                    assert found is not None and found.offset == want, (p, t - T0, found, want)
                    assert found.timestamp == timestamp(p, want)
            assert c.beginning_offsets([tp]) == {tp: 0}
            assert c.end_offsets([tp]) == {tp: N}
    finally:
        c.close()
