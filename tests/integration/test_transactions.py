"""Transactions with real clients: commit and abort across topics and partitions,
read_committed vs read_uncommitted, zombie fencing, timeouts, node restarts mid-transaction,
and Kafka's error codes for bad transactional requests."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker import BrokerProcess
from tests.support.jepsen_checker import History, Poll, Send, check

PARTS = 3


def create(bootstrap: str, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(n, PARTS, 1) for n in names]).values():
        f.result(30)


def txn_producer(bootstrap: str, tid: str, **extra: object) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 1,
                  **extra})
    p.init_transactions(30)
    return p


def read(bootstrap: str, topics: list[str], committed: bool) -> list[tuple[str, int, int, str]]:
    """Everything readable now, up to each partition's end for the isolation level."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{time.monotonic_ns()}",
                  "enable.auto.commit": False,
                  "isolation.level": "read_committed" if committed else "read_uncommitted"})
    try:
        tps = [TopicPartition(t, p, 0) for t in topics for p in range(PARTS)]
        ends = {}
        for tp in tps:
            ends[(tp.topic, tp.partition)] = c.get_watermark_offsets(tp, timeout=30)[1]
        c.assign(tps)
        out = []
        pos = dict.fromkeys(ends, 0)
        deadline = time.monotonic() + 30
        idle = 0
        while time.monotonic() < deadline:
            m = c.poll(0.3)
            if m is None:
                # control records are skipped: positions may stop short of the end
                done = all(c.position([TopicPartition(t, p)])[0].offset >= ends[(t, p)]
                           for t, p in ends)
                idle += 1
                if done or idle > 6:
                    break
                continue
            if m.error():
                continue
            idle = 0
            out.append((m.topic(), m.partition(), m.offset(), m.value().decode()))
            pos[(m.topic(), m.partition())] = m.offset() + 1
        return out
    finally:
        c.close()


def values(rows: list[tuple[str, int, int, str]]) -> list[str]:
    return sorted(v for *_, v in rows)


def lso_of(bootstrap: str, topic: str, partition: int) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "lso",
                  "isolation.level": "read_committed"})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, partition), timeout=30,
                                           cached=False)[1])
    finally:
        c.close()


def test_commit_and_abort_across_topics(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    create(b, "tx-a", "tx-b")
    p = txn_producer(b, "t-commit-abort")
    h = History()
    for n, outcome in enumerate(("committed", "aborted", "committed")):
        name = f"txn{n}"
        h.txns[name] = "unknown"
        p.begin_transaction()
        for i in range(30):
            topic = "tx-a" if i % 2 else "tx-b"
            v = f"{name}-{i}"
            h.sends.append(Send(i % PARTS, v, txn=name))
            p.produce(topic, v.encode(), partition=i % PARTS)
        p.flush(30)
        if outcome == "committed":
            h.commit_invoked[name] = time.monotonic()
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
        h.txns[name] = outcome
    committed = read(b, ["tx-a", "tx-b"], True)
    uncommitted = read(b, ["tx-a", "tx-b"], False)
    want = sorted(f"txn{n}-{i}" for n in (0, 2) for i in range(30))
    assert values(committed) == want
    assert values(uncommitted) == sorted(want + [f"txn1-{i}" for i in range(30)])
    # control records take offsets but never reach the application
    offsets = {(t, part): [o for tt, pp, o, _ in uncommitted if (tt, pp) == (t, part)]
               for t in ("tx-a", "tx-b") for part in range(PARTS)}
    assert all(len(set(o)) == len(o) for o in offsets.values())
    h.final = [(0, n, v) for n, (*_, v) in enumerate(committed)]
    h.polls["rc"] = [Poll(time.monotonic(), [(hash((t, q)), o, v) for t, q, o, v in committed])]
    h.read_committed["rc"] = True
    assert check(h) == {}
    p.flush(5)


def test_zombie_is_fenced(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    create(b, "tx-z")
    old = txn_producer(b, "t-zombie")
    old.begin_transaction()
    old.produce("tx-z", b"zombie-1", partition=0)
    assert old.flush(60) == 0
    new = txn_producer(b, "t-zombie")  # fences the old instance, aborting its transaction
    new.begin_transaction()
    new.produce("tx-z", b"live-1", partition=0)
    new.commit_transaction(30)
    with pytest.raises(KafkaException):
        old.produce("tx-z", b"zombie-2", partition=1)
        old.flush(10)
        old.commit_transaction(10)
    assert values(read(b, ["tx-z"], True)) == ["live-1"]


def test_timeout_aborts_and_lso_advances(tmp_path: Path) -> None:
    # the cleanup sweep every hour: only the transaction's own deadline can abort it here
    node = BrokerProcess(tmp_path / "data", settings={
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "3600000"})
    node.start()
    try:
        b = node.bootstrap
        create(b, "tx-t")
        p = txn_producer(b, "t-timeout", **{"transaction.timeout.ms": 1500})
        p.begin_transaction()
        for i in range(5):
            p.produce("tx-t", f"stuck-{i}".encode(), partition=0)
        assert p.flush(60) == 0
        stuck_lso = lso_of(b, "tx-t", 0)
        assert stuck_lso == 0
        deadline = time.monotonic() + 30
        while lso_of(b, "tx-t", 0) == 0 and time.monotonic() < deadline:
            time.sleep(0.3)
        assert lso_of(b, "tx-t", 0) == 6  # 5 records and the abort marker
        assert read(b, ["tx-t"], True) == []
        assert len(read(b, ["tx-t"], False)) == 5
        # the producer's epoch was bumped by the abort: its commit is refused
        with pytest.raises(KafkaException):
            p.commit_transaction(30)
    finally:
        node.stop()


@pytest.mark.parametrize("crash", [False, True])
def test_node_restart_mid_transaction(tmp_path: Path, crash: bool) -> None:
    node = BrokerProcess(tmp_path / "data")
    node.start()
    try:
        b = node.bootstrap
        create(b, "tx-r")
        p = txn_producer(b, "t-restart", **{"message.timeout.ms": 60000})
        p.begin_transaction()
        for i in range(20):
            p.produce("tx-r", f"r-{i}".encode(), partition=i % PARTS)
        assert p.flush(60) == 0
        if crash:
            node.kill9()
            node.start()
        else:
            node.restart()
        # the coordinator state came back: the same transaction goes on and commits
        for i in range(20, 40):
            p.produce("tx-r", f"r-{i}".encode(), partition=i % PARTS)
        p.commit_transaction(60)
        got = values(read(b, ["tx-r"], True))
        assert got == sorted(f"r-{i}" for i in range(40))
    finally:
        node.stop() if node.alive() else node.kill9()


def test_kafka_python_transactions(broker: BrokerProcess) -> None:
    from kafka import KafkaProducer

    b = broker.bootstrap
    create(b, "tx-kp")
    p = KafkaProducer(bootstrap_servers=b, transactional_id="t-kafka-python")
    p.init_transactions()
    for n, commit in enumerate((True, False, True)):
        p.begin_transaction()
        for i in range(12):
            p.send("tx-kp", f"kp{n}-{i}".encode(), partition=i % PARTS)
        p.flush()
        if commit:
            p.commit_transaction()
        else:
            p.abort_transaction()
    p.close()
    want = sorted(f"kp{n}-{i}" for n in (0, 2) for i in range(12))
    assert values(read(b, ["tx-kp"], True)) == want
    assert len(read(b, ["tx-kp"], False)) == 36


def test_aiokafka_transactions(broker: BrokerProcess) -> None:
    import asyncio

    from aiokafka import AIOKafkaProducer

    b = broker.bootstrap
    create(b, "tx-aio")

    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=b, transactional_id="t-aiokafka")
        await p.start()
        try:
            for n, commit in enumerate((True, False)):
                await p.begin_transaction()
                for i in range(9):
                    await p.send("tx-aio", f"aio{n}-{i}".encode(), partition=i % PARTS)
                if commit:
                    await p.commit_transaction()
                else:
                    await p.abort_transaction()
        finally:
            await p.stop()

    asyncio.run(run())
    assert values(read(b, ["tx-aio"], True)) == sorted(f"aio0-{i}" for i in range(9))
    assert len(read(b, ["tx-aio"], False)) == 18


def test_read_committed_consumer_waits_for_offsets_of_an_open_transaction(
        broker: BrokerProcess) -> None:
    """KIP-447: a read_committed consumer asks for stable offsets (OffsetFetch
    require_stable) and gets none for a partition whose offset an open transaction holds;
    librdkafka retries the UNSTABLE_OFFSET_COMMIT answer until the transaction ends (here:
    until its timeout). A read_uncommitted consumer gets the committed offset at once."""
    from confluent_kafka import KafkaError

    create(broker.bootstrap, "stable-in")
    tp = TopicPartition("stable-in", 0)
    conf = {"bootstrap.servers": broker.bootstrap, "group.id": "stable-g",
            "enable.auto.commit": False}
    plain = Consumer(conf)
    plain.commit(offsets=[TopicPartition("stable-in", 0, 2)], asynchronous=False)
    producer = txn_producer(broker.bootstrap, "stable-tid")
    producer.begin_transaction()
    producer.send_offsets_to_transaction([TopicPartition("stable-in", 0, 7)],
                                         plain.consumer_group_metadata(), 30)
    plain.close()
    stable = Consumer({**conf, "isolation.level": "read_committed"})
    loose = Consumer({**conf, "isolation.level": "read_uncommitted"})
    try:
        with pytest.raises(KafkaException) as unstable:
            stable.committed([tp], timeout=3)
        assert unstable.value.args[0].code() == KafkaError._TIMED_OUT
        assert loose.committed([tp], timeout=30)[0].offset == 2
        producer.commit_transaction(30)
        assert stable.committed([tp], timeout=30)[0].offset == 7
    finally:
        stable.close()
        loose.close()
