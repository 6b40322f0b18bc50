"""JBOD (issue 20): one node with three log directories (`log.dirs`), driven by real clients:
partitions spread over the directories, DescribeLogDirs per directory (kafka-python's
admin; confluent-kafka 2.16's AdminClient has no describe_log_dirs), a replica moved
between directories while an idempotent acks=all producer and a consumer run on it (every
acknowledged record read back exactly once), and a directory that fails (its path becomes
a file) taking only its own partitions offline.

The tests share one node and run in order: the failure comes last."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from kafka import KafkaAdminClient, KafkaProducer
from kafka.errors import KafkaStorageError

from tests.support import metrics
from tests.support.broker import BrokerProcess

STORAGE_ERROR = 56
MOVE_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    base = tmp_path_factory.mktemp("jbod")
    dirs = [base / "d0", base / "d1", base / "d2"]
    broker = BrokerProcess(dirs[0], settings={"log.dirs": ",".join(map(str, dirs))})
    broker.start(timeout=120)
    broker.dirs = dirs  # type: ignore[attr-defined]
    try:
        yield broker
    finally:
        broker.stop() if broker.alive() else broker.kill9()


@pytest.fixture(scope="module")
def admin(node: BrokerProcess) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=node.bootstrap, request_timeout_ms=30000)
    try:
        yield client
    finally:
        client.close()


def _get(obj: Any, name: str) -> Any:
    return obj[name] if isinstance(obj, dict) else getattr(obj, name)


def log_dirs(admin: KafkaAdminClient) -> dict[str, dict[str, Any]]:
    """path -> {"error": code, "total", "usable", "parts": {(topic, p, future): (size, lag)}}"""
    out: dict[str, dict[str, Any]] = {}
    for broker in admin.describe_log_dirs():
        results = broker["log_dirs"]
        for r in results:
            parts = {}
            for t in _get(r, "topics"):
                for p in _get(t, "partitions"):
                    parts[(_get(t, "name"), _get(p, "partition_index"),
                           bool(_get(p, "is_future_key")))] = (
                        _get(p, "partition_size"), _get(p, "offset_lag"))
            out[_get(r, "log_dir")] = {"error": _get(r, "error_code"),
                                       "total": _get(r, "total_bytes"),
                                       "usable": _get(r, "usable_bytes"), "parts": parts}
    return out


def where(admin: KafkaAdminClient, topic: str) -> dict[int, str]:
    """partition -> the directory of its current (not future) log."""
    return {p: path for path, d in log_dirs(admin).items()
            for (t, p, fut) in d["parts"] if t == topic and not fut}


def create(node: BrokerProcess, topic: str, partitions: int) -> None:
    client = AdminClient({"bootstrap.servers": node.bootstrap})
    client.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)


def wait_for(cond: Any, what: str, timeout: float = 90.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


def set_move_rate(node: BrokerProcess, value: str | None) -> None:
    """replica.alter.log.dirs.io.max.bytes.per.second on the broker (None: deleted), as
    kafka-configs sets it; returns once DescribeConfigs shows it applied."""
    client = AdminClient({"bootstrap.servers": node.bootstrap})
    op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    resource = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry(MOVE_RATE, value or "", incremental_operation=op)])
    client.incremental_alter_configs([resource])[resource].result(60)

    def applied() -> bool:
        got = client.describe_configs([ConfigResource(ResourceType.BROKER, "1")])
        entries = next(iter(got.values())).result(60)
        return entries[MOVE_RATE].value == (value or str(2**63 - 1))

    wait_for(applied, f"{MOVE_RATE}={value}")


def test_partitions_spread_over_the_directories(node: BrokerProcess,
                                                admin: KafkaAdminClient) -> None:
    dirs = [os.path.abspath(d) for d in node.dirs]  # type: ignore[attr-defined]
    ids = set()
    for d in node.dirs:  # type: ignore[attr-defined]
        props = dict(line.split("=", 1) for line in (d / "meta.properties").read_text()
                     .splitlines() if "=" in line and not line.startswith("#"))
        assert props["node.id"]
        ids.add(props["directory.id"])
        assert props["cluster.id"]
    assert len(ids) == 3  # one directory id each, same cluster and node
    clusters = {(d / "meta.properties").read_text().split("cluster.id=")[1].split()[0]
                for d in node.dirs}  # type: ignore[attr-defined]
    assert len(clusters) == 1
    before = {path: len(d["parts"]) for path, d in log_dirs(admin).items()}
    create(node, "spread", 6)
    placed = wait_for(lambda: len(where(admin, "spread")) == 6 and where(admin, "spread"),
                      "the 6 partitions in DescribeLogDirs")
    view = log_dirs(admin)
    assert sorted(view) == sorted(dirs)
    for d in view.values():
        assert d["error"] == 0 and d["total"] > 0 and 0 <= d["usable"] <= d["total"]
    # each new log went to the directory with the fewest logs: the counts stay level
    after = {path: len(d["parts"]) for path, d in view.items()}
    assert max(after.values()) - min(after.values()) <= max(
        1, max(before.values()) - min(before.values()))
    assert len(set(placed.values())) == 3
    for p, path in placed.items():
        assert (Path(path) / f"spread-{p}").is_dir()


def test_a_replica_moves_live_under_produce_and_consume(node: BrokerProcess,
                                                        admin: KafkaAdminClient) -> None:
    topic = "moving"
    create(node, topic, 1)
    source = wait_for(lambda: where(admin, topic).get(0), "the partition's directory")
    dest = next(os.path.abspath(d) for d in node.dirs  # type: ignore[attr-defined]
                if os.path.abspath(d) != source)
    acked: set[str] = set()
    errors: list[str] = []
    stop = threading.Event()
    producer = Producer({"bootstrap.servers": node.bootstrap, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 5})

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked.add(msg.value().decode().rstrip("."))

    def produce() -> None:
        i = 0
        while not stop.is_set():
            producer.produce(topic, value=f"r{i}".encode() + b"." * 2000, partition=0,
                             on_delivery=on_delivery)
            producer.poll(0)
            i += 1
            if i % 200 == 0:
                producer.flush(30)
        producer.flush(60)

    seen: list[str] = []
    seen_set: set[str] = set()
    consumed = threading.Event()  # set by the test once every acknowledged record was read
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "jbod-unused",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])

    def consume() -> None:
        while not consumed.is_set():
            m = consumer.poll(0.2)
            if m is not None and not m.error():
                value = m.value().decode().rstrip(".")
                seen.append(value)
                seen_set.add(value)

    threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
    for t in threads:
        t.start()
    try:
        wait_for(lambda: len(acked) >= 3000, "3000 acknowledged records before the move")
        # the moves' io quota, low: the copy cannot finish while it holds, so DescribeLogDirs
        # shows the future replica whatever the machine's speed
        set_move_rate(node, "100000")
        result = admin.alter_replica_log_dirs({(topic, 0, 1): dest})
        assert [getattr(e, "errno", 0) for e in result.values()] == [0], result
        future = wait_for(lambda: log_dirs(admin)[dest]["parts"].get((topic, 0, True)),
                          "the future replica in DescribeLogDirs")
        assert future[1] > 0  # its offset lag behind the current log
        assert (topic, 0, False) in log_dirs(admin)[source]["parts"]
        set_move_rate(node, None)  # the quota lifted: the move catches up and swaps

        def moved() -> bool:
            view = log_dirs(admin)
            return ((topic, 0, False) in view[dest]["parts"]
                    and not any((topic, 0, True) in d["parts"] for d in view.values()))

        wait_for(moved, "the replica in its new directory")
        n = len(acked)
        wait_for(lambda: len(acked) >= n + 1000, "1000 more records after the move")
    finally:
        stop.set()
        threads[0].join(120)  # the producer flushed: every callback has run
        try:
            wait_for(lambda: seen_set >= acked, "every acknowledged record read back")
        finally:
            consumed.set()
            threads[1].join(120)
            consumer.close()
    assert errors == []
    assert not (Path(source) / f"{topic}-0").exists()
    assert (Path(dest) / f"{topic}-0").is_dir()
    # every acknowledged record read back, exactly once
    assert len(seen) == len(set(seen)), "a record was read twice"
    assert set(seen) >= acked


def test_a_failed_directory_takes_only_its_partitions_offline(
        node: BrokerProcess, admin: KafkaAdminClient) -> None:
    topic = "failing"
    create(node, topic, 6)
    placed = wait_for(lambda: len(where(admin, topic)) == 6 and where(admin, topic),
                      "the partitions placed")
    victim = os.path.abspath(node.dirs[2])  # type: ignore[attr-defined]
    lost = sorted(p for p, d in placed.items() if d == victim)
    kept = sorted(p for p, d in placed.items() if d != victim)
    assert lost and kept
    producer = KafkaProducer(bootstrap_servers=node.bootstrap, acks=1, retries=0,
                             request_timeout_ms=30000)
    try:
        for p in placed:
            producer.send(topic, b"before", partition=p).get(60)
        # the disk goes away: the directory's path is a file now
        os.rename(victim, victim + ".gone")
        Path(victim).write_bytes(b"")

        def reported() -> bool:
            # appends go on into open files until the next checkpoint finds the directory
            # gone; then DescribeLogDirs reports it
            try:
                producer.send(topic, b"probe", partition=lost[0]).get(60)
            except KafkaStorageError:
                pass
            return log_dirs(admin)[victim]["error"] == STORAGE_ERROR

        wait_for(reported, "the failed directory reported as KAFKA_STORAGE_ERROR")
        view = log_dirs(admin)
        assert view[victim]["parts"] == {}
        assert all(d["error"] == 0 for path, d in view.items() if path != victim)
        for p in lost:
            with pytest.raises(KafkaStorageError):
                producer.send(topic, b"after", partition=p).get(60)
        for p in kept:
            producer.send(topic, b"after", partition=p).get(60)
    finally:
        producer.close()
    # the other directories' partitions are read as before
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "jbod-read",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in kept])
        got: dict[int, list[bytes]] = {p: [] for p in kept}

        def read_all() -> bool:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got[m.partition()].append(m.value())
            return all(len(v) >= 2 for v in got.values())

        wait_for(read_all, "the kept partitions' records")
        assert all(v[:2] == [b"before", b"after"] for v in got.values())
    finally:
        c.close()
    assert node.alive()
    assert "is offline" in node.log() and victim in node.log()
    samples = metrics.scrape(node.admin_url)
    assert metrics.value(samples, "kafka_log_logmanager_offlinelogdirectorycount") == 1
    assert metrics.value(samples, "kafka_log_logmanager_logdirectoryoffline",
                         logdirectory=str(node.dirs[2])) == 1  # type: ignore[attr-defined]
    assert metrics.value(samples, "kafka_log_logmanager_logdirectoryoffline",
                         logdirectory=str(node.dirs[1])) == 0  # type: ignore[attr-defined]
    assert metrics.value(samples, "kafka_server_replicamanager_offlinereplicacount") >= len(lost)


def test_a_restart_with_the_failed_directory_serves_the_others(
        node: BrokerProcess, admin: KafkaAdminClient) -> None:
    topic = "failing"
    victim = os.path.abspath(node.dirs[2])  # type: ignore[attr-defined]
    placed_before = {p: d for p, d in where(admin, topic).items()}
    kept = sorted(placed_before)
    lost = sorted(set(range(6)) - set(kept))
    assert lost
    node.stop()
    node.start(timeout=120)  # the directory is still a file: recovery reads the others
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap, request_timeout_ms=30000)
    try:
        _after_restart(node, admin, topic, victim, placed_before, kept, lost)
    finally:
        admin.close()


def _after_restart(node: BrokerProcess, admin: KafkaAdminClient, topic: str, victim: str,
                   placed_before: dict[int, str], kept: list[int], lost: list[int]) -> None:
    assert placed_before == {p: d for p, d in where(admin, topic).items()}
    assert log_dirs(admin)[victim]["error"] == STORAGE_ERROR
    producer = KafkaProducer(bootstrap_servers=node.bootstrap, acks=1, retries=0,
                             request_timeout_ms=30000)
    try:
        for p in lost:  # not hosted while their directory is offline (Kafka's offline replicas)
            with pytest.raises(KafkaStorageError):
                producer.send(topic, b"again", partition=p).get(60)
        for p in kept:
            producer.send(topic, b"again", partition=p).get(60)
    finally:
        producer.close()
    # a new topic goes to the online directories (Kafka's isNew: no log of it can be offline)
    create(node, "fresh", 2)
    placed = wait_for(lambda: len(where(admin, "fresh")) == 2 and where(admin, "fresh"),
                      "the new topic's partitions")
    assert victim not in placed.values()
    assert "unusable at start" in node.log() or "is offline" in node.log()
