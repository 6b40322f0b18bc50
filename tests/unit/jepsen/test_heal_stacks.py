"""Finding 13: when the heal gives up, the harness writes every live node's thread stacks
beside the run (py-spy), so a node that never finishes stopping shows where it hangs."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.system.jepsen.cluster import JepsenCluster

HUNG = """
import threading, time
def close_logs_that_never_returns():
    time.sleep(600)
t = threading.Thread(target=close_logs_that_never_returns, name="closer")
t.start()
print("up", flush=True)
t.join()
"""


def test_dump_stacks_writes_each_live_nodes_threads(tmp_path: Path) -> None:
    hung = subprocess.Popen([sys.executable, "-c", HUNG], stdout=subprocess.PIPE, text=True)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        assert hung.stdout is not None and hung.stdout.readline() == "up\n"
        gone.wait(60)
        nodes = {1: SimpleNamespace(node_id=1, proc=hung), 2: SimpleNamespace(node_id=2, proc=gone)}
        out = tmp_path / "stacks.txt"
        JepsenCluster.dump_stacks(SimpleNamespace(nodes=nodes), out)  # type: ignore[arg-type]
        text = out.read_text()
        deadline = time.monotonic() + 120
        while "close_logs_that_never_returns" not in text and time.monotonic() < deadline:
            # py-spy can catch a thread between frames: ask again
            JepsenCluster.dump_stacks(SimpleNamespace(nodes=nodes), out)  # type: ignore[arg-type]
            text = out.read_text()
        if "close_logs_that_never_returns" not in text:
            pytest.fail(f"the hung thread's frame is not in the dump:\n{text}")
        assert f"== node 1 (pid {hung.pid})" in text
        assert "== node 2" not in text  # an exited node has no stacks to take
    finally:
        hung.kill()
        hung.wait(60)
