"""The history of a Jepsen-style run: every client operation and every fault, one JSON line each.

A run's history file is the single source of truth the checker reads; it is kept after the
run so it can be checked again (`python -m tests.system.jepsen.checker HISTORY`).

File format: one JSON object per line, appended and flushed as it happens:

    {"index": 17, "time": 123456789, "process": 3, "type": "invoke", "f": "txn",
     "value": [["send", "t0-1", 42]]}
    {"index": 18, "time": 130000000, "process": 3, "type": "ok", "f": "txn",
     "value": [["send", "t0-1", [1007, 42]]]}

- `index`: position in the file, from 0, gapless.
- `time`: nanoseconds since the History was opened (monotonic clock, so a skewed wall clock
  on the nodes does not bend it).
- `process`: who did it. An int (or short string) per client thread; "nemesis" for faults. A
  process has at most one operation outstanding: each "invoke" is completed by the next
  "ok"/"fail"/"info" of the same process. When a worker throws its client away (after a crash,
  a fencing error, an unknown outcome it cannot resolve) it takes a fresh process id, so the
  checker's per-process rules (monotonic sends and polls) apply to one client's lifetime.
- `type`: "invoke" (about to ask), "ok" (it happened), "fail" (it certainly did not happen),
  "info" (unknown: a timeout, a lost connection, a crash; the op may or may not have happened).
  Nemesis ops are a lone "info" (no invoke).
- `f` and `value`, following Jepsen's Kafka workload:
  - "txn", "send", "poll": `value` is a list of micro-ops. On invoke a send is
    `["send", key, value]` and a poll is `["poll"]`. On ok a send becomes
    `["send", key, [offset, value]]` (offset as the broker acknowledged it; null when the
    client did not learn it) and a poll becomes `["poll", {key: [[offset, value], ...]}]`
    listing what that poll returned, in order. On fail/info the invoke's micro-ops are
    repeated (a send without an offset). A "txn" with sends is one Kafka transaction (W2);
    "send"/"poll" are the same shape without one.
  - Keys are strings naming one topic-partition: "<topic>-<partition>" (`key_of`/`split_key`).
  - Values are ints, unique per key across the whole run, and increasing per producer process.
  - "assign": value the list of keys a consumer assigned itself (manual assignment).
  - "subscribe": value the list of topics a consumer subscribed to.
  - "rebalance": value {"assigned": [keys], "revoked": [keys]}: the group moved partitions
    of a subscribed consumer; recorded with `History.event` (an invoke and its ok at once).
  - "crash": the worker dropped its client (closed or abandoned it); recorded with `event`.
  - "final-poll": like "poll", but made after every fault healed (W4 and the end of W1/W2); a
    value acknowledged but absent from the final polls is "unseen".
  - W3 (metadata churn) uses "create-topic", "delete-topic", "create-partitions",
    "alter-config", "describe-config", "list-topics"; its values are documented in
    `workloads/w3.py`.
  - Nemesis: `f` names the fault ("kill", "term", "pause", "resume", "partition", "heal",
    "loss", "clock", "disk-full", ...) and `value` says on what (node ids, durations, ...).
- `error` (only when there is one): a short string, e.g. the Kafka error name.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

INVOKE = "invoke"
OK = "ok"
FAIL = "fail"
INFO = "info"
TYPES = (INVOKE, OK, FAIL, INFO)
NEMESIS = "nemesis"
THREAD_OPS = 12  # ops kept per thread for `History.thread_ops`


@dataclass(frozen=True, slots=True)
class Op:
    index: int
    time: int
    process: int | str
    type: str
    f: str
    value: Any = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "index": self.index,
            "time": self.time,
            "process": self.process,
            "type": self.type,
            "f": self.f,
            "value": self.value,
        }
        if self.error is not None:
            d["error"] = self.error
        return d

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Op:
        typ = d["type"]
        if typ not in TYPES:
            raise ValueError(f"op {d.get('index')}: unknown type {typ!r}")
        return Op(
            index=int(d["index"]),
            time=int(d["time"]),
            process=d["process"],
            type=typ,
            f=str(d["f"]),
            value=d.get("value"),
            error=d.get("error"),
        )


def key_of(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def split_key(key: str) -> tuple[str, int]:
    # Topic names may contain '-', the partition never does: split on the last one.
    topic, _, part = key.rpartition("-")
    return topic, int(part)


class History:
    """An append-only, thread-safe history file. Every op is written and flushed at once, so
    a harness killed mid-run still leaves everything up to the kill on disk."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._file = self.path.open("w", encoding="utf-8")
        self._start = time.monotonic_ns()
        self._next = 0
        self._ops: list[Op] = []
        self._processes = 0
        # each thread's last ops, for a harness to say what a stuck worker was doing
        self._by_thread: dict[str, deque[Op]] = {}

    def new_process(self) -> int:
        """A fresh process id (a client's lifetime), unique within this history."""
        with self._lock:
            self._processes += 1
            return self._processes

    def _append(self, process: int | str, typ: str, f: str, value: Any, error: str | None) -> Op:
        with self._lock:
            if self._file.closed:
                raise RuntimeError("history is closed")
            op = Op(self._next, time.monotonic_ns() - self._start, process, typ, f, value, error)
            self._next += 1
            self._file.write(json.dumps(op.to_dict(), separators=(",", ":")) + "\n")
            self._file.flush()
            self._ops.append(op)
            name = threading.current_thread().name
            last = self._by_thread.get(name)
            if last is None:
                last = self._by_thread[name] = deque(maxlen=THREAD_OPS)
            last.append(op)
            return op

    def invoke(self, process: int | str, f: str, value: Any = None) -> Op:
        return self._append(process, INVOKE, f, value, None)

    def ok(self, op: Op, value: Any = None) -> Op:
        return self._append(op.process, OK, op.f, value, None)

    def fail(self, op: Op, value: Any = None, error: str | None = None) -> Op:
        return self._append(op.process, FAIL, op.f, op.value if value is None else value, error)

    def info(self, op: Op, value: Any = None, error: str | None = None) -> Op:
        return self._append(op.process, INFO, op.f, op.value if value is None else value, error)

    def event(self, process: int | str, f: str, value: Any = None) -> Op:
        """Something that happened to a client rather than something it asked for (a group
        rebalance, a dropped client): an invoke and its ok, written together."""
        op = self.invoke(process, f, value)
        return self.ok(op, value)

    def nemesis(self, f: str, value: Any = None) -> Op:
        return self._append(NEMESIS, INFO, f, value, None)

    def ops(self) -> list[Op]:
        with self._lock:
            return list(self._ops)

    def thread_ops(self, thread_name: str) -> list[Op]:
        """The last ops (up to THREAD_OPS) the thread of that name wrote."""
        with self._lock:
            return list(self._by_thread.get(thread_name, ()))

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.close()

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def iter_ops(path: str | Path) -> Iterator[Op]:
    with Path(path).open(encoding="utf-8") as f:
        lines = f.read().split("\n")
    for n, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError:
            # Only the last line may be torn (the harness died mid-write); anything else is
            # a damaged file and must not be checked as if it were whole.
            if all(not rest.strip() for rest in lines[n + 1 :]):
                return
            raise ValueError(f"{path}: line {n + 1} is not JSON") from None
        yield Op.from_dict(d)


def load(path: str | Path) -> list[Op]:
    """Read a kept history back, in file order."""
    return list(iter_ops(path))
