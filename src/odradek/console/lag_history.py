"""Consumer lag over time: the console samples every group's lag every few seconds and keeps
the samples in a SQLite file, so the chart survives a console (or node) restart.

One row per (group, time): the total lag and the per-partition lags as JSON. Old rows go after
`retention_s` (default a day), pruned as samples are added. SQLite because it is in the
standard library, crash-safe, and a query by group and time is an index lookup.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

DEFAULT_RETENTION_S = 24 * 3600
_SCHEMA = """
CREATE TABLE IF NOT EXISTS lag (
    grp TEXT NOT NULL, ts_ms INTEGER NOT NULL, total INTEGER NOT NULL, parts TEXT NOT NULL,
    PRIMARY KEY (grp, ts_ms));
"""


@dataclass(frozen=True)
class Sample:
    ts_ms: int
    total: int
    partitions: dict[str, int]  # "topic:partition" -> lag


class LagHistory:
    """Thread-safe (the sampler writes from its thread, requests read from theirs)."""

    def __init__(self, path: Path | str, retention_s: float = DEFAULT_RETENTION_S) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.retention_ms = int(retention_s * 1000)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)

    def record(self, group: str, total: int, partitions: dict[str, int],
               ts_ms: int | None = None) -> None:
        now = int(time.time() * 1000) if ts_ms is None else ts_ms
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO lag VALUES (?, ?, ?, ?)",
                             (group, now, int(total), json.dumps(partitions)))
            self._db.execute("DELETE FROM lag WHERE ts_ms < ?", (now - self.retention_ms,))

    def series(self, group: str, since_ms: int = 0, limit: int = 5000) -> list[Sample]:
        """The group's samples at or after since_ms, oldest first (the newest `limit`)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT ts_ms, total, parts FROM lag WHERE grp = ? AND ts_ms >= ? "
                "ORDER BY ts_ms DESC LIMIT ?", (group, since_ms, limit)).fetchall()
        return [Sample(ts, total, json.loads(parts)) for ts, total, parts in reversed(rows)]

    def forget(self, group: str) -> None:
        """A deleted group's history goes with it."""
        with self._lock:
            self._db.execute("DELETE FROM lag WHERE grp = ?", (group,))

    def close(self) -> None:
        with self._lock:
            self._db.close()
