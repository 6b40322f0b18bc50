"""DelayedFetch.start: one on_done per park, watchers, timer and purgatory entry gone after it."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from odradek.protocol.records import BatchHeader, Record, build_batch
from odradek.replication.partition import Partition
from odradek.replication.purgatory import DelayedFetch, DelayedOperationPurgatory
from odradek.storage.log import Log, LogConfig


def _partition(path: Path) -> Partition:
    log = Log.open(path / "t-0", LogConfig())
    return Partition("t", 0, uuid.uuid4(), log, leader=1, leader_epoch=0, replicas=[1], isr=[1])


def _append(part: Partition) -> None:
    batch = memoryview(build_batch([Record(-1, 0, None, b"x" * 50)]))
    part.append(batch, BatchHeader.parse(batch), None)


def test_append_wakes_once_and_unregisters(tmp_path: Path) -> None:
    part = _partition(tmp_path)

    async def scenario() -> list[str]:
        calls: list[str] = []
        purgatory = DelayedOperationPurgatory("Fetch")
        fetch = DelayedFetch([part], 1, 0, purgatory=purgatory)
        assert fetch.start(30_000, lambda: calls.append("done"))
        assert part._watchers and fetch in purgatory
        _append(part)
        _append(part)
        fetch.complete()
        assert calls == []  # never from inside the append
        await asyncio.sleep(0.01)
        assert not part._watchers and fetch not in purgatory
        return calls

    try:
        assert asyncio.run(scenario()) == ["done"]
    finally:
        part.log.close()


def test_timeout_and_cancel(tmp_path: Path) -> None:
    part = _partition(tmp_path)

    async def scenario() -> tuple[list[str], list[str]]:
        timed: list[str] = []
        purgatory = DelayedOperationPurgatory("Fetch")
        DelayedFetch([part], 10**9, 0, purgatory=purgatory).start(5, lambda: timed.append("done"))
        cancelled: list[str] = []
        fetch = DelayedFetch([part], 10**9, 0, purgatory=purgatory)
        fetch.start(5, lambda: cancelled.append("done"))
        fetch.cancel()
        await asyncio.sleep(0.05)
        assert not part._watchers and not purgatory
        return timed, cancelled

    try:
        assert asyncio.run(scenario()) == (["done"], [])
    finally:
        part.log.close()


def test_nothing_to_wait_for(tmp_path: Path) -> None:
    part = _partition(tmp_path)

    async def scenario() -> list[bool]:
        return [DelayedFetch([part], 1, 1).start(100, lambda: None),
                DelayedFetch([part], 1, 0).start(0, lambda: None),
                DelayedFetch([], 1, 0).start(100, lambda: None)]

    try:
        assert asyncio.run(scenario()) == [False, False, False]
        assert not part._watchers
    finally:
        part.log.close()
