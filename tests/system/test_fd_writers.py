"""Issue 22: the fd budget is honest. A node under `prlimit --nofile=1024` takes 1,500
partitions, all of them written within seconds (each wanting its active `.log`, and before the
fix its `.index` and `.timeindex` too), and stays under its limit while it serves, restarts
after kill -9 and serves again: the pool bounds the write pins and partitions take turns."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.system.test_fd_budget import LimitedBroker, count_records, fd_count, produce

LIMIT = 1024
TOPICS = {f"w{i}": 500 for i in range(3)}  # 1,500 partitions under 1,024 fds


class FdWatch:
    """The node's highest fd count, sampled every 50 ms on a thread."""

    def __init__(self, node: LimitedBroker) -> None:
        self.node, self.peak, self._stop = node, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, fd_count(self.node))
            except (OSError, AssertionError):
                pass
            time.sleep(0.05)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


# past the suite's 300 s: 30 s idle, 2.5-3 min at load 15
@pytest.mark.timeout(600)
def test_more_written_partitions_than_fds_stay_under_the_limit(tmp_path: Path) -> None:
    # index entries at every batch: each written partition has index files to write too
    node = LimitedBroker(tmp_path / "data", LIMIT,
                         settings={"log.index.interval.bytes": "0"}).start(timeout=120)
    try:
        watch = FdWatch(node)
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        for name, n in TOPICS.items():
            admin.create_topics([NewTopic(name, n, 1)], operation_timeout=60)[name].result(60)
        for name, n in TOPICS.items():
            produce(node.bootstrap, name, n, 2, size=50)
        total = sum(TOPICS.values()) * 2
        expected = {(t, p): 2 for t, n in TOPICS.items() for p in range(n)}
        assert count_records(node.bootstrap, TOPICS, total) == expected
        node.kill9()
        node.start(timeout=120)
        assert count_records(node.bootstrap, TOPICS, total) == expected
        for name, n in TOPICS.items():
            produce(node.bootstrap, name, n, 1, size=50)
        expected = {k: 3 for k in expected}
        assert count_records(node.bootstrap, TOPICS, total * 3 // 2) == expected
        peak = watch.stop()
        assert peak < LIMIT, peak
        log = node.log()
        assert "Too many open files" not in log and "Traceback" not in log, log[-3000:]
        # every batch indexed: the indexes were written, through borrowed fds
        seg = tmp_path / "data" / "w0-0" / f"{0:020d}.index"
        assert os.path.getsize(seg) > 0
    finally:
        node.stop()
