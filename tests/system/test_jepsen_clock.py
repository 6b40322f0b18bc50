"""Issue 15, short seeded run: wall-clock skew of one node (skewclock.so), seconds to an hour either way.
The workloads run under the seed's plan on the shared namespaced cluster, the faults heal,
the final reads run and the checker must find nothing Kafka forbids."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.system.jepsen.nemesis.clock import node_env, set_skew
from tests.system.jepsen_checks import assert_clean_run


@pytest.mark.timeout(600)
@pytest.mark.parametrize("seed", [1])
def test_jepsen_clock(seed: int) -> None:
    assert_clean_run("clock", seed, ["w4"])


def test_skewclock_moves_pythons_wall_clock_only(tmp_path: Path) -> None:
    """The preload the clock family uses: time.time()/datetime follow the offset written while
    the process runs; time.monotonic(), time.sleep and timed waits do not."""
    env = node_env(tmp_path, 1)
    script = (
        "import time, datetime, threading, sys\n"
        "print(time.time(), time.monotonic(), flush=True)\n"
        "sys.stdin.readline()\n"
        "time.sleep(0); time.sleep(0.01); threading.Event().wait(0.01)\n"
        "print(time.time(), time.monotonic(), datetime.datetime.now().timestamp(), flush=True)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **env})
    assert proc.stdin is not None and proc.stdout is not None
    wall0, mono0 = map(float, proc.stdout.readline().split())
    set_skew(Path(env["ODJ_SKEW_FILE"]), 3600)
    proc.stdin.write("go\n")
    proc.stdin.flush()
    line = proc.stdout.readline()
    assert proc.wait(60) == 0, proc.stderr.read() if proc.stderr else ""
    wall1, mono1, dt1 = map(float, line.split())
    # an hour ahead on the wall clock; the monotonic clock moved only by the run's own time,
    # far below the hour whatever the load
    assert wall1 - wall0 >= 3600
    assert dt1 - wall0 >= 3600
    assert 0 <= mono1 - mono0 < 1800
