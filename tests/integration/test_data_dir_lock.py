"""Issue 12 scenario: a second `odradek serve` on a data directory in use is refused.

Node 1 serves D and has acknowledged (acks=all) records. Node 2, started on D with another
port, must exit at once with code 2 and one line naming D and node 1's PID, without
touching D. Node 1 keeps serving, and after its restart every acknowledged record reads
back at its offset.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker import ODRADEK, BrokerProcess, free_port

TOPIC = "shared-dir"
PARTITIONS = 3


def produce(bootstrap: str, start: int, count: int) -> dict[tuple[int, int], bytes]:
    """(partition, offset) -> value of every acknowledged record."""
    acked: dict[tuple[int, int], bytes] = {}
    errors: list[str] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked[(msg.partition(), msg.offset())] = msg.value()  # type: ignore[attr-defined]

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(start, start + count):
        p.produce(TOPIC, key=b"k%d" % i, value=b"value-%d" % i, on_delivery=on_delivery)
    assert p.flush(30) == 0
    assert not errors, errors[:5]
    assert len(acked) == count
    return acked


def read_all(bootstrap: str) -> dict[tuple[int, int], bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    out: dict[tuple[int, int], bytes] = {}
    eof: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while len(eof) < PARTITIONS and time.monotonic() < deadline:
            for m in c.consume(500, timeout=0.5):
                if m.error() is not None:
                    assert m.error().code() == -191, m.error()  # _PARTITION_EOF
                    eof.add(m.partition())
                    continue
                out[(m.partition(), m.offset())] = m.value()
    finally:
        c.close()
    assert len(eof) == PARTITIONS, "did not reach the end of every partition"
    return out


def listing(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.timeout(240)
def test_second_node_on_a_data_dir_in_use_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    node1 = BrokerProcess(data)
    node1.start()
    try:
        admin = AdminClient({"bootstrap.servers": node1.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        acked = produce(node1.bootstrap, 0, 300)

        before = listing(data)
        other_port = free_port()
        began = time.monotonic()
        node2 = subprocess.run(
            [*ODRADEK, "serve", "--data-dir", str(data),
             "--set", f"listeners=PLAINTEXT://127.0.0.1:{other_port}",
             "--set", "schema.registry.listeners=", "--set", "admin.listeners=",
             "--set", "console.listeners="],
            capture_output=True, text=True, timeout=60,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        took = time.monotonic() - began
        assert node2.returncode == 2, (node2.returncode, node2.stdout, node2.stderr)
        lines = [line for line in node2.stderr.splitlines() if line.strip()]
        assert len(lines) == 1, node2.stderr
        assert str(data) in lines[0] and str(node1.proc.pid) in lines[0], lines  # type: ignore[union-attr]
        assert "Traceback" not in node2.stderr + node2.stdout
        assert listing(data) == before, "the refused node changed the data directory"
        assert node1.alive(), node1.log()
        print(f"second node refused in {took:.2f} s")

        # node 1 goes on serving: more acknowledged records, all readable
        acked.update(produce(node1.bootstrap, 300, 300))
        assert read_all(node1.bootstrap) == acked

        assert node1.stop() == 0, node1.log()
        node1.start()
        assert read_all(node1.bootstrap) == acked, "acknowledged records lost after restart"
        topics = AdminClient({"bootstrap.servers": node1.bootstrap}).list_topics(timeout=30)
        assert len(topics.topics[TOPIC].partitions) == PARTITIONS
    finally:
        if node1.alive():
            node1.stop()


@pytest.mark.timeout(120)
def test_lock_is_released_when_a_node_stops(tmp_path: Path) -> None:
    """A stopped (or killed) node leaves a lock file that the next start takes over."""
    data = tmp_path / "data"
    node = BrokerProcess(data)
    node.start()
    pid = node.proc.pid  # type: ignore[union-attr]
    assert (data / ".lock").read_text().strip() == str(pid)
    node.kill9()
    node.start()  # the kernel dropped the dead process's lock: no stale-lock refusal
    try:
        assert (data / ".lock").read_text().strip() == str(node.proc.pid)  # type: ignore[union-attr]
    finally:
        assert node.stop() == 0, node.log()
