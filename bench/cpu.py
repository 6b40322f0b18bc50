"""CPU seconds of process trees, for the benchmarks' "CPU per 1M rows" figures.

A node running a Connect worker, or a bench process running Spark, is a tree: the node, the
worker it started, Spark's JVM and the JVM's Python workers. Read from /proc (no psutil
round trips): a process's utime + stime + cutime + cstime, so a child that ended and was
reaped inside the window still counts (its time moves into its parent's cutime/cstime), and
one alive at both ends is not counted twice.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")
_TICK = os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    """The live children of `pid` (every thread's: a JVM starts processes from any thread)."""
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass  # it ended while we looked
    return out


def walk(roots: Iterable[int], into: Callable[[int], bool] = lambda pid: True) -> Iterator[int]:
    """`roots` and their descendants, each once; `into(pid)` False: not below that pid."""
    seen: set[int] = set()
    todo = list(roots)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        yield pid
        if into(pid):
            todo += children(pid)


def proc_cpu(pid: int) -> float:
    """utime + stime + cutime + cstime of `pid` in seconds; 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return 0.0
    # the command name may hold spaces and parentheses: the fields start after the last ')'
    return sum(int(x) for x in stat[stat.rindex(")") + 2:].split()[11:15]) / _TICK


def tree_cpu(*roots: int) -> float:
    """CPU seconds of `roots` and every process below them."""
    return sum(proc_cpu(pid) for pid in walk(roots))


def measure(work: Callable[[], T], *roots: int) -> tuple[T, float, float]:
    """(what `work` returned, its wall seconds, the CPU seconds `roots`' trees spent)."""
    cpu0 = tree_cpu(*roots)
    t0 = time.monotonic()
    out = work()
    seconds = time.monotonic() - t0
    return out, seconds, tree_cpu(*roots) - cpu0
