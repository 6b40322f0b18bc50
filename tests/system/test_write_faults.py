"""Write and fsync errors injected into a running node with strace (issue 22).

strace attaches to the node and fails one system call on the partition's segment file only
(`-P` limits both tracing and injection to that file):
- a failed writev: the batch is cut back, the produce answered KAFKA_STORAGE_ERROR, the
  idempotent producer retries it, the node goes on, and nothing acknowledged is lost;
- a failed fsync: the log directory goes offline and, being the only one, the node stops with
  a clear message and exit 1; a restart recovers everything acknowledged from disk.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.background import create_topic
from tests.support.broker import BrokerProcess
from tests.support.segments import check_partition_dir
from tests.system.test_disk_full import _TRANSPORT, Sender, read_back

TOPIC = "faults"


@contextmanager
def strace_inject(pid: int, path: Path, syscall: str, inject: str, out: Path) -> Iterator[Path]:
    """Fail the `inject` (strace syntax) of `syscall` on `path` in process `pid`."""
    strace = shutil.which("strace")
    if strace is None:
        pytest.fail("strace is not installed (make deb installs it)")
    err = out.with_suffix(".err")
    with open(err, "wb") as errf:
        proc = subprocess.Popen(
            [strace, "-f", "-p", str(pid), "-P", str(path), "-e", f"trace={syscall}",
             "-e", f"inject={syscall}:{inject}", "-o", str(out)],
            stderr=errf)
    try:
        deadline = time.monotonic() + 30
        while b"attached" not in err.read_bytes():
            assert proc.poll() is None, err.read_text()
            if time.monotonic() > deadline:
                pytest.fail("strace did not attach")
            time.sleep(0.05)
        yield out
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(30)


def start_sending(node: BrokerProcess, count: int) -> Sender:
    sender = Sender(node.bootstrap, topic=TOPIC)
    sender.thread.start()
    deadline = time.monotonic() + 60
    while sender.acked_count() < count and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sender.acked_count() >= count, node.log()
    return sender


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize(("inject", "seen"), [
    ("error=EIO:when=5", "Input/output error"),
    # the call is skipped and claims 10 bytes: a short write, as a filling disk gives
    ("retval=10:when=5", "short write: 10 of"),
])
def test_a_failed_writev_is_cut_back_and_retried(tmp_path: Path, inject: str, seen: str) -> None:
    node = BrokerProcess(tmp_path / "data")
    node.start()
    try:
        create_topic(node.bootstrap, TOPIC, 1)
        segment = tmp_path / "data" / f"{TOPIC}-0" / f"{0:020d}.log"
        sender = start_sending(node, 200)
        assert node.proc is not None
        with strace_inject(node.proc.pid, segment, "writev", inject,
                           tmp_path / "writev.trace") as trace:
            deadline = time.monotonic() + 60
            while b"INJECTED" not in trace.read_bytes() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert b"INJECTED" in trace.read_bytes(), trace.read_text()
        before = sender.acked_count()
        deadline = time.monotonic() + 60
        while sender.acked_count() < before + 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        sender.finish()
        assert node.alive(), node.log()
        assert not sender.failed, sender.failed[:5]
        assert not [e for e in sender.errors if e.code() in _TRANSPORT or e.fatal()]
        acked = dict(sender.acked)
        assert len(acked) == sender.sent
        text = node.log()
        assert "cut back to the last whole batch" in text and seen in text, text
        assert "offline" not in text, text
        read_back(node.bootstrap, acked, TOPIC)
        node.stop()
        check_partition_dir(segment.parent)
        node.start()
        read_back(node.bootstrap, acked, TOPIC)
    finally:
        node.stop()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_failed_fsync_stops_the_node_and_a_restart_loses_nothing(tmp_path: Path) -> None:
    node = BrokerProcess(tmp_path / "data")
    node.start()
    try:
        # flush.messages=1: every append is fsynced, so the injected failure meets a produce
        create_topic(node.bootstrap, TOPIC, 1, {"flush.messages": "1"})
        segment = tmp_path / "data" / f"{TOPIC}-0" / f"{0:020d}.log"
        sender = start_sending(node, 200)
        assert node.proc is not None
        with strace_inject(node.proc.pid, segment, "fsync", "error=EIO:when=3",
                           tmp_path / "fsync.trace"):
            node.proc.wait(120)
        assert node.proc.returncode == 1, node.log()
        sender.stop.set()
        sender.thread.join(30)
        sender.producer.purge(in_queue=True, in_flight=True)
        sender.producer.flush(10)
        bad = [e for e in sender.errors if e.fatal()]
        assert not bad, bad
        text = node.log()
        assert "is offline: fsync of" in text, text
        assert "no log directory is online" in text, text
        acked = dict(sender.acked)

        node.start()  # no strace: recovery from what is on disk
        read_back(node.bootstrap, acked, TOPIC)
        node.stop()
        check_partition_dir(segment.parent)
    finally:
        node.stop()
