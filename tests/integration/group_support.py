"""Helpers for the consumer-group tests: a node tuned for quick groups, producers, members."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer

from tests.support.background import create_topic
from tests.support.broker import BrokerProcess

# short timers so that tests waiting for a timeout stay short; no initial rebalance delay
GROUP_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "6000",
    "offsets.topic.num.partitions": "10",
}
SESSION_MS = 6000
HEARTBEAT_MS = 500


def start_node(data_dir: Path, **extra: str) -> BrokerProcess:
    return BrokerProcess(data_dir, settings={**GROUP_SETTINGS, **extra}).start()


def new_topic(bootstrap: str, name: str, partitions: int = 6) -> str:
    create_topic(bootstrap, name, partitions)
    return name


def produce(bootstrap: str, topic: str, count: int, start: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + count):
        p.produce(topic, key=str(i).encode(), value=str(i).encode())
    assert p.flush(30) == 0


def wait_until(cond: Callable[[], bool], timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def confluent_conf(bootstrap: str, group: str, protocol: str = "classic",
                   strategy: str = "range", **extra: Any) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": group,
                            "auto.offset.reset": "earliest", "enable.auto.commit": False}
    if protocol == "consumer":
        conf["group.protocol"] = "consumer"
    else:
        conf.update({"partition.assignment.strategy": strategy,
                     "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": HEARTBEAT_MS})
    conf.update({k.replace("_", "."): v for k, v in extra.items()})
    return conf


@dataclass
class Member:
    """A confluent-kafka consumer polling in its own thread, committing after each record."""

    conf: dict[str, Any]
    topics: list[str]
    commit: bool = True
    records: list[tuple[int, int, bytes]] = field(default_factory=list)
    assignment: set[int] = field(default_factory=set)
    assigns: int = 0
    errors: list[str] = field(default_factory=list)
    close_on_stop: bool = True

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.consumer = Consumer(self.conf)
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Member:
        self.thread.start()
        return self

    def _on_assign(self, c: Any, parts: list[Any]) -> None:
        with self._lock:
            self.assigns += 1

    def _run(self) -> None:
        c = self.consumer
        c.subscribe(self.topics, on_assign=self._on_assign)
        while not self._stop.is_set():
            m = c.poll(0.1)
            with self._lock:
                self.assignment = {tp.partition for tp in c.assignment()}
            if m is None:
                continue
            if m.error():
                self.errors.append(str(m.error()))
                continue
            with self._lock:
                self.records.append((m.partition(), m.offset(), m.value()))
            if self.commit:
                try:
                    c.commit(m, asynchronous=False)
                except Exception as exc:  # noted; the test decides whether it matters
                    self.errors.append(f"commit: {exc}")
        if self.close_on_stop:
            c.close()

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(30)

    def count(self) -> int:
        with self._lock:
            return len(self.records)


def disjoint_cover(assignments: list[set[int]], partitions: int) -> bool:
    union: set[int] = set()
    for a in assignments:
        if union & a:
            return False
        union |= a
    return union == set(range(partitions))
