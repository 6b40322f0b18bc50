"""Issue 14: a real 3-node cluster (combined roles, real processes on loopback) with RF=3
topics, produced to and consumed from by confluent-kafka, kafka-python, aiokafka and kcat;
leaders spread over the nodes; `odradek cluster describe`, `topic describe` and
`partitions elect-leaders` against it. One cluster for the whole module."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.system.cluster_support import Cluster, running_cluster, wait_until

PARTITIONS = 6
N = 3000
ODRADEK = [sys.executable, "-m", "odradek.cli.main"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("cluster3") / "c", 3) as c:
        yield c


def create(cluster: Cluster, topic: str, partitions: int = PARTITIONS, rf: int = 3,
           **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, rf, config=configs)])
    futures[topic].result(60)
    cluster.wait_isr(topic, rf)


def consume_all(bootstrap: str, topic: str, count: int, group: str) -> list[tuple[int, int, bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    out: list[tuple[int, int, bytes]] = []

    def more() -> bool:
        for m in c.consume(500, 1.0):
            if m.error() is None:
                out.append((m.partition(), m.offset(), m.value()))
        return len(out) >= count

    try:
        wait_until(more, f"{count} records of {topic}", 120)
    finally:
        c.close()
    return out


def odradek(*args: str, bootstrap: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ODRADEK, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "ODRADEK_BOOTSTRAP": bootstrap})


@pytest.mark.timeout(300)
def test_confluent_kafka_rf3_leaders_spread(cluster: Cluster) -> None:
    create(cluster, "rf3-confluent")
    parts = cluster.partitions("rf3-confluent")
    assert sorted(parts) == list(range(PARTITIONS))
    assert all(sorted(p["replicas"]) == [1, 2, 3] for p in parts.values())
    assert {p["leader"] for p in parts.values()} == {1, 2, 3}  # leaders spread over the nodes
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                  "enable.idempotence": True, "linger.ms": 5})
    acked: list[tuple[int, int]] = []

    def report(err: object, msg: object) -> None:
        assert err is None, err
        acked.append((msg.partition(), msg.offset()))  # type: ignore[attr-defined]

    for i in range(N):
        p.produce("rf3-confluent", value=str(i).encode(), key=str(i).encode(), on_delivery=report)
        p.poll(0)
    assert p.flush(60) == 0
    assert len(acked) == N
    got = consume_all(cluster.bootstrap, "rf3-confluent", N, "g-confluent")
    assert sorted(int(v) for _, _, v in got) == list(range(N))
    # every replica holds every record: the ISR stayed full and the HW covers them all
    cluster.wait_isr("rf3-confluent", 3)


@pytest.mark.timeout(300)
def test_kafka_python_and_aiokafka(cluster: Cluster) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    create(cluster, "rf3-python", 3)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap.split(","), acks="all")
    for i in range(500):
        producer.send("rf3-python", str(i).encode())
    producer.flush(60)
    producer.close()

    async def aio() -> list[int]:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

        prod = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
        await prod.start()
        try:
            for i in range(500, 1000):
                await prod.send_and_wait("rf3-python", str(i).encode())
        finally:
            await prod.stop()
        cons = AIOKafkaConsumer("rf3-python", bootstrap_servers=cluster.bootstrap,
                                auto_offset_reset="earliest", group_id="g-aio")
        await cons.start()
        seen: list[int] = []
        try:
            while len(seen) < 1000:
                batch = await asyncio.wait_for(cons.getmany(timeout_ms=1000), 120)
                for msgs in batch.values():
                    seen += [int(m.value) for m in msgs]
        finally:
            await cons.stop()
        return seen

    assert sorted(asyncio.run(aio())) == list(range(1000))
    consumer = KafkaConsumer("rf3-python", bootstrap_servers=cluster.bootstrap.split(","),
                             auto_offset_reset="earliest", group_id="g-kafka-python",
                             consumer_timeout_ms=20000)
    seen: list[int] = []
    for m in consumer:  # ends at 1000 records, or after 20 s without one
        seen.append(int(m.value))
        if len(seen) == 1000:
            break
    seen.sort()
    consumer.close()
    assert seen == list(range(1000))


@pytest.mark.timeout(300)
def test_kcat(cluster: Cluster, tmp_path: Path) -> None:
    create(cluster, "rf3-kcat", 3)
    src = tmp_path / "in.txt"
    src.write_text("".join(f"line-{i}\n" for i in range(2000)))
    produce = subprocess.run(["kcat", "-b", cluster.bootstrap, "-P", "-t", "rf3-kcat",
                              "-X", "acks=all", "-l", str(src)],
                             capture_output=True, text=True, timeout=120)
    assert produce.returncode == 0, produce.stderr
    listing = json.loads(subprocess.run(["kcat", "-b", cluster.bootstrap, "-L", "-J", "-t",
                                         "rf3-kcat"], capture_output=True, text=True,
                                        timeout=60).stdout)
    assert sorted(b["id"] for b in listing["brokers"]) == [1, 2, 3]
    out = subprocess.run(["kcat", "-b", cluster.bootstrap, "-C", "-t", "rf3-kcat", "-e",
                          "-o", "beginning", "-f", "%s\n"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert sorted(out.stdout.split()) == sorted(f"line-{i}" for i in range(2000))


@pytest.mark.timeout(300)
def test_tools(cluster: Cluster) -> None:
    create(cluster, "rf3-tools", 3)
    described = odradek("cluster", "describe", "--format", "json", bootstrap=cluster.bootstrap)
    assert described.returncode == 0, described.stderr
    state = json.loads(described.stdout)
    assert [b["id"] for b in state["brokers"]] == [1, 2, 3]
    assert not any(b["fenced"] for b in state["brokers"])
    q = state["quorum"]
    assert q["leader_id"] in (1, 2, 3) and q["leader_epoch"] >= 1 and q["high_watermark"] > 0
    assert sorted(v["node_id"] for v in q["voters"]) == [1, 2, 3]
    text = odradek("cluster", "describe", bootstrap=cluster.bootstrap).stdout
    assert "LeaderId:" in text and "HighWatermark:" in text and "unfenced" in text
    topic = odradek("topic", "describe", "rf3-tools", bootstrap=cluster.bootstrap)
    assert topic.returncode == 0, topic.stderr
    lines = topic.stdout.splitlines()
    assert "ReplicationFactor: 3" in lines[0]
    assert lines[-1] == "Partitions: 3\tOffline: 0\tUnderReplicated: 0"
    elect = odradek("partitions", "elect-leaders", "--topic", "rf3-tools", "--partition", "0",
                    bootstrap=cluster.bootstrap)
    assert elect.returncode == 0, elect.stdout + elect.stderr
    assert "rf3-tools-0" in elect.stdout


@pytest.mark.timeout(300)
def test_partitions_reassign(cluster: Cluster, tmp_path: Path) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("moving", 1, 2)])["moving"].result(60)
    old = cluster.wait_isr("moving", 2)[0]["replicas"]
    new = [old[1], ({1, 2, 3} - set(old)).pop()]  # one replica moves to the third node
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(200):
        p.produce("moving", str(i).encode())
    assert p.flush(60) == 0
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "moving", "partition": 0, "replicas": new}]}))
    started = odradek("partitions", "reassign", "--plan", str(plan), "--wait",
                      bootstrap=cluster.bootstrap)
    assert started.returncode == 0, started.stdout + started.stderr
    assert "Reassignment of partition moving-0 is completed." in started.stdout
    part = wait_until(lambda: (lambda q: q if sorted(q["isr"]) == sorted(new) else None)(
        cluster.partitions("moving")[0]), f"moving-0 on replicas {new}", 60, cluster)
    assert sorted(part["replicas"]) == sorted(new)
    got = consume_all(cluster.bootstrap, "moving", 200, "g-moving")
    assert sorted(int(v) for _, _, v in got) == list(range(200))
    verify = odradek("partitions", "reassign", "--plan", str(plan), "--verify",
                     bootstrap=cluster.bootstrap)
    assert verify.returncode == 0, verify.stdout + verify.stderr


@pytest.mark.timeout(300)
def test_bad_cluster_requests_get_kafka_errors(cluster: Cluster) -> None:
    """A registration reusing a live broker's id and an AlterPartition with stale epochs,
    sent to the active controller's listener, get Kafka's errors; the cluster stays healthy."""
    import uuid

    from odradek.broker.admin_calls import call
    from odradek.protocol.errors import ErrorCode

    create(cluster, "rf3-bad", 1)
    leader = cluster.quorum_leader()
    controller = f"127.0.0.1:{cluster.node(leader).spec.controller_port}"
    dup = call(controller, 62, 4, {
        "broker_id": 1, "cluster_id": cluster.local.cluster_id, "incarnation_id": uuid.uuid4(),
        "listeners": [{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 1,
                       "security_protocol": 0}],
        "features": [{"name": "metadata.version", "min_supported_version": 1,
                      "max_supported_version": 21},
                     {"name": "transaction.version", "min_supported_version": 0,
                      "max_supported_version": 2}],
        "rack": None, "is_migrating_zk_broker": False, "log_dirs": [],
        "previous_broker_epoch": -1})
    assert ErrorCode(int(dup.error_code)) == ErrorCode.duplicate_broker_registration
    other = call(controller, 62, 4, {
        "broker_id": 9, "cluster_id": "AAAAAAAAAAAAAAAAAAAAAA", "incarnation_id": uuid.uuid4(),
        "listeners": [], "features": [], "rack": None, "is_migrating_zk_broker": False,
        "log_dirs": [], "previous_broker_epoch": -1})
    assert ErrorCode(int(other.error_code)) == ErrorCode.inconsistent_cluster_id
    part = cluster.partitions("rf3-bad")[0]
    topic_id = call(cluster.bootstrap, 3, 12, {
        "topics": [{"name": "rf3-bad", "topic_id": None}], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False}).topics[0].topic_id
    stale = call(controller, 56, 3, {"broker_id": part["leader"], "broker_epoch": 0, "topics": [
        {"topic_id": topic_id, "partitions": [{
            "partition_index": 0, "leader_epoch": part["leader_epoch"],
            "new_isr_with_epochs": [{"broker_id": part["leader"], "broker_epoch": -1}],
            "leader_recovery_state": 0, "partition_epoch": 0}]}]})
    assert ErrorCode(int(stale.error_code)) == ErrorCode.stale_broker_epoch, stale
    state = cluster.wait_ready()
    assert not any(b["fenced"] for b in state["brokers"])
    assert cluster.partitions("rf3-bad")[0]["isr"] == part["isr"]
