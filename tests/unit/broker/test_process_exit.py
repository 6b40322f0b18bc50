"""A stopped node's process ends even when a worker thread is still blocked (a SIGTERMed node
logged "stopped" and did not exit within 60 s, session 9). In a child Python: asyncio's
Runner with the node's executor, a `to_thread` call whose task was cancelled and whose thread
never returns; the process exits with the node's code and says which thread it left."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

from odradek.broker.process_exit import BoundedExecutor

CHILD = textwrap.dedent("""
    import asyncio, logging, sys, threading
    from odradek.broker.process_exit import BoundedExecutor, exit_unless_held

    logging.basicConfig(level=logging.INFO)
    never = threading.Event()

    async def node() -> int:
        call = asyncio.ensure_future(asyncio.to_thread(never.wait))
        await asyncio.sleep(0.05)
        call.cancel()  # as a shutdown cancels its tasks: the thread goes on waiting
        print("node stopped", flush=True)
        if sys.argv[2] == "returns":
            never.set()
        return int(sys.argv[1])

    def run() -> int:
        with asyncio.Runner() as runner:
            runner.get_loop().set_default_executor(BoundedExecutor(grace_s=0.2))
            return runner.run(node())

    sys.exit(exit_unless_held(run(), grace_s=0.1))
""")


def child(code: int, thread: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", CHILD, str(code), thread],
                          capture_output=True, text=True, timeout=120)


def test_a_blocked_worker_thread_does_not_hold_the_exit() -> None:
    for code in (0, 3):
        done = child(code, "blocks")
        assert done.returncode == code, done.stderr
        assert "node stopped" in done.stdout
        assert "threads still running after the node stopped" in done.stderr, done.stderr
        assert "odradek-worker" in done.stderr  # named, with its stack


def test_nothing_is_said_when_every_thread_ended() -> None:
    done = child(3, "returns")
    assert done.returncode == 3, done.stderr
    assert "threads still running" not in done.stderr, done.stderr


def test_the_executor_shutdown_waits_only_its_grace() -> None:
    release = threading.Event()
    pool = BoundedExecutor(grace_s=0.1)
    blocked = pool.submit(release.wait)
    quick = pool.submit(lambda: 7)
    assert quick.result(30) == 7
    pool.shutdown(wait=True)  # returns although a thread still waits
    assert not blocked.done()
    release.set()
    assert blocked.result(30) is True


HALTING = textwrap.dedent("""
    import asyncio, logging
    from odradek.broker.process_exit import halt_unless_stopped

    logging.basicConfig(level=logging.INFO)

    async def stuck_step() -> None:
        await asyncio.Event().wait()  # a shutdown step that never ends

    async def node() -> None:
        halt_unless_stopped(1, 0.3, "no log directory is online", asyncio.get_running_loop())
        await asyncio.create_task(stuck_step(), name="close-logs")

    asyncio.run(node())
""")


def test_a_node_whose_stop_hangs_is_halted_with_its_stacks_logged() -> None:
    # finding 11: a node stopping after its log directory failed hung in a shutdown step and
    # never exited; the halt ends it with exit 1 and says where it waited
    proc = subprocess.run([sys.executable, "-c", HALTING], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert ("no log directory is online: the node has not stopped 0.3 s later; halting "
            "(exit 1)") in proc.stderr, proc.stderr
    assert "task close-logs:" in proc.stderr and "stuck_step" in proc.stderr, proc.stderr
    assert "thread MainThread" in proc.stderr, proc.stderr


def test_the_halt_does_nothing_to_a_process_that_stopped_in_time() -> None:
    script = ("import sys; from odradek.broker.process_exit import halt_unless_stopped\n"
              "halt_unless_stopped(1, 30.0, 'x')\nprint('stopped'); sys.exit(0)\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and "stopped" in proc.stdout, proc.stderr
