"""A read_committed long poll wakes when a marker moves the last stable offset, not on every
transactional append (which it could not return); read_uncommitted wakes on the append."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import Record, build_batch
from odradek.replication.purgatory import DelayedFetch
from tests.unit.coordinator.test_txn_offsets_replay import setup


def test_read_committed_wait_wakes_on_the_marker(tmp_path: Path) -> None:
    node, tc = setup(tmp_path)
    part = node.rm.get("data", 0)
    r = tc.init_producer_id("df", 60000)
    pid, epoch = r.producer_id, r.producer_epoch
    assert tc.add_partitions("df", pid, epoch, [("data", 0)])[("data", 0)] == ErrorCode.none

    def append(seq: int) -> None:
        batch = build_batch([Record(-1, int(time.time() * 1000), None, b"v" * 50)],
                            producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                            transactional=True)
        assert node.rm.append("data", 0, memoryview(batch), -1).error == ErrorCode.none

    async def scenario() -> tuple[bool, bool, bool]:
        committed = DelayedFetch([part], 1, 0, read_committed=True)
        uncommitted = DelayedFetch([part], 1, 0)
        waits = [asyncio.ensure_future(committed.wait(30000)),
                 asyncio.ensure_future(uncommitted.wait(30000))]
        await asyncio.sleep(0.01)
        append(0)
        append(1)
        await asyncio.sleep(0.05)
        early = waits[0].done()
        assert await asyncio.wait_for(waits[1], 10)  # min_bytes reached, not the timer
        assert tc.end_txn("df", pid, epoch, True) == ErrorCode.none
        woke = await asyncio.wait_for(waits[0], 10)
        # a wait that starts after the marker it missed returns at once
        lso_before = {part: part.last_stable_offset - 1}
        late = await asyncio.wait_for(
            DelayedFetch([part], 1, 0, True, lso_before).wait(30000), 10)
        return early, woke, late

    early, woke, late = asyncio.run(scenario())
    assert not early  # the transactional appends did not wake the read_committed fetch
    assert woke and late
    node.close()
