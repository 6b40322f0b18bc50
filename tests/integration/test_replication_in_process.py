"""Partition replication over real loopback sockets, in one process: three ReplicaManagers,
each behind the broker's own `Server` and `Dispatcher`, their replica fetchers talking through
`odradek.network.Channels` (Fetch v15 with ReplicaState, OffsetForLeaderEpoch v4). Batches
larger than the inline-read bound leave the leader by sendfile. Until the node wires clusters
(h14node), this is the whole follower path on the wire: followers copy the leader byte for
byte, acks=all waits for them, a returning old leader truncates its divergent tail."""

from __future__ import annotations

import asyncio
import socket
import types
from dataclasses import replace
from pathlib import Path
from typing import Any

from odradek.broker.apis import Dispatcher, advertised_apis
from odradek.broker.server import Server
from odradek.metadata.image import MetadataImage, PartitionImage, TopicImage
from odradek.network.channel import Channels
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import BatchHeader, Record, build_batch, iter_batches
from odradek.replication.config import (
    AlterPartitionItem,
    AlterPartitionResult,
    ReplicationConfig,
)
from odradek.replication.manager import ReplicaManager
from odradek.storage.config import LogConfig
from odradek.storage.log_manager import LogManager
from tests.unit.replication.support import TID, now_ms

CONFIG = ReplicationConfig(replica_fetch_wait_max_ms=100, replica_fetch_backoff_ms=50,
                           replica_socket_timeout_ms=5000)


def image(leader: int, epoch: int, isr: tuple[int, ...], pepoch: int) -> MetadataImage:
    topic = TopicImage("t", TID, {0: PartitionImage(0, (1, 2, 3), isr, leader, epoch, pepoch)})
    return MetadataImage(topics_by_name={"t": topic}, topics_by_id={TID: topic})


def big_batch(tag: bytes) -> memoryview:
    # ~40 KB: above INLINE_READ_BYTES, so the leader answers with a FileRegion (sendfile)
    return memoryview(build_batch([Record(-1, now_ms(), None, tag * 4000)] * 10))


def all_bytes(log: Any) -> bytes:
    out, offset = [], 0
    while offset < log.log_end_offset:
        res = log.read(offset, 1 << 22)
        data = log.read_bytes(res.region)
        out.append(data)
        *_, (h, _) = iter_batches(data)
        offset = h.base_offset + h.last_offset_delta + 1
    return b"".join(out)


class Node:
    def __init__(self, n: int, root: Path, ports: dict[int, int], cluster: Any) -> None:
        config = replace(LogConfig(), min_insync_replicas=2)
        self.channels = Channels(f"replica-{n}", lambda peer: ("127.0.0.1", ports[peer]))
        self.rm = ReplicaManager(LogManager(root / str(n), config), n, root / str(n),
                                 lambda t: config, channels=self.channels,
                                 alter_partition=cluster.alter, config=CONFIG)
        self.rm.load(MetadataImage())
        # what the replication path reads of a broker context: no ACLs, quotas or schema
        # validation on these nodes
        self.ctx = types.SimpleNamespace(replica_manager=self.rm, image=image(1, 1, (), 0),
                                         advertised_apis=advertised_apis(), authorizer=None,
                                         quotas=types.SimpleNamespace(active=False),
                                         schema_validation=None)
        self.server = Server(Dispatcher(self.ctx), 100 << 20)  # type: ignore[arg-type]
        self.sock = socket.create_server(("127.0.0.1", 0))
        ports[n] = self.sock.getsockname()[1]

    def part(self) -> Any:
        part = self.rm.get("t", 0)
        assert part is not None
        return part


class Cluster:
    def __init__(self, root: Path) -> None:
        self.ports: dict[int, int] = {}
        self.nodes = {n: Node(n, root, self.ports, self) for n in (1, 2, 3)}

    async def alter(self, item: AlterPartitionItem) -> AlterPartitionResult:
        return AlterPartitionResult(ErrorCode.none, item.leader_id, item.leader_epoch,
                                    item.partition_epoch + 1, item.new_isr)

    async def start(self) -> None:
        for node in self.nodes.values():
            await node.server.start("127.0.0.1", 0, sock=node.sock)

    async def sync(self, img: MetadataImage, which: tuple[int, ...] = (1, 2, 3)) -> None:
        for n in which:
            self.nodes[n].ctx.image = img
            await self.nodes[n].rm.sync(img)

    async def stop(self) -> None:
        for node in self.nodes.values():
            node.server.stop_accepting()
            await node.rm.stop()
            await node.channels.close()
            await node.server.drain(timeout=2.0)
            node.rm.log_manager.close()


async def until(cond: Any, what: str) -> None:
    for _ in range(3000):
        if cond():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never happened: {what}")


def test_replication_over_loopback(tmp_path: Path) -> None:
    async def scenario() -> None:
        c = Cluster(tmp_path)
        await c.start()
        try:
            await c.sync(image(1, 1, (1, 2, 3), 0))
            leader = c.nodes[1].part()
            rm = c.nodes[1].rm
            waits = []
            for i in range(4):
                b = big_batch(b"%d" % i)
                r = rm.append_to(leader, b, -1, 9)
                assert r.error == ErrorCode.none
                waits.append((leader, r.last_offset + 1, leader.leader_epoch))
            done = rm.delay_produce(waits, 30_000, lambda errors: errors)
            if isinstance(done, asyncio.Future):
                done = await asyncio.wait_for(done, 60)
            assert done == [ErrorCode.none] * 4  # acks=all: the ISR has every batch
            await until(lambda: all(c.nodes[n].part().high_watermark == 40 for n in (2, 3)),
                        "the followers learn the HW")
            ref = all_bytes(leader.log)
            assert all(all_bytes(c.nodes[n].part().log) == ref for n in (2, 3))

            # node 2 leads epoch 2; node 1 has not heard yet (its image is late) and takes a
            # write nobody copies (nobody fetches from it any more)
            await c.sync(image(2, 2, (2, 3), 1), (2, 3))
            b = big_batch(b"x")
            leader.append_records_to_leader(b, BatchHeader.parse(b), None)
            new = c.nodes[2].part()
            r = c.nodes[2].rm.append_to(new, big_batch(b"y"), 1, 9)
            assert r.error == ErrorCode.none
            await until(lambda: new.high_watermark == 50, "HW 50 on the new leader")
            assert leader.log.log_end_offset == 50 and all_bytes(leader.log) != all_bytes(new.log)
            # node 1 learns it follows 2: truncate to 40, then copy 40-49
            await c.sync(image(2, 2, (2, 3), 1), (1,))
            await until(lambda: all_bytes(leader.log) == all_bytes(new.log),
                        "node 1 matches the new leader")
            assert b"x" * 4000 not in all_bytes(leader.log)
            await until(lambda: new.isr == [2, 3, 1], "node 1 back in the ISR")
        finally:
            await c.stop()

    asyncio.run(scenario())
