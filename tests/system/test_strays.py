"""Partition data goes only by a deletion, against real nodes.

- A partition directory the metadata does not know is renamed
  `<topic>-<partition>.<uuid>-stray` (Kafka 3.7's name) with a log line, kept across
  restarts, and survives the creation of a topic of the same name.
- A kill -9 during DeleteTopics of many partitions: the restart finishes the deletion, and
  no directory of the deleted topics is left behind.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.background import create_topic
from tests.support.broker import BrokerProcess


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for v in values:
        p.produce(topic, value=v, partition=0)
    assert p.flush(30) == 0


def read_all(bootstrap: str, topic: str) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    try:
        _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(out) < high and time.monotonic() < deadline:
            for m in c.consume(500, timeout=0.5):
                assert m.error() is None, m.error()
                out.append(m.value())
        return out
    finally:
        c.close()


def verify(data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek.cli.main", "storage", "verify",
                           "--data-dir", str(data_dir)], capture_output=True, text=True, timeout=120)


def snapshot(directory: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted(directory.iterdir()) if f.suffix == ".log"}


def test_unknown_partition_dir_is_renamed_stray_and_survives(tmp_path: Path) -> None:
    # a partition directory from another cluster's data dir: this node's metadata has no idea
    other = BrokerProcess(tmp_path / "other")
    other.start()
    try:
        create_topic(other.bootstrap, "orphan", 1)
        produce(other.bootstrap, "orphan", [b"old-%d" % i for i in range(100)])
    finally:
        assert other.stop() == 0, other.log()
    node = BrokerProcess(tmp_path / "data")
    node.start()
    assert node.stop() == 0, node.log()
    shutil.copytree(other.data_dir / "orphan-0", node.data_dir / "orphan-0")
    kept = snapshot(node.data_dir / "orphan-0")

    node.start()
    try:
        strays = sorted(node.data_dir.glob("orphan-0.*-stray"))
        assert len(strays) == 1, sorted(p.name for p in node.data_dir.iterdir())
        stray = strays[0]
        assert len(stray.name) == len("orphan-0.") + 32 + len("-stray")
        lines = [ln for ln in node.log().splitlines() if "renamed to " + stray.name in ln]
        assert len(lines) == 1, node.log()
        assert not (node.data_dir / "orphan-0").exists()

        # a topic of the same name starts in a fresh directory; the stray is untouched
        create_topic(node.bootstrap, "orphan", 1)
        produce(node.bootstrap, "orphan", [b"new-%d" % i for i in range(5)])
        assert read_all(node.bootstrap, "orphan") == [b"new-%d" % i for i in range(5)]
        assert snapshot(stray) == kept
    finally:
        assert node.stop() == 0, node.log()

    node.log_path.write_text("")
    node.start()
    try:
        assert snapshot(stray) == kept
        assert [ln for ln in node.log().splitlines() if stray.name in ln and "stray log kept" in ln]
        assert read_all(node.bootstrap, "orphan") == [b"new-%d" % i for i in range(5)]
    finally:
        assert node.stop() == 0, node.log()
    report = verify(node.data_dir)
    assert report.returncode == 0, report.stdout
    assert f"NOTE {stray}: stray log" in report.stdout, report.stdout


TOPICS = 30
PARTITIONS = 20


def topic_dirs(data_dir: Path) -> list[str]:
    return sorted(p.name for p in data_dir.iterdir() if p.name.startswith("doomed"))


def test_kill9_during_delete_topics_leaves_nothing(tmp_path: Path) -> None:
    node = BrokerProcess(tmp_path / "data")
    node.start()
    names = [f"doomed{i}" for i in range(TOPICS)]
    try:
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        for f in admin.create_topics([NewTopic(n, PARTITIONS, 1) for n in names],
                                     operation_timeout=60).values():
            f.result(120)
        deadline = time.monotonic() + 120
        while len(topic_dirs(node.data_dir)) < TOPICS * PARTITIONS:
            if time.monotonic() > deadline:
                pytest.fail(f"{len(topic_dirs(node.data_dir))} partition directories")
            time.sleep(0.05)
        produce(node.bootstrap, names[-1], [b"x"] * 10)

        admin.delete_topics(names, operation_timeout=0)
        # kill as soon as the first directory is gone: the deletion is under way
        deadline = time.monotonic() + 60
        while len(topic_dirs(node.data_dir)) == TOPICS * PARTITIONS:
            if time.monotonic() > deadline:
                pytest.fail("the deletion did not start")
        node.kill9()
    finally:
        node.kill9()
    left = topic_dirs(node.data_dir)
    # the point of the test: the crash came in the middle of the deletion
    assert left, "every directory was gone before the kill"

    node.log_path.write_text("")
    node.start()
    try:
        assert topic_dirs(node.data_dir) == []
        log_text = node.log_path.read_text()
        finished = [ln for ln in log_text.splitlines() if "finishing the deletion" in ln]
        live = [d for d in left if not d.endswith("-delete")]
        assert len(finished) == len(live), (len(finished), len(live))
        # a new topic of a deleted name starts empty
        create_topic(node.bootstrap, names[-1], 1)
        assert read_all(node.bootstrap, names[-1]) == []
    finally:
        assert node.stop() == 0, node.log()
    assert not [d for d in topic_dirs(node.data_dir) if d != f"{names[-1]}-0"]
