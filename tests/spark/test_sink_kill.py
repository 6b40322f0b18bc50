"""Exactly-once sink under kill -9: the driver dies at random points and restarts from its
checkpoint; read_committed output holds each input record exactly once."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from odradek.spark.session import worker_python
from tests.spark.support import create_topic, produce, read_all, topic_name
from tests.support.broker import BrokerProcess


def _batches(checkpoint: Path, kind: str) -> int:
    d = checkpoint / kind
    return sum(1 for p in d.iterdir() if p.name.isdigit()) if d.exists() else 0


def _driver(bootstrap: str, src: str, dst: str, checkpoint: Path, mode: str, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.spark.eos_driver", bootstrap, src, dst, str(checkpoint), mode],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "PYSPARK_PYTHON": worker_python()})


def test_driver_killed_at_random_points(spark_broker: BrokerProcess, tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    boot = spark_broker.bootstrap
    src = create_topic(boot, topic_name("kill-in"), 3)
    dst = create_topic(boot, topic_name("kill-out"), 2)
    produced = produce(boot, src, 1500)  # 10 micro-batches of 150
    cp, log = tmp_path / "cp", tmp_path / "driver.log"
    kills = 0
    for _ in range(2):  # two kills keep the Spark suite within its time budget
        before = _batches(cp, "commits")
        proc = _driver(boot, src, dst, cp, "run", log)
        try:
            deadline = time.monotonic() + 180
            # Wait until this run has planned a batch of its own, then kill at a random moment.
            while _batches(cp, "offsets") <= before and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.1)
            assert proc.poll() is None, f"driver exited early (seed {seed}):\n{log.read_text()[-3000:]}"
            time.sleep(rng.uniform(0.0, 2.5))
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        kills += 1
        if _batches(cp, "commits") >= 10:
            break
    assert kills >= 1 and _batches(cp, "commits") < 10, "the query finished before being killed"
    proc = _driver(boot, src, dst, cp, "finish", log)
    assert proc.wait(240) == 0, f"seed {seed}:\n{log.read_text()[-3000:]}"
    got = Counter(read_all(boot, dst, 2))
    want = Counter((r.key, r.value) for r in produced)
    assert got == want, f"seed {seed}: {sum(got.values())} rows for {sum(want.values())} inputs"
