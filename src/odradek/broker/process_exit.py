"""The end of an `odradek serve` process: nothing left running may hold it once the node
stopped.

A stopped node has closed its logs and written its clean-shutdown markers; what still runs
then is a worker thread that outlived its task (a `to_thread` call whose awaiting task was
cancelled, blocked on a peer or on a loop that is closing). Python waits for such threads
twice: asyncio's `Runner.close` shuts the default executor down with no time limit (3.11),
and the interpreter joins every executor thread and every non-daemon thread at exit. Kafka's
broker ends with `System.exit`, which waits for no thread; here the executor is given a few
seconds, and a thread still alive after that is logged with its stack (the next such hang
is then explained by the log) before the process exits with the node's code.
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import NoReturn

__all__ = ["BoundedExecutor", "exit_unless_held", "halt_unless_stopped", "lingering_threads"]

log = logging.getLogger(__name__)

EXECUTOR_GRACE_S = 10.0  # longest the loop's executor threads are waited for at shutdown


class BoundedExecutor(ThreadPoolExecutor):
    """The event loop's default executor (`asyncio.to_thread`), whose `shutdown(wait=True)`
    waits at most `grace_s` for its threads: the loop's close must not wait forever on a
    thread blocked in a call that nobody awaits any more."""

    def __init__(self, grace_s: float = EXECUTOR_GRACE_S) -> None:
        super().__init__(thread_name_prefix="odradek-worker")
        self.grace_s = grace_s

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        # queued calls that have not started are dropped: nothing awaits them any more
        super().shutdown(wait=False, cancel_futures=True)
        if not wait:
            return
        deadline = time.monotonic() + self.grace_s
        for thread in list(self._threads):
            thread.join(max(0.0, deadline - time.monotonic()))


def lingering_threads() -> list[threading.Thread]:
    """Threads that would hold the interpreter's exit (non-daemon, other than this one)."""
    me = threading.current_thread()
    return [t for t in threading.enumerate()
            if t is not me and t.is_alive() and not t.daemon]


def _describe(threads: list[threading.Thread]) -> str:
    frames = sys._current_frames()
    parts = []
    for t in threads:
        frame = frames.get(t.ident or -1)
        stack = "".join(traceback.format_stack(frame)) if frame is not None else "(no frame)\n"
        parts.append(f"thread {t.name}:\n{stack}")
    return "".join(parts)


def exit_unless_held(code: int, grace_s: float = 2.0) -> int:
    """Return `code` when nothing would hold the exit; otherwise (a thread still running
    `grace_s` after the node stopped) log what holds it and end the process now."""
    deadline = time.monotonic() + grace_s
    held = lingering_threads()
    while held and time.monotonic() < deadline:
        time.sleep(0.05)
        held = lingering_threads()
    if not held:
        return code
    log.warning("%d threads still running after the node stopped; exiting without them:\n%s",
                len(held), _describe(held))
    _exit_now(code)


def _exit_now(code: int) -> NoReturn:
    """End the process at once (no thread joined), the log and the streams flushed first."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _task_stacks(loop: asyncio.AbstractEventLoop | None) -> str:
    """The loop's pending tasks and where each waits (read from another thread: a best-effort
    picture for the log, never used to decide anything)."""
    if loop is None:
        return ""
    out = io.StringIO()
    try:
        for task in list(asyncio.all_tasks(loop)):
            out.write(f"task {task.get_name()}:\n")
            task.print_stack(limit=8, file=out)
    except Exception as exc:  # the loop's task set changed under us
        out.write(f"(tasks not listed: {exc!r})\n")
    return out.getvalue()


def halt_unless_stopped(code: int, after_s: float, why: str,
                        loop: asyncio.AbstractEventLoop | None = None) -> threading.Timer:
    """End the process with `code` if it is still running `after_s` from now, logging every
    thread's stack and the loop's tasks first. For a node that must stop (its last log
    directory, or the metadata log's, failed): Kafka halts the broker at once there; we try a
    graceful stop first, and this bounds it, so a step that hangs cannot leave a process that
    neither serves nor exits (reliability.md, finding 11)."""
    def halt() -> None:
        log.error("%s: the node has not stopped %.1f s later; halting (exit %d). Where it "
                  "waits:\n%s%s", why, after_s, code,
                  _describe([t for t in threading.enumerate() if t is not threading.current_thread()]),
                  _task_stacks(loop))
        _exit_now(code)

    timer = threading.Timer(after_s, halt)
    timer.daemon = True
    timer.name = "odradek-halt"
    timer.start()
    return timer
