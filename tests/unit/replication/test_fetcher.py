"""The replica fetcher end to end without sockets: three ReplicaManagers in one loop, their
requests carried as bytes through the broker's own Fetch and OffsetForLeaderEpoch handlers (the
wire encoding both ways), so the fetcher, the handlers and the follower path meet as they do
between real nodes. A leader change with a divergent tail on the old leader ends with
byte-identical logs."""

from __future__ import annotations

import asyncio
import os
import types
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from kio.schema.offset_for_leader_epoch.v4 import response as ofle

from odradek.broker.handlers import fetch as fetch_handler
from odradek.broker.handlers import partitions as partitions_handler
from odradek.metadata.image import MetadataImage, PartitionImage, TopicImage
from odradek.protocol.apis import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.fetch import FileRegion
from odradek.protocol.headers import encode_request_header, parse_request_header
from odradek.protocol.messages import decode_response, encode_request
from odradek.protocol.records import BatchHeader
from odradek.replication.config import (
    AlterPartitionItem,
    AlterPartitionResult,
    ReplicationConfig,
)
from odradek.replication.fetcher import ReplicaFetcherManager, fetcher_id
from odradek.replication.manager import ReplicaManager
from odradek.replication.partition import Partition
from odradek.security.quotas import ClientQuotas
from odradek.storage.config import LogConfig
from odradek.storage.log import Log
from odradek.storage.log_manager import LogManager

from .support import TID, batch, read_all

CONFIG = ReplicationConfig(replica_fetch_wait_max_ms=50, replica_fetch_backoff_ms=20)


class Loopback:
    """`Channels` for tests: a request entity is encoded, handed to the target node's handler
    as a frame, and its response parts decoded again."""

    def __init__(self, nodes: dict[int, Any]) -> None:
        self.nodes = nodes
        self.down: set[int] = set()

    async def request(self, node_id: int, entity: Any, timeout_s: float) -> Any:
        if node_id in self.down or node_id not in self.nodes:
            raise ConnectionError(f"node {node_id} is down")
        api_key, version = int(entity.__api_key__), int(entity.__version__)
        frame = memoryview(encode_request_header(api_key, version, 1, "test")
                           + encode_request(entity))
        header = parse_request_header(frame)
        ctx = self.nodes[node_id]
        handler = (fetch_handler.handle if api_key == ApiKey.FETCH
                   else partitions_handler.handle_offset_for_leader_epoch)
        result = handler(ctx, header, frame)
        if isinstance(result, asyncio.Future):
            result = await asyncio.wait_for(result, timeout_s)
        _, parts = result
        body = b"".join(os.pread(p.fd, p.size, p.position) if isinstance(p, FileRegion)
                        else bytes(p) for p in parts)
        return decode_response(api_key, version, body, 0)

    async def close(self) -> None:
        pass


def image(leader: int, epoch: int, isr: tuple[int, ...], pepoch: int) -> MetadataImage:
    topic = TopicImage("t", TID, {0: PartitionImage(0, (1, 2, 3), isr, leader, epoch, pepoch)})
    return MetadataImage(topics_by_name={"t": topic}, topics_by_id={TID: topic})


class Cluster:
    def __init__(self, tmp_path: Path) -> None:
        self.ctxs: dict[int, Any] = {}
        self.net = Loopback(self.ctxs)
        self.alters: list[AlterPartitionItem] = []
        config = replace(LogConfig(), min_insync_replicas=2)
        self.rms: dict[int, ReplicaManager] = {}
        for n in (1, 2, 3):
            rm = ReplicaManager(LogManager(tmp_path / str(n), config), n, tmp_path / str(n),
                                lambda t, c=config: c, channels=self.net,
                                alter_partition=self.alter, config=CONFIG)
            rm.load(MetadataImage())
            self.rms[n] = rm
            # no authorizer and no client quotas, as a node without issue 16's settings
            self.ctxs[n] = types.SimpleNamespace(
                replica_manager=rm, image=MetadataImage(topics_by_id={TID: TopicImage("t", TID, {})}),
                authorizer=None, quotas=ClientQuotas(dict))

    async def alter(self, item: AlterPartitionItem) -> AlterPartitionResult:
        # the controller accepts every proposal of the current leader epoch
        self.alters.append(item)
        return AlterPartitionResult(ErrorCode.none, item.leader_id, item.leader_epoch,
                                    item.partition_epoch + 1, item.new_isr)

    async def sync(self, img: MetadataImage, nodes: tuple[int, ...] = (1, 2, 3)) -> None:
        for n in nodes:
            await self.rms[n].sync(img)

    def part(self, n: int) -> Any:
        part = self.rms[n].get("t", 0)
        assert part is not None
        return part

    async def until(self, cond: Any, what: str) -> None:
        for _ in range(1000):
            if cond():
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"never happened: {what}")

    async def close(self) -> None:
        for rm in self.rms.values():
            await rm.stop()
            rm.log_manager.close()


def test_followers_replicate_and_a_returning_leader_truncates(tmp_path: Path) -> None:
    async def scenario() -> None:
        c = Cluster(tmp_path)
        await c.sync(image(1, 1, (1, 2, 3), 0))
        leader = c.part(1)
        for _ in range(5):
            assert c.rms[1].append_to(leader, batch(), -1, 9).error == ErrorCode.none
        await c.until(lambda: leader.high_watermark == 5, "HW 5 on the leader")
        await c.until(lambda: all(c.part(n).high_watermark == 5 for n in (2, 3)),
                      "the followers learn the HW")
        assert read_all(c.part(2).log) == read_all(c.part(3).log) == read_all(leader.log)
        # node 1 is cut off and takes writes nobody copies (acks=1); 2 leads in epoch 2
        c.net.down.add(1)
        for _ in range(3):
            c.rms[1].append_to(leader, batch(value=b"lost"), 1, 9)
        await c.sync(image(2, 2, (2, 3), 1), (2, 3))
        new = c.part(2)
        for _ in range(2):
            assert c.rms[2].append_to(new, batch(value=b"kept"), -1, 9).error == ErrorCode.none
        await c.until(lambda: new.high_watermark == 7, "HW 7 on the new leader")
        # node 1 returns as a follower: OffsetForLeaderEpoch, its tail of epoch 1 past 5 goes
        c.net.down.discard(1)
        await c.sync(image(2, 2, (2, 3), 1), (1,))
        await c.until(lambda: leader.log.log_end_offset == 7
                      and read_all(leader.log) == read_all(new.log), "node 1 caught up")
        assert b"lost" not in read_all(leader.log)
        # and it is taken back into the ISR through AlterPartition
        await c.until(lambda: new.isr == [2, 3, 1], "ISR expansion")
        assert c.alters[-1].new_isr == (2, 3, 1) and c.alters[-1].leader_epoch == 2
        await c.close()

    asyncio.run(scenario())


def test_one_fetcher_per_source_broker_and_fetcher_id(tmp_path: Path) -> None:
    async def scenario() -> None:
        cfg = replace(CONFIG, num_replica_fetchers=2)
        manager = ReplicaFetcherManager(2, Loopback({}), cfg)
        parts = []
        for i in range(8):
            log_dir = tmp_path / f"t-{i}"
            part = Partition("t", i, TID, Log.open(log_dir, LogConfig()), leader=-1,
                             leader_epoch=-1, replicas=[1, 2, 3], isr=[1, 2, 3], local_id=2)
            part.make_follower(1 if i < 6 else 3, 1, 0, [1, 2, 3], [1, 2, 3])
            manager.add(part)
            parts.append(part)
        expected = {(1 if i < 6 else 3, fetcher_id("t", i, 2)) for i in range(8)}
        assert set(manager.fetchers) == expected
        assert {s for s, _ in manager.fetchers} == {1, 3}
        assert all(fid in (0, 1) for _, fid in manager.fetchers)
        # a new leader moves the partition to that broker's fetcher
        parts[0].make_follower(3, 2, 1, [1, 2, 3], [1, 2, 3])
        manager.add(parts[0])
        state = manager.state_of("t", 0)
        assert state is not None and state.partition is parts[0]
        assert ("t", 0) in manager.fetchers[(3, fetcher_id("t", 0, 2))].states
        for part in parts:
            manager.remove(part)
        assert manager.fetchers == {}
        await manager.shutdown()
        for part in parts:
            part.log.close()

    asyncio.run(scenario())


def test_an_answer_to_a_request_sent_before_a_restart_is_dropped(tmp_path: Path) -> None:
    class Gate:
        """Answers the first OffsetForLeaderEpoch with "epoch 1 ends at 0" once released."""

        def __init__(self) -> None:
            self.release = asyncio.Event()
            self.asked = 0

        async def request(self, node_id: int, entity: Any, timeout_s: float) -> Any:
            self.asked += 1
            if self.asked > 1:
                await asyncio.Event().wait()  # later questions stay unanswered
            await self.release.wait()
            return ofle.OffsetForLeaderEpochResponse(
                throttle_time=timedelta(0),  # type: ignore[arg-type]
                topics=(ofle.OffsetForLeaderTopicResult(topic="t", partitions=(  # type: ignore[arg-type]
                    ofle.EpochEndOffset(error_code=0, partition=0, leader_epoch=1,  # type: ignore[arg-type]
                                        end_offset=0),)),))  # type: ignore[arg-type]

    async def scenario() -> None:
        gate = Gate()
        manager = ReplicaFetcherManager(2, gate, CONFIG)
        log = Log.open(tmp_path / "t-0", LogConfig())
        part = Partition("t", 0, TID, log, leader=-1, leader_epoch=-1, replicas=[1, 2],
                         isr=[1, 2], local_id=2)
        part.make_leader(1, 0, [1, 2], [2], 0)  # it led epoch 1 and wrote 3 records
        b = batch(3)
        part.append_records_to_leader(b, BatchHeader.parse(b), None)
        part.make_follower(1, 2, 1, [1, 2], [1, 2])
        manager.add(part)
        while not gate.asked:
            await asyncio.sleep(0.01)
        state = manager.state_of("t", 0)
        assert state is not None and state.generation == 0
        # a newer image arrives while the question is out: the answer no longer counts
        part.make_follower(1, 3, 2, [1, 2], [1, 2])
        manager.add(part)
        assert state.generation == 1
        gate.release.set()
        await asyncio.sleep(0.1)
        assert log.log_end_offset == 3  # the stale "ends at 0" truncated nothing
        assert gate.asked == 2  # and the question was asked again
        await manager.shutdown()
        log.close()

    asyncio.run(scenario())
