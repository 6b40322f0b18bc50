"""Issue 14: failover of a real 3-node cluster under an idempotent acks=all producer.

kill -9 of the partition leader, then of the active controller: every acknowledged record is
read back exactly once, in order; after the restarts the three replicas hold the same batches
(offsets and CRCs). SIGTERM of a leader is a controlled shutdown: leadership moves first, the
node exits 0, the producer meets only retriable errors and nothing is lost. One cluster for
the module (the tests restart what they kill).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.protocol.records import iter_batches
from tests.system.cluster_support import Cluster, running_cluster, wait_until


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("failover") / "c", 3) as c:
        yield c


class Writer:
    """An idempotent acks=all producer writing 0, 1, 2, ... in a thread; `acked` in order."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 2,
                                  "message.timeout.ms": 180000, "retry.backoff.ms": 100})
        self.acked: list[int] = []
        self.errors: list[str] = []
        self.sent = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _report(self, err: KafkaError | None, msg: object) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked.append(int(msg.value()))  # type: ignore[attr-defined]

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                self.producer.produce(self.topic, str(self.sent).encode(),
                                      on_delivery=self._report)
                self.sent += 1
            except BufferError:
                pass
            self.producer.poll(0.002)

    def start(self) -> Writer:
        self.thread.start()
        return self

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(30)
        assert self.producer.flush(180) == 0

    def wait_more(self, count: int, cluster: Cluster) -> None:
        target = len(self.acked) + count
        wait_until(lambda: len(self.acked) >= target, f"{count} more acknowledged records",
                   120, cluster)


def create(cluster: Cluster, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[
        topic].result(60)
    cluster.wait_isr(topic, 3)


def read_all(bootstrap: str, topic: str, count: int) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    c.subscribe([topic])
    out: list[int] = []

    def done() -> bool:
        for m in c.consume(1000, 1.0):
            if m.error() is None:
                out.append(int(m.value()))
        return len(out) >= count

    try:
        wait_until(done, f"{count} records of {topic}", 180)
        for m in c.consume(1000, 2.0):  # and nothing more
            if m.error() is None:
                out.append(int(m.value()))
    finally:
        c.close()
    return out


def batches(data_dir: Path, topic: str) -> list[tuple[int, int, int]]:
    """(base offset, last offset, CRC) of every batch of the partition's segments."""
    out = []
    for seg in sorted((data_dir / f"{topic}-0").glob("*.log")):
        for h, _ in iter_batches(seg.read_bytes()):
            out.append((h.base_offset, h.last_offset, h.crc))
    return out


def check_replicas_identical(cluster: Cluster, topic: str) -> None:
    def same() -> bool:
        logs = [batches(n.data_dir, topic) for n in cluster.nodes.values()]
        return bool(logs[0]) and all(x == logs[0] for x in logs)

    wait_until(same, f"the 3 replicas of {topic} byte-identical", 120, cluster)


@pytest.mark.timeout(600)
def test_kill9_leader_then_active_controller(cluster: Cluster) -> None:
    topic = "failover-kill9"
    create(cluster, topic)
    writer = Writer(cluster.bootstrap, topic).start()
    try:
        writer.wait_more(500, cluster)
        victims = [cluster.partitions(topic)[0]["leader"]]
        for _round in range(2):
            victim = victims[-1]
            cluster.kill9(victim)
            wait_until(lambda v=victim: cluster.partitions(topic)[0]["leader"] not in (v, -1),
                       f"a new leader after node {victim} died", 60, cluster)
            writer.wait_more(500, cluster)
            cluster.restart(victim)
            cluster.wait_ready()
            cluster.wait_isr(topic, 3, 120)
            writer.wait_more(300, cluster)
            # the next round kills the active controller (or the leader again if the same)
            nxt = cluster.quorum_leader()
            victims.append(nxt if nxt != victim else cluster.partitions(topic)[0]["leader"])
    finally:
        writer.finish()
    assert not writer.errors, writer.errors[:5]
    acked = writer.acked
    got = read_all(cluster.bootstrap, topic, len(acked))
    assert len(got) == len(set(got)), "a record was read twice"
    assert got == sorted(got), "records out of order"
    assert set(acked) <= set(got), "an acknowledged record was lost"
    check_replicas_identical(cluster, topic)


@pytest.mark.timeout(600)
def test_sigterm_is_a_controlled_shutdown(cluster: Cluster) -> None:
    topic = "failover-sigterm"
    create(cluster, topic)
    writer = Writer(cluster.bootstrap, topic).start()
    try:
        writer.wait_more(500, cluster)
        leader = cluster.partitions(topic)[0]["leader"]
        assert cluster.sigterm(leader) == 0, cluster.node(leader).log()
        log = cluster.node(leader).log()
        assert "controlled shutdown confirmed" in log, log[-3000:]
        new = cluster.partitions(topic)[0]
        assert new["leader"] not in (leader, -1)
        writer.wait_more(500, cluster)
        cluster.restart(leader)
        cluster.wait_ready()
        cluster.wait_isr(topic, 3, 120)
    finally:
        writer.finish()
    assert not writer.errors, writer.errors[:5]
    got = read_all(cluster.bootstrap, topic, len(writer.acked))
    assert len(got) == len(set(got)) and got == sorted(got)
    assert set(writer.acked) <= set(got)
