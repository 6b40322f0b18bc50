"""A full disk costs no acknowledged record and no connection (issue 22).

The node's data directory is a 64 MiB tmpfs. An idempotent acks=all confluent-kafka producer
sends numbered records at a steady rate while a filler file takes the space away, either all of
it but less than one record (the appends fail with ENOSPC: they must be cut back whole, and
produces wait for a margin of space to come back) or all but less than the free-space floor
(produces are refused before the disk is full). Meanwhile:
- a probe producer without retries sees KAFKA_STORAGE_ERROR in its delivery report;
- neither producer ever sees a transport error or a fatal error;
- a consumer reads the partition from the beginning;
- deleting the filler lets the same producer go on, without a restart;
- every acknowledged record is at its offset with a valid CRC, before and after a restart.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from tests.support.background import create_topic
from tests.support.broker import BrokerProcess
from tests.support.segments import check_partition_dir

TOPIC = "full"
PAD = b"." * 1000
PROBE = PAD * 20
ENOSPC_LEAVE = 8192  # free bytes left in the enospc mode: less than one PROBE record
DISK_MB = 64
# librdkafka errors that mean the connection was lost or the producer gave up for good
_TRANSPORT = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._FATAL}


@contextlib.contextmanager
def tmpfs(path: Path, size_mb: int) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(path)],
                   check=True)
    try:
        yield path
    finally:
        # lazy: a node killed by a failed test may still hold files open
        subprocess.run(["umount", "-l", str(path)], check=False)


class Sender:
    """An idempotent acks=all producer of numbered records, one every `pause` seconds."""

    def __init__(self, bootstrap: str, pause: float = 0.001, topic: str = TOPIC) -> None:
        self.topic = topic
        self.acked: dict[int, int] = {}  # seq -> offset
        self.failed: list[tuple[int, str]] = []
        self.errors: list[KafkaError] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.hold = threading.Event()  # set: send nothing new for now
        self.pause = pause
        self.sent = 0
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
            "linger.ms": 5, "message.timeout.ms": 300_000, "error_cb": self._on_error,
        })
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _on_error(self, err: KafkaError) -> None:
        with self.lock:
            self.errors.append(err)

    def _on_delivery(self, err: KafkaError | None, msg: object) -> None:
        seq = int(msg.key())  # type: ignore[attr-defined]
        with self.lock:
            if err is None:
                self.acked[seq] = msg.offset()  # type: ignore[attr-defined]
            else:
                self.failed.append((seq, str(err)))

    def _run(self) -> None:
        while not self.stop.is_set():
            if self.hold.is_set():
                self.producer.poll(0.05)
                continue
            try:
                self.producer.produce(self.topic, key=b"%d" % self.sent, value=b"%d" % self.sent + PAD,
                                      partition=0, on_delivery=self._on_delivery)
            except BufferError:
                self.producer.poll(0.05)
                continue
            self.sent += 1
            self.producer.poll(0)
            time.sleep(self.pause)

    def acked_count(self) -> int:
        with self.lock:
            return len(self.acked)

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(30)
        assert self.producer.flush(120) == 0, "records still unacknowledged"


def fill(path: Path, leave: int) -> Path:
    """A file taking all free space of `path`'s filesystem but `leave` bytes."""
    filler = path / "filler"
    chunk = b"\0" * (1 << 20)
    with open(filler, "wb", buffering=0) as f:
        while True:
            st = os.statvfs(path)
            free = st.f_bavail * st.f_frsize
            if free <= leave:
                break
            try:
                f.write(chunk[: min(len(chunk), free - leave)])
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break
    return filler


def probe_until_storage_error(bootstrap: str, timeout: float = 60.0) -> KafkaError:
    """Produce single records without retries until one is refused; return its error."""
    probe = Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0,
                      "enable.idempotence": False, "linger.ms": 0})
    seen: list[KafkaError | None] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            probe.produce(TOPIC, value=PROBE, partition=0,
                          on_delivery=lambda err, msg: seen.append(err))
            probe.flush(30)
            err = seen[-1]
            if err is not None:
                return err
            time.sleep(0.1)
    finally:
        probe.purge()
    raise AssertionError("no produce was refused while the disk was full")


def read_back(bootstrap: str, acked: dict[int, int], topic: str = TOPIC) -> int:
    """Read the partition from the start; every acknowledged record is at its offset."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "disk-full-check",
                  "enable.auto.commit": False})
    try:
        _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        by_offset: dict[int, bytes] = {}
        deadline = time.monotonic() + 120
        while len(by_offset) < high and time.monotonic() < deadline:
            for m in c.consume(2000, timeout=0.5):
                assert m.error() is None, m.error()
                by_offset[m.offset()] = m.key()
        assert sorted(by_offset) == list(range(high)), "offsets not contiguous"
        keys = [k for k in by_offset.values() if k is not None]
        assert len(keys) == len(set(keys)), "a record was written twice"
        for seq, offset in acked.items():
            assert by_offset.get(offset) == b"%d" % seq, f"acked record {seq} not at {offset}"
        return high
    finally:
        c.close()


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("mode", ["enospc", "floor"])
def test_a_full_disk_refuses_produces_keeps_reads_and_loses_nothing(
    tmp_path: Path, mode: str
) -> None:
    if os.geteuid() != 0:
        pytest.fail("mounting a tmpfs needs root")
    with tmpfs(tmp_path / "disk", DISK_MB) as disk:
        floor = "0" if mode == "enospc" else "-1"  # -1: 5% of 64 MiB, 3.2 MiB
        node = BrokerProcess(disk / "data", log_path=tmp_path / "node.log",
                             settings={"log.dir.free.space.min.bytes": floor})
        node.start()
        try:
            create_topic(node.bootstrap, TOPIC, 1, {"segment.bytes": str(4 << 20)})
            sender = Sender(node.bootstrap)
            sender.thread.start()
            deadline = time.monotonic() + 60
            while sender.acked_count() < 500 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert sender.acked_count() >= 500, node.log()

            if mode == "enospc":
                # Leave less than the probe's record, so it is a write that fails: with no
                # floor, a disk filled to its last byte would be refused by the free-space
                # monitor instead whenever its check came before the next append.
                sender.hold.set()
                assert sender.producer.flush(60) == 0
                filler = fill(disk, ENOSPC_LEAVE)
                err = probe_until_storage_error(node.bootstrap)
                sender.hold.clear()  # its produces now meet the full disk too
            else:
                filler = fill(disk, 1 << 20)
                err = probe_until_storage_error(node.bootstrap)
            assert err.code() == KafkaError.KAFKA_STORAGE_ERROR, err
            stalled = sender.acked_count()
            # reads keep working while nothing can be written
            read_back(node.bootstrap, dict(sender.acked))
            assert node.alive(), node.log()

            filler.unlink()  # space is back: the same producer goes on, no restart
            deadline = time.monotonic() + 120
            while sender.acked_count() < stalled + 500 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert sender.acked_count() >= stalled + 500, node.log()
            sender.finish()
            assert not sender.failed, sender.failed[:5]
            bad = [e for e in sender.errors if e.code() in _TRANSPORT or e.fatal()]
            assert not bad, bad
            acked = dict(sender.acked)
            assert len(acked) == sender.sent

            text = node.log()
            if mode == "enospc":
                assert "cut back to the last whole batch" in text, text
            else:
                assert "below log.dir.free.space.min.bytes" in text, text
                assert "accepting produces" in text, text
            assert "Traceback" not in text, text
            # the failure goes to the log once, not once per refused request
            noisy = [line for line in text.splitlines()
                     if "KAFKA_STORAGE_ERROR" in line or "cut back" in line]
            assert len(noisy) <= 3, noisy
            assert read_back(node.bootstrap, acked) >= len(acked)
            node.stop()
            check_partition_dir(disk / "data" / f"{TOPIC}-0")
            node.start()
            assert read_back(node.bootstrap, acked) >= len(acked)
        finally:
            node.stop()
