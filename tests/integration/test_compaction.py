"""Compaction against a live node with each client library: concurrent produce and consume,
compressed batches, tombstones, keyless records refused (issue 5)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as ATopicPartition
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition

from odradek.storage.checkpoints import read_offsets
from odradek.storage.cleaner.log_cleaner import CHECKPOINT_FILE as CLEANER_CHECKPOINT
from tests.support.background import create_topic
from tests.support.broker import BrokerProcess
from tests.support.partition_reader import read_partition

SETTINGS = {
    "log.retention.check.interval.ms": "300",
    "log.cleaner.backoff.ms": "200",
    "log.segment.delete.delay.ms": "1000",
}
COMPACT = {
    "cleanup.policy": "compact",
    "segment.bytes": "8192",
    "min.cleanable.dirty.ratio": "0.01",
}
KEYS = 150
ROUNDS = 8
Rec = tuple[int, bytes, bytes | None]  # offset, key, value


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    n = BrokerProcess(tmp_path_factory.mktemp("compaction") / "data", settings=SETTINGS)
    n.start()
    try:
        yield n
    finally:
        n.stop()


def wait_until(cond: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def workload() -> Iterator[tuple[bytes, bytes | None]]:
    """ROUNDS updates of every key; in the last round every 10th key gets a tombstone."""
    for r in range(ROUNDS):
        for k in range(KEYS):
            key = b"key-%04d" % k
            if r == ROUNDS - 1 and k % 10 == 0:
                yield key, None
            else:
                yield key, b"%s=round-%d|" % (key, r) + b"v" * (k % 40)


# --- reading with each library: everything from offset 0 up to `end` --------------------------


def read_confluent(bootstrap: str, topic: str, end: int) -> list[Rec]:
    return read_partition(bootstrap, topic, end, group="rd")


def read_kafka_python(bootstrap: str, topic: str, end: int) -> list[Rec]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                      auto_offset_reset="earliest")
    tp = KTopicPartition(topic, 0)
    c.assign([tp])
    c.seek(tp, 0)
    out: list[Rec] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and c.position(tp) < end:
            for msgs in c.poll(timeout_ms=200).values():
                out += [(m.offset, m.key, m.value) for m in msgs]
    finally:
        c.close()
    return out


def read_aiokafka(bootstrap: str, topic: str, end: int) -> list[Rec]:
    async def run() -> list[Rec]:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest")
        await c.start()
        tp = ATopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        out: list[Rec] = []
        deadline = time.monotonic() + 60
        try:
            while time.monotonic() < deadline and await c.position(tp) < end:
                for msgs in (await c.getmany(tp, timeout_ms=200)).values():
                    out += [(m.offset, m.key, m.value) for m in msgs]
        finally:
            await c.stop()
        return out

    return asyncio.run(run())


READERS = {"confluent": read_confluent, "kafka-python": read_kafka_python,
           "aiokafka": read_aiokafka}


# --- producing with each library: returns offset -> (key, value) -------------------------------


def produce_confluent(bootstrap: str, topic: str, codec: str) -> dict[int, tuple[bytes, bytes | None]]:
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5,
                  "batch.size": 2048})
    got: dict[int, tuple[bytes, bytes | None]] = {}
    errors: list[str] = []

    def cb(err: KafkaError | None, m: object) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            got[m.offset()] = (m.key(), m.value())  # type: ignore[attr-defined]

    for i, (k, v) in enumerate(workload()):
        p.produce(topic, partition=0, key=k, value=v, on_delivery=cb)
        p.poll(0)
        if i % 200 == 199:
            p.flush(10)  # paces the producer so that the cleaner runs in between
    assert p.flush(30) == 0 and not errors, errors
    return got


def produce_kafka_python(bootstrap: str, topic: str, codec: str) -> dict[int, tuple[bytes, bytes | None]]:
    # idempotence (kafka-python 3's default) needs InitProducerId, which comes with issue 6
    p = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=5,
                      batch_size=2048, enable_idempotence=False)
    futures = []
    for i, (k, v) in enumerate(workload()):
        futures.append((k, v, p.send(topic, key=k, value=v, partition=0)))
        if i % 200 == 199:
            p.flush(10)
    p.flush(30)
    out = {f.get(10).offset: (k, v) for k, v, f in futures}
    p.close()
    return out


def produce_aiokafka(bootstrap: str, topic: str, codec: str) -> dict[int, tuple[bytes, bytes | None]]:
    async def run() -> dict[int, tuple[bytes, bytes | None]]:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=5,
                             max_batch_size=2048)
        await p.start()
        try:
            pending = []
            out: dict[int, tuple[bytes, bytes | None]] = {}
            for k, v in workload():
                pending.append((k, v, await p.send(topic, key=k, value=v, partition=0)))
                if len(pending) >= 200:
                    for pk, pv, fut in pending:
                        out[(await fut).offset] = (pk, pv)
                    pending = []
            for pk, pv, fut in pending:
                out[(await fut).offset] = (pk, pv)
            return out
        finally:
            await p.stop()

    return asyncio.run(run())


PRODUCERS = {"confluent": (produce_confluent, "zstd"),
             "kafka-python": (produce_kafka_python, "gzip"),
             "aiokafka": (produce_aiokafka, "lz4")}


def check_view(view: list[Rec], produced: dict[int, tuple[bytes, bytes | None]]) -> None:
    """What a reader saw: offsets increasing, each record the one produced at its offset."""
    offsets = [o for o, _, _ in view]
    assert offsets == sorted(set(offsets)), "offsets must strictly increase"
    for o, k, v in view:
        assert produced[o] == (k, v), f"offset {o} holds {k!r}={v!r}, produced {produced[o]!r}"


def latest(produced: dict[int, tuple[bytes, bytes | None]]) -> dict[bytes, bytes | None]:
    out: dict[bytes, bytes | None] = {}
    for o in sorted(produced):
        k, v = produced[o]
        out[k] = v
    return out


@pytest.mark.parametrize("library", list(PRODUCERS))
def test_compaction_under_concurrent_produce_and_consume(node: BrokerProcess, library: str) -> None:
    topic = f"compact-{library}"
    create_topic(node.bootstrap, topic, 1, COMPACT)
    total = KEYS * ROUNDS
    seen: list[Rec] = []
    reader = READERS[library]
    # the same library consumes from offset 0 while its producer writes and the cleaner runs
    consumer = threading.Thread(target=lambda: seen.extend(reader(node.bootstrap, topic, total)))
    consumer.start()
    produce, codec = PRODUCERS[library]
    produced = produce(node.bootstrap, topic, codec)
    consumer.join(90)
    assert sorted(produced) == list(range(total))
    check_view(seen, produced)
    assert seen[-1][0] == total - 1
    want = latest(produced)
    # the consumer's last view of each key is its latest value
    assert {k: v for _, k, v in seen} == want

    # the cleaner compacts everything but the active segment, then finds nothing more to do:
    # its checkpoint (the first dirty offset) reaches the active segment's base offset
    def cleaned_up_to_the_active_segment() -> bool:
        checkpoint = node.data_dir / CLEANER_CHECKPOINT
        if not checkpoint.exists():
            return False
        first_dirty = read_offsets(checkpoint).get((topic, 0))
        active = max(int(p.name[:20]) for p in (node.data_dir / f"{topic}-0").glob("*.log"))
        return first_dirty == active

    wait_until(cleaned_up_to_the_active_segment, f"compaction of {topic}")
    # compressed, compacted batches are readable by every library alike
    for name, read in READERS.items():
        view = read(node.bootstrap, topic, total)
        assert len(view) < total, name
        check_view(view, produced)
        present = {k for _, k, _ in view}
        assert {k: v for _, k, v in view} == {
            k: v for k, v in want.items() if v is not None or k in present}, name


def test_tombstones_expire_after_delete_retention(node: BrokerProcess) -> None:
    topic = "compact-tombstones"
    create_topic(node.bootstrap, topic, 1, {**COMPACT, "delete.retention.ms": "500"})
    p = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 0, "batch.size": 4096})
    errors: list[KafkaError] = []

    def cb(err: KafkaError | None, _m: object) -> None:
        if err is not None:
            errors.append(err)

    for k in range(20):
        p.produce(topic, partition=0, key=b"t%02d" % k, value=b"first", on_delivery=cb)
    for k in range(10):
        p.produce(topic, partition=0, key=b"t%02d" % k, value=None, on_delivery=cb)
    # fillers push the tombstones out of the active segment, and keep the log dirty
    for i in range(400):
        p.produce(topic, partition=0, key=b"filler-%d" % (i % 7), value=b"f" * 100,
                  on_delivery=cb)
    assert p.flush(30) == 0 and not errors, errors

    def tombstones_gone() -> bool:
        view = read_confluent(node.bootstrap, topic, 430)
        keys = {k for _, k, _ in view}
        return not any(b"t%02d" % k in keys for k in range(10))

    wait_until(tombstones_gone, "tombstones to expire")
    view = read_confluent(node.bootstrap, topic, 430)
    kv = {k: v for _, k, v in view}
    assert all(kv[b"t%02d" % k] == b"first" for k in range(10, 20))


def test_keyless_records_refused_on_compacted_topics(node: BrokerProcess) -> None:
    topic = "compact-keyless"
    create_topic(node.bootstrap, topic, 1, COMPACT)
    p = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 0, "retries": 0})
    errors: list[KafkaError] = []
    p.produce(topic, partition=0, key=None, value=b"no key",
              on_delivery=lambda e, m: errors.append(e))
    p.flush(30)  # its own batch: Kafka refuses a whole batch holding one keyless record
    p.produce(topic, partition=0, key=b"k", value=b"keyed",
              on_delivery=lambda e, m: errors.append(e))
    p.flush(30)
    assert errors[0] is not None and errors[0].code() == KafkaError.INVALID_RECORD
    assert errors[1] is None
    view = read_confluent(node.bootstrap, topic, 1)
    assert view == [(0, b"k", b"keyed")]


def test_confluent_fails_exactly_the_keyless_records(node: BrokerProcess) -> None:
    # KIP-467: one batch of 100, 10 without a key; Produce v8+ names those 10 in record_errors.
    # librdkafka fails them with INVALID_RECORD and the 90 others with
    # _INVALID_DIFFERENT_RECORD (not appended: the batch is refused whole, as in Kafka)
    topic = "compact-record-errors"
    create_topic(node.bootstrap, topic, 1, COMPACT)
    p = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 30_000, "retries": 0,
                  "batch.num.messages": 1000})
    results: dict[int, KafkaError | None] = {}
    for i in range(100):
        p.produce(topic, partition=0, key=None if i % 10 == 7 else b"k%d" % i, value=b"v%d" % i,
                  on_delivery=lambda e, m: results.__setitem__(int(m.value()[1:]), e))
    assert p.flush(30) == 0
    failed = {i for i, e in results.items()
              if e is not None and e.code() == KafkaError.INVALID_RECORD}
    assert failed == {i for i in range(100) if i % 10 == 7}
    others = {e.code() if e else None for i, e in results.items() if i not in failed}
    assert others == {KafkaError._INVALID_DIFFERENT_RECORD}
    p.produce(topic, partition=0, key=b"after", value=b"after")
    p.flush(30)
    assert read_confluent(node.bootstrap, topic, 1) == [(0, b"after", b"after")]


def test_kafka_python_fails_exactly_the_keyless_records(node: BrokerProcess) -> None:
    from kafka.errors import InvalidRecordError
    from kafka.errors import KafkaError as KPError
    topic = "compact-record-errors-kp"
    create_topic(node.bootstrap, topic, 1, COMPACT)
    p = KafkaProducer(bootstrap_servers=node.bootstrap, linger_ms=30_000, retries=0,
                      batch_size=1 << 20)
    try:
        futures = [p.send(topic, partition=0, key=None if i % 10 == 2 else b"k%d" % i,
                          value=b"v%d" % i) for i in range(100)]
        p.flush(30)
    finally:
        p.close()
    errors = {i: f.exception for i, f in enumerate(futures)}
    assert all(f.is_done for f in futures)
    bad = {i for i, e in errors.items() if isinstance(e, InvalidRecordError)}
    assert bad == {i for i in range(100) if i % 10 == 2}
    assert "without key" in str(errors[2])
    assert all(isinstance(e, KPError) and not isinstance(e, InvalidRecordError)
               for i, e in errors.items() if i not in bad)


def test_consumer_offsets_stay_bounded_under_steady_commits(tmp_path_factory: pytest.TempPathFactory) -> None:
    seg = 16_384
    n = BrokerProcess(tmp_path_factory.mktemp("offsets") / "data", settings={
        **SETTINGS, "offsets.topic.num.partitions": "1", "offsets.topic.segment.bytes": str(seg)})
    n.start()
    try:
        create_topic(n.bootstrap, "committed", 1)
        c = Consumer({"bootstrap.servers": n.bootstrap, "group.id": "steady-committer",
                      "enable.auto.commit": False})
        c.assign([TopicPartition("committed", 0, 0)])
        part = n.data_dir / "__consumer_offsets-0"
        try:
            for i in range(4_000):  # ~100 B of __consumer_offsets per commit: ~25 segments
                c.commit(offsets=[TopicPartition("committed", 0, i)], asynchronous=False)
            assert c.committed([TopicPartition("committed", 0)], timeout=30)[0].offset == 3_999
        finally:
            c.close()
        # compaction keeps one record per key (group, partition) beyond the active segment
        wait_until(lambda: sum(p.stat().st_size for p in part.glob("*.log")) <= 3 * seg,
                   "__consumer_offsets to be compacted")
        assert (n.data_dir / "cleaner-offset-checkpoint").exists()
    finally:
        n.stop()
