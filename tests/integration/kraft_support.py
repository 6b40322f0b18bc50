"""In-process KRaft quorums over real loopback sockets: each node is a `KRaftQuorum` behind a
`broker.server.Server` whose dispatcher routes the raft APIs to `broker.handlers.raft`.

A node can be stopped (its server closed, its quorum stopped and closed: files as a clean
stop leaves them), restarted on the same port, wiped, and cut off from the others (its
channels resolve no peer and the peers' resolve not it: requests fail as on a broken link).
Every wait is a condition polled until a deadline, then pytest.fail.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from odradek.broker.handlers import raft as handlers
from odradek.broker.server import Server
from odradek.broker.transport_signals import Disconnect
from odradek.metadata.quorum import SnapshotLoaded
from odradek.metadata.raft.client import RaftConfig
from odradek.metadata.raft.kraft import KRaftQuorum
from odradek.metadata.records import MetadataRecord, TopicRecord
from odradek.protocol.apis import ApiKey
from tests.support.broker import free_port

CLUSTER_ID = "kraft-test-cluster"
# Kafka's timeouts scaled down (election 1 s -> 0.4 s): the tests wait on conditions, never time
FAST = RaftConfig(election_timeout_ms=400, fetch_timeout_ms=1000, request_timeout_ms=1500,
                  fetch_max_wait_ms=200, retry_backoff_ms=20)

ROUTES: dict[int, Callable[..., Any]] = {
    ApiKey.VOTE: handlers.handle_vote,
    ApiKey.BEGIN_QUORUM_EPOCH: handlers.handle_begin_quorum_epoch,
    ApiKey.END_QUORUM_EPOCH: handlers.handle_end_quorum_epoch,
    ApiKey.DESCRIBE_QUORUM: handlers.handle_describe_quorum,
    ApiKey.FETCH_SNAPSHOT: handlers.handle_fetch_snapshot,
    ApiKey.FETCH: handlers.handle_metadata_fetch,
}


def topic(name: str) -> list[MetadataRecord]:
    return [TopicRecord(name, uuid.uuid4())]


class StateMachine:
    """What a commit listener builds: the topic names, in order; a snapshot replaces them."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.offsets: list[int] = []
        self.snapshots = 0

    def __call__(self, batch: list[tuple[int, Any]]) -> None:
        for offset, item in batch:
            if self.offsets:
                assert offset > self.offsets[-1], (offset, self.offsets[-1])
            self.offsets.append(offset)
            if isinstance(item, SnapshotLoaded):
                self.snapshots += 1
                self.names = [r.name for r in item.records if isinstance(r, TopicRecord)]
            elif isinstance(item, TopicRecord):
                self.names.append(item.name)

    def records(self) -> list[MetadataRecord]:
        return [TopicRecord(n, uuid.UUID(int=i + 1)) for i, n in enumerate(self.names)]


class Node:
    def __init__(self, node_id: int, data_dir: Path, port: int) -> None:
        self.node_id = node_id
        self.data_dir = data_dir
        self.port = port
        self.quorum: KRaftQuorum | None = None
        self.server: Server | None = None
        self.state = StateMachine()

    @property
    def q(self) -> KRaftQuorum:
        assert self.quorum is not None, f"node {self.node_id} is down"
        return self.quorum


class Cluster:
    def __init__(self, base: Path, voters: int = 3, observers: int = 0,
                 snapshot_bytes: int = 20 << 20) -> None:
        self.base = base
        self.snapshot_bytes = snapshot_bytes
        ids = list(range(1, voters + observers + 1))
        self.voter_ids = ids[:voters]
        self.nodes = {i: Node(i, base / f"node{i}", free_port()) for i in ids}
        self.addresses = {i: ("127.0.0.1", self.nodes[i].port) for i in self.voter_ids}
        self.cut: set[int] = set()

    def resolve_for(self, me: int) -> Callable[[int], tuple[str, int] | None]:
        def resolve(peer: int) -> tuple[str, int] | None:
            if me in self.cut or peer in self.cut:
                return None
            return self.addresses.get(peer)
        return resolve

    async def start(self, node_id: int) -> Node:
        node = self.nodes[node_id]
        node.state = StateMachine()
        q = await asyncio.to_thread(
            KRaftQuorum.open, node.data_dir, node_id, self.addresses, cluster_id=CLUSTER_ID,
            config=FAST, snapshot_bytes=self.snapshot_bytes)
        ctx = SimpleNamespace(quorum=q)

        def dispatch(conn: Any, frame: memoryview, header: Any) -> Any:
            handler = ROUTES.get(header.api_key)
            if handler is None or node_id in self.cut:
                raise Disconnect("not a raft api, or cut off")
            return handler(ctx, header, frame)

        server = Server(dispatch, 100 << 20)
        sock = socket.create_server(("127.0.0.1", node.port))
        await server.start("", 0, sock=sock)
        await q.start()
        assert q.channels is not None
        q.channels.resolve = self.resolve_for(node_id)
        q.add_commit_listener(node.state)
        q.set_snapshot_source(node.state.records)
        node.quorum, node.server = q, server
        return node

    async def stop(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.quorum is None:
            return
        assert node.server is not None
        node.server.stop_accepting()
        await node.quorum.stop()
        await node.server.drain(timeout=2.0)
        await asyncio.to_thread(node.quorum.close)
        node.quorum, node.server = None, None

    async def isolate(self, node_id: int) -> None:
        """Cut the node off: its connections break (an answer it still sends goes nowhere),
        and no new one is made from or to it until `heal`."""
        self.cut.add(node_id)
        server = self.nodes[node_id].server
        assert server is not None
        for conn in list(server.connections):
            conn.abort("cut off by the test")
        for node in self.up():
            if node.q.channels is not None:
                await node.q.channels.close()

    def heal(self) -> None:
        self.cut.clear()

    def wipe(self, node_id: int) -> None:
        shutil.rmtree(self.nodes[node_id].data_dir)

    async def start_all(self) -> None:
        for i in self.nodes:
            await self.start(i)

    async def stop_all(self) -> None:
        for i in list(self.nodes):
            await self.stop(i)

    def up(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.quorum is not None]

    def leaders(self) -> list[Node]:
        return [n for n in self.up() if n.q.is_leader]

    async def leader(self, timeout: float = 30.0, other_than: int | None = None) -> Node:
        """The one leader every live, connected voter follows."""
        def found() -> Node | None:
            leaders = [n for n in self.leaders() if n.node_id != other_than]
            if len(leaders) != 1:
                return None
            lead = leaders[0]
            others = [n for n in self.up() if n.node_id not in self.cut]
            if all(n.q.leader_id == lead.node_id and n.q.leader_epoch == lead.q.leader_epoch
                   for n in others):
                return lead
            return None
        return await wait_for(found, timeout, "one leader followed by every connected node")

    async def append(self, node: Node, records: list[MetadataRecord]) -> int:
        return await asyncio.to_thread(node.q.append, records)


async def wait_for(probe: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {timeout} s")
        await asyncio.sleep(0.02)


def run(coro: Awaitable[Any]) -> Any:
    return asyncio.run(coro)  # type: ignore[arg-type]


