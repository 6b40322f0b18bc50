"""Checkpoint surgery for re-execution tests: make Spark run a finished micro-batch again."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def forget_last_commit(checkpoint: Path) -> int:
    """Delete the newest `commits/N` (and its .crc): on restart Spark re-executes batch N.

    This is what Spark sees when the driver dies after the sink wrote batch N and before the
    commit log recorded it. Returns N.
    """
    commits = sorted((p for p in (checkpoint / "commits").iterdir() if p.name.isdigit()),
                     key=lambda p: int(p.name))
    last = commits[-1]
    last.unlink()
    crc = last.with_name(f".{last.name}.crc")
    if crc.exists():
        crc.unlink()
    return int(last.name)


def committed_batches(checkpoint: Path) -> list[int]:
    return sorted(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())


def batches_run(progress: list[dict[str, Any]]) -> dict[int, int]:
    """batch id -> input rows, from a query's recentProgress (one entry per executed batch)."""
    return {int(p["batchId"]): int(p["numInputRows"]) for p in progress}
