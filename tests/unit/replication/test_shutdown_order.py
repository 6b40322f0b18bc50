"""Nothing writes to a log once the node closes its logs (a SIGTERMed node logged a replica
append into a closed file, session 9). Without sockets, on the replication test cluster: a
follower's fetch answer held while its logs close; a metadata sync in flight while the replica
manager stops."""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from typing import Any

import pytest

from odradek.protocol.apis import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.storage.log_dir_failure import channel_for

from .support import batch
from .test_fetcher import Cluster, image


class HeldFetches:
    """A follower's channels: a Fetch answer carrying records waits for `release`."""

    def __init__(self, net: Any) -> None:
        self.net = net
        self.holding = asyncio.Event()
        self.release = asyncio.Event()
        self.calls = 0

    async def request(self, node_id: int, entity: Any, timeout_s: float) -> Any:
        self.calls += 1
        resp = await self.net.request(node_id, entity, timeout_s)
        if int(entity.__api_key__) == ApiKey.FETCH and any(
                p.records for t in resp.responses for p in t.partitions):
            self.holding.set()
            await self.release.wait()
        return resp

    async def close(self) -> None:
        pass


def test_a_replica_append_racing_the_close_fails_without_touching_the_file(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        c = Cluster(tmp_path)
        await c.sync(image(1, 1, (1, 2, 3), 0))
        leader = c.part(1)
        for _ in range(2):
            assert c.rms[1].append_to(leader, batch(), -1, 9).error == ErrorCode.none
        await c.until(lambda: c.part(2).log.log_end_offset == 2, "node 2 copied 2 batches")
        follower = c.part(2).log
        held = HeldFetches(c.net)
        c.rms[2].fetchers.channels = held
        # a fetch sent before the swap has been answered: the next ones go through `held`
        await c.until(lambda: held.calls > 0, "node 2 fetching through the gate")
        assert c.rms[1].append_to(leader, batch(), 1, 9).error == ErrorCode.none
        await asyncio.wait_for(held.holding.wait(), 10)
        # node 2's logs close while its fetcher holds an answer with a batch to append
        segment = next(follower.dir.glob("*.log"))
        size = segment.stat().st_size
        c.rms[2].log_manager.close()
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            calls = held.calls
            held.release.set()
            # the answer is applied as the request returns: the fetcher's next request
            # (after its backoff) comes after the append was tried
            await c.until(lambda: held.calls > calls, "the fetcher's next request")
        assert segment.stat().st_size == size  # nothing written, nothing cut
        assert follower.log_end_offset == 2
        assert not channel_for(follower.dir.parent).offline
        assert not [r for r in caplog.records if "failed" in r.getMessage()], caplog.text
        await c.close()

    asyncio.run(scenario())


def test_appends_and_truncations_of_a_closed_log_are_refused(tmp_path: Path) -> None:
    from odradek.protocol.records import BatchHeader
    from odradek.storage.config import LogConfig
    from odradek.storage.log import Log

    log = Log.open(tmp_path / "t-0", LogConfig())
    b = batch()
    log.append(b, BatchHeader.parse(b), 1)
    log.close()
    data = (tmp_path / "t-0" / "00000000000000000000.log").read_bytes()
    copy = bytearray(b)
    copy[0:8] = (5).to_bytes(8, "big")  # a follower's batch at offset 5
    for attempt in (lambda: log.append(b, BatchHeader.parse(b), 1),
                    lambda: log.append_many([(memoryview(copy),
                                              BatchHeader.parse(memoryview(copy)))],
                                            assign_offsets=False),
                    lambda: log.truncate_to(0)):
        with pytest.raises(KafkaError) as info:
            attempt()
        assert info.value.code == ErrorCode.kafka_storage_error
    assert (tmp_path / "t-0" / "00000000000000000000.log").read_bytes() == data
    assert log.log_end_offset == 1


def test_stop_waits_for_a_sync_in_flight_and_later_ones_start_no_fetcher(
        tmp_path: Path) -> None:
    async def scenario() -> None:
        c = Cluster(tmp_path)
        rm = c.rms[2]
        entered, go = threading.Event(), threading.Event()
        opener = rm._open_logs

        def gated_open(create: Any, drop: Any) -> Any:
            entered.set()
            go.wait(30)
            return opener(create, drop)

        rm._open_logs = gated_open  # type: ignore[method-assign]
        # the image makes node 2 a follower of node 1: its sync would start a fetcher
        sync = asyncio.ensure_future(rm.sync(image(1, 1, (1, 2, 3), 0)))
        assert await asyncio.to_thread(entered.wait, 30)
        stop = asyncio.ensure_future(rm.stop())
        for _ in range(5):
            await asyncio.sleep(0)
        assert not stop.done()  # waits for the sync in flight
        go.set()
        await asyncio.wait_for(sync, 30)
        await asyncio.wait_for(stop, 30)
        assert rm.fetchers.fetchers == {}
        await rm.sync(image(3, 2, (1, 2, 3), 1))  # a later metadata change
        assert rm.fetchers.fetchers == {}
        assert c.part(2).leader == 1  # not applied
        await c.close()

    asyncio.run(scenario())
