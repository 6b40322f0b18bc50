"""A workload whose worker does not stop says why: `Workers.join` raises `WorkersStuck` with
the stuck thread's Python stack (the call it is blocked in) and its last history ops."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.system.jepsen.history import THREAD_OPS, History
from tests.system.jepsen.workloads import common
from tests.system.jepsen.workloads.common import Workers, WorkersStuck


def blocked_in_a_client_call(release: threading.Event) -> None:
    release.wait()  # stands for a client call that never returns


def test_a_stuck_worker_is_reported_with_its_stack_and_last_ops(tmp_path: Path) -> None:
    release = threading.Event()
    with History(tmp_path / "h.jsonl") as h:
        w = Workers(h)

        def worker() -> None:
            p = h.new_process()
            for i in range(THREAD_OPS + 3):
                h.invoke(p, "txn", [["send", "t-0", i]])
            blocked_in_a_client_call(release)

        h.nemesis("kill", {"node": 2})  # another thread's op: not the worker's
        w.start("w2-worker-0", worker)
        try:
            # wait for the worker's ops (a condition, not a time), then a join that ends at once
            deadline = time.monotonic() + 120
            while [op.value for op in h.thread_ops("w2-worker-0")[-1:]] != [
                [["send", "t-0", THREAD_OPS + 2]]
            ]:
                if time.monotonic() > deadline:
                    pytest.fail(f"the worker wrote {h.thread_ops('w2-worker-0')}")
                time.sleep(0.01)
            with pytest.raises(WorkersStuck) as info:
                w.join(0)
        finally:
            release.set()
        exc = info.value
        assert exc.alive == ["w2-worker-0"]
        assert "did not stop: ['w2-worker-0']" in str(exc)
        stuck = exc.dump.split("--- ")[1]
        assert stuck.startswith("w2-worker-0 (stuck)")
        assert "blocked_in_a_client_call" in stuck and "release.wait()" in stuck
        # its own last THREAD_OPS ops, the newest last; the nemesis op is not among them
        last = [line for line in stuck.splitlines() if line.startswith("    {")]
        assert len(last) == THREAD_OPS
        assert f'["send","t-0",{THREAD_OPS + 2}]' in last[-1].replace(" ", "")
        assert "nemesis" not in stuck
        # every other thread's stack is there too (this test's own thread at least)
        assert "test_a_stuck_worker_is_reported" in exc.dump
        w.join(60)  # released: it ends


def test_a_client_call_that_overruns_its_timeout_is_given_up_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The workloads' guard against client calls that never return (W2's
    send_offsets_to_transaction, librdkafka #5456/#5511; W1's synchronous commit, which has no
    timeout): the call is left on its helper thread and Stuck raised."""
    monkeypatch.setattr(common, "STUCK_AFTER", 0.05)
    release = threading.Event()
    try:
        with pytest.raises(common.Stuck, match="send_offsets_to_transaction did not return"):
            common.bounded("send_offsets_to_transaction", 0.0, blocked_in_a_client_call, release)
    finally:
        release.set()
    # a call that returns (or raises) in time gives its result (or its exception)
    monkeypatch.setattr(common, "STUCK_AFTER", 120.0)
    assert common.bounded("commit_transaction", 0.0, lambda x: x + 1, 1) == 2
    with pytest.raises(ZeroDivisionError):
        common.bounded("abort_transaction", 0.0, lambda: 1 / 0)
