"""Deleted and garbage index files: a real node rebuilds each with a log line, nothing lost."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.support.background import create_topic
from tests.support.broker import BrokerProcess

TOPIC = "idx"
RECORDS = 3000


def verify(data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek.cli.main", "storage", "verify",
                           "--data-dir", str(data_dir)], capture_output=True, text=True, timeout=120)


def read_from(bootstrap: str, offset: int) -> list[tuple[int, bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(TOPIC, 0, offset)])
        out: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 60
        while len(out) < RECORDS - offset and time.monotonic() < deadline:
            for m in c.consume(1000, timeout=0.5):
                assert m.error() is None, m.error()
                out.append((m.offset(), m.value()))
        return out
    finally:
        c.close()


def test_deleted_and_garbage_indexes_are_rebuilt_with_a_log_line(tmp_path: Path) -> None:
    node = BrokerProcess(tmp_path / "data")
    node.start()
    try:
        create_topic(node.bootstrap, TOPIC, 1, {"segment.bytes": "65536"})
        p = Producer({"bootstrap.servers": node.bootstrap, "acks": "all", "linger.ms": 1,
                      "batch.num.messages": 20})
        for i in range(RECORDS):
            p.produce(TOPIC, value=b"%05d" % i + b"." * 95, partition=0)
            if i % 100 == 0:
                p.poll(0)
        assert p.flush(30) == 0
    finally:
        assert node.stop() == 0, node.log()
    part = node.data_dir / f"{TOPIC}-0"
    segments = sorted(part.glob("*.log"))
    assert len(segments) >= 4, segments
    stems = [s.name[:20] for s in segments]
    (part / f"{stems[0]}.index").unlink()
    (part / f"{stems[1]}.timeindex").unlink()
    (part / f"{stems[2]}.index").write_bytes(b"\x13" * 37)  # not a whole number of entries
    (part / f"{stems[-1]}.index").write_bytes(b"\xff" * 64)  # entries that make no sense
    damaged = {int(stems[0]), int(stems[1]), int(stems[2]), int(stems[-1])}

    report = verify(node.data_dir)
    assert report.returncode == 1, report.stdout
    assert f"{stems[0]}.index: missing" in report.stdout
    assert f"{stems[2]}.index: size 37" in report.stdout
    assert f"{stems[-1]}.index: entry 0" in report.stdout

    node.log_path.write_text("")
    node.start()
    try:
        lines = [ln for ln in node.log_path.read_text().splitlines()
                 if "rebuilt the indexes of segment" in ln]
        rebuilt = {int(ln.rsplit("segment ", 1)[1].split()[0]) for ln in lines}
        assert rebuilt == damaged and len(lines) == len(damaged), lines
        everything = read_from(node.bootstrap, 0)
        assert [o for o, _ in everything] == list(range(RECORDS))
        assert [v[:5] for _, v in everything] == [b"%05d" % i for i in range(RECORDS)]
        # a read from the middle of a rebuilt segment lands on the right record
        middle = int(stems[2]) + 7
        assert read_from(node.bootstrap, middle)[0] == (middle, b"%05d" % middle + b"." * 95)
    finally:
        assert node.stop() == 0, node.log()
    report = verify(node.data_dir)
    assert report.returncode == 0, report.stdout
