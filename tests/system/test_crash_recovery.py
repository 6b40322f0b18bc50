"""kill -9 the node while an acks=1 producer runs: nothing acknowledged is lost or doubled.

Each round: a confluent-kafka producer sends keyed, numbered records flat out; once some have
been acknowledged the node gets SIGKILL mid-stream; the producer drops what it still holds
(so nothing is retried into the restarted node); the node restarts on the same data dir and
port. Then every acknowledged record must be at the partition and offset it was acknowledged
at, exactly once, offsets contiguous, and the segment files and their indexes valid when read
by an independent reader (tests/support/segments.py).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from tests.support.background import create_topic, wait_for_topic
from tests.support.broker import BrokerProcess
from tests.support.segments import check_partition_dir

TOPIC = "crash"
PARTITIONS = 3
ROUNDS = 3
PAD = b"." * 80


class Sender:
    """Produce numbered records in a thread until stopped; remember what was acknowledged."""

    def __init__(self, bootstrap: str, first_seq: int) -> None:
        self.next_seq = first_seq
        self.acked: dict[int, tuple[int, int]] = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 2,
                                  "enable.idempotence": False, "message.timeout.ms": 60000})
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err: object, msg: object) -> None:
        if err is None:
            with self.lock:
                self.acked[int(msg.key().split(b"-")[1])] = (msg.partition(), msg.offset())  # type: ignore[attr-defined]

    def _run(self) -> None:
        while not self.stop.is_set():
            seq = self.next_seq
            try:
                self.producer.produce(TOPIC, key=b"k%d-%d" % (seq % 101, seq),
                                      value=b"%d" % seq + PAD, on_delivery=self._on_delivery)
            except BufferError:
                self.producer.poll(0.01)
                continue
            self.next_seq += 1
            if seq % 200 == 0:
                self.producer.poll(0)

    def acked_count(self) -> int:
        self.producer.poll(0) if not self.thread.is_alive() else None
        with self.lock:
            return len(self.acked)

    def halt(self) -> None:
        """Stop sending and drop every record not yet acknowledged; no retry reaches a new node."""
        self.stop.set()
        self.thread.join(30)
        self.producer.purge(in_queue=True, in_flight=True)
        self.producer.flush(10)


def read_everything(bootstrap: str) -> dict[int, list[tuple[int, int]]]:
    """partition -> [(offset, seq)] from the beginning to the high watermark."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    out: dict[int, list[tuple[int, int]]] = {p: [] for p in range(PARTITIONS)}
    try:
        highs = {p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)
                 for p in range(PARTITIONS)}
        c.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        want = sum(h for _, h in highs.values())
        got = 0
        deadline = time.monotonic() + 120
        while got < want and time.monotonic() < deadline:
            for m in c.consume(5000, timeout=0.5):
                assert m.error() is None, m.error()
                out[m.partition()].append((m.offset(), int(m.key().split(b"-")[1])))
                assert m.value() == b"%d" % out[m.partition()][-1][1] + PAD
                got += 1
        for p, (low, high) in highs.items():
            assert low == 0, f"partition {p}: log start offset {low}"
            assert [o for o, _ in out[p]] == list(range(high)), (
                f"partition {p}: offsets not contiguous 0..{high}")
    finally:
        c.close()
    return out


def check_logs(data_dir: Path) -> None:
    for p in range(PARTITIONS):
        d = data_dir / f"{TOPIC}-{p}"
        assert d.is_dir(), f"{d} missing"
        check_partition_dir(d)


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_kill9_during_acks1_produce_loses_nothing_acknowledged(tmp_path: Path) -> None:
    node = BrokerProcess(tmp_path / "data")
    node.start()
    try:
        create_topic(node.bootstrap, TOPIC, PARTITIONS, {"segment.bytes": "262144"})
        acked: dict[int, tuple[int, int]] = {}
        next_seq = 0
        for round_ in range(ROUNDS):
            sender = Sender(node.bootstrap, next_seq)
            sender.thread.start()
            deadline = time.monotonic() + 30
            while sender.acked_count() < 20000 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert sender.thread.is_alive()
            node.kill9()  # mid-stream: the sender thread is still producing
            sender.halt()
            assert sender.acked, f"round {round_}: nothing was acknowledged before the kill"
            acked.update(sender.acked)
            next_seq = sender.next_seq

            node.start()
            wait_for_topic(node.bootstrap, TOPIC, PARTITIONS)
            stored = read_everything(node.bootstrap)
            where: dict[int, tuple[int, int]] = {}
            for p, items in stored.items():
                for o, s in items:
                    assert s not in where, f"record {s} stored twice: {where[s]} and {(p, o)}"
                    assert s < next_seq, f"record {s} was never sent"
                    where[s] = (p, o)
            lost = [s for s in acked if s not in where]
            assert not lost, f"round {round_}: {len(lost)} acknowledged records lost, e.g. {lost[:5]}"
            moved = [s for s, at in acked.items() if where[s] != at]
            assert not moved, f"round {round_}: records not where they were acked: {moved[:5]}"
            check_logs(node.data_dir)

        assert node.stop() == 0, node.log()
        check_logs(node.data_dir)  # after a clean shutdown the indexes are trimmed and still valid
        assert len(list((node.data_dir / f"{TOPIC}-0").glob("*.log"))) > 1, "expected several segments"
    finally:
        if node.alive():
            node.kill9()
