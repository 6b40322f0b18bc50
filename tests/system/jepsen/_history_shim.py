"""A stand-in for `checker`'s history.py (FAULTS.md's History) until that branch lands.

Deleted once `git merge checker` brings the real one; only the calls the harness makes.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Op:
    index: int
    time: int
    process: Any
    type: str
    f: str
    value: Any
    error: Any = None


class History:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._start = time.monotonic_ns()
        self._n = 0
        self._file = open(self.path, "a")  # noqa: SIM115 - closed by close()

    def _append(self, process: Any, type_: str, f: str, value: Any, error: Any = None) -> Op:
        with self._lock:
            op = Op(self._n, time.monotonic_ns() - self._start, process, type_, f, value, error)
            self._n += 1
            row = {"index": op.index, "time": op.time, "process": process, "type": type_,
                   "f": f, "value": value}
            if error is not None:
                row["error"] = error
            self._file.write(json.dumps(row) + "\n")
            self._file.flush()
            return op

    def invoke(self, process: Any, f: str, value: Any) -> Op:
        return self._append(process, "invoke", f, value)

    def ok(self, op: Op, value: Any) -> Op:
        return self._append(op.process, "ok", op.f, value)

    def fail(self, op: Op, value: Any, error: Any) -> Op:
        return self._append(op.process, "fail", op.f, value, error)

    def info(self, op: Op, value: Any, error: Any) -> Op:
        return self._append(op.process, "info", op.f, value, error)

    def nemesis(self, f: str, value: Any) -> Op:
        return self._append("nemesis", "info", f, value)

    def close(self) -> None:
        self._file.close()


def load(path: Path) -> list[Op]:
    ops = []
    for line in Path(path).read_text().splitlines():
        row = json.loads(line)
        ops.append(Op(row["index"], row["time"], row["process"], row["type"], row["f"],
                      row["value"], row.get("error")))
    return ops
