"""A confluent-kafka producer and consumer that keep working in the background.

Tests that throw bad input at a node run this beside it: it produces numbered records and
reads them back, and records every error it sees, so the test can assert that the node
kept serving its other connections and that nothing stored was harmed.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.client import consumer_settings


def create_topic(bootstrap: str, name: str, partitions: int,
                 config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})],
                                  operation_timeout=30)
    futures[name].result(30)
    wait_for_topic(bootstrap, name, partitions)


def wait_for_topic(bootstrap: str, name: str, partitions: int, timeout: float = 30.0) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(name, timeout=30)
        t = md.topics.get(name)
        if t is not None and t.error is None and len(t.partitions) == partitions and all(
                p.leader >= 0 for p in t.partitions.values()):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"topic {name} not ready: {t and t.error} {t and t.partitions}")
        time.sleep(0.1)


class BackgroundTraffic:
    """Produce numbered records and consume them back in a thread; collect every error."""

    PARTITIONS = 3

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.errors: list[str] = []
        self.sent = 0
        self.acked: dict[int, int] = {}  # seq -> offset
        self.seen: dict[int, list[tuple[int, int]]] = defaultdict(list)  # partition -> [(offset, seq)]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="background-traffic", daemon=True)
        self._lock = threading.Lock()

    def __enter__(self) -> BackgroundTraffic:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._thread.is_alive():
            self._stop.set()
            self._thread.join(60)

    def _error(self, what: str) -> None:
        with self._lock:
            self.errors.append(what)

    def start(self) -> None:
        create_topic(self.bootstrap, self.topic, self.PARTITIONS)
        self._producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5,
                                   "acks": "all",
                                   "error_cb": lambda e: self._error(f"producer: {e}")})
        self._consumer = Consumer(consumer_settings(
            self.bootstrap,
            {"error_cb": lambda e: self._error(f"consumer: {e}")},
            group_id="unused", enable_auto_commit=False, enable_partition_eof=False,
            fetch_wait_max_ms=50))
        self._consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING)
                               for p in range(self.PARTITIONS)])
        self._thread.start()

    def _on_delivery(self, err: KafkaError | None, msg: object) -> None:
        if err is not None:
            self._error(f"delivery: {err}")
            return
        seq = int(msg.value())  # type: ignore[attr-defined]
        with self._lock:
            self.acked[seq] = msg.offset()  # type: ignore[attr-defined]

    def _consume_some(self) -> None:
        for m in self._consumer.consume(500, timeout=0.05):
            if m.error() is not None:
                self._error(f"consume: {m.error()}")
                continue
            self.seen[m.partition()].append((m.offset(), int(m.value())))

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                for _ in range(20):
                    self._producer.produce(self.topic, value=b"%d" % self.sent,
                                           key=b"k%d" % (self.sent % 17),
                                           on_delivery=self._on_delivery)
                    self.sent += 1
                self._producer.poll(0)
                self._consume_some()
                time.sleep(0.01)
            left = self._producer.flush(30)
            if left:
                self._error(f"{left} records not delivered at stop")
            deadline = time.monotonic() + 30
            while sum(len(v) for v in self.seen.values()) < self.sent and time.monotonic() < deadline:
                self._consume_some()
        except Exception as e:  # the test reads self.errors; a dead thread must not go unnoticed
            self._error(f"background thread died: {e!r}")
        finally:
            self._consumer.close()

    def stop_and_check(self) -> None:
        """Stop, then assert no errors and that every record came back exactly once, in order."""
        self._stop.set()
        self._thread.join(90)
        assert not self._thread.is_alive(), "background traffic did not stop"
        assert not self.errors, f"the background client saw errors: {self.errors[:20]}"
        assert self.sent > 0
        assert len(self.acked) == self.sent, f"acked {len(self.acked)} of {self.sent}"
        got: dict[int, tuple[int, int]] = {}
        for partition, items in self.seen.items():
            offsets = [o for o, _ in items]
            assert offsets == list(range(len(offsets))), f"partition {partition}: offsets not contiguous"
            seqs = [s for _, s in items]
            assert seqs == sorted(seqs), f"partition {partition}: records out of order"
            for o, s in items:
                assert s not in got, f"record {s} consumed twice"
                got[s] = (partition, o)
        assert set(got) == set(range(self.sent)), "records missing from the background topic"
        for seq, (_, offset) in got.items():
            assert self.acked[seq] == offset
