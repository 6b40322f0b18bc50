"""The produce, fetch, ListOffsets and OffsetForLeaderEpoch handlers in a cluster's roles,
through the dispatcher without sockets (tests/unit/broker/support.Broker, made a replicated
leader or a follower by hand): acks=all through the produce purgatory, NOT_ENOUGH_REPLICAS,
NOT_LEADER_OR_FOLLOWER on a follower, consumers reading a follower (KIP-392), follower fetches
with ReplicaState, and the route of a `__cluster_metadata` Fetch to the raft handler."""

from __future__ import annotations

import asyncio
import inspect
import sys
import time
import types
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from odradek.protocol.apis import ApiKey, response_header_version
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import parse_request_header
from odradek.protocol.messages import decode_response
from odradek.protocol.records import Record, build_batch
from tests.unit.broker.support import Broker, _bytes

E = ErrorCode


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path)
    b.create("t", 1)
    b.create("m", 1, **{"min.insync.replicas": "2"})
    yield b
    b.close()


def now() -> int:
    return int(time.time() * 1000)


async def call(b: Broker, api_key: int, version: int, values: dict[str, Any]) -> Any:
    """As Broker.call, on a running loop (a parked request answers later)."""
    frame = memoryview(b.frame(api_key, version, b.request(api_key, version, values)))
    result = b.dispatch(b.conn, frame, parse_request_header(frame))
    if inspect.isawaitable(result):
        result = await asyncio.wait_for(result, 10)
    hv, parts = result
    assert hv == response_header_version(api_key, version)
    return decode_response(api_key, version, b"".join(_bytes(p) for p in parts))


def produce_values(topic: str, acks: int, timeout: int = 5000) -> dict[str, Any]:
    return {"transactional_id": None, "acks": acks, "timeout": timeout,
            "topic_data": [{"name": topic, "partition_data": [
                {"index": 0, "records": build_batch([Record(-1, now(), b"k", b"v")])}]}]}


def produce_code(r: Any) -> tuple[int, int]:
    p = r.responses[0].partition_responses[0]
    return p.error_code, p.base_offset


def follower_fetch(b: Broker, replica: int, offset: int, epoch: int) -> dict[str, Any]:
    tid = b.controller.image.topics_by_name["t"].topic_id
    return {"replica_state": {"replica_id": replica, "replica_epoch": 5}, "max_wait": 0,
            "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
            "session_epoch": -1, "topics": [{"topic_id": tid, "partitions": [{
                "partition": 0, "current_leader_epoch": epoch, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": -1,
                "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def consumer_fetch(version: int, topic: str = "t") -> dict[str, Any]:
    values: dict[str, Any] = {
        "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
            "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": []}
    if version >= 11:
        values["rack_id"] = ""
    if version >= 12:
        values["topics"][0]["partitions"][0]["last_fetched_epoch"] = -1
    return values


def test_acks_all_completes_when_the_follower_fetches(broker: Broker) -> None:
    async def scenario() -> None:
        part = broker.rm.get("t", 0)
        assert part is not None
        part.make_leader(part.leader_epoch + 1, 1, [1, 2], [1, 2], now())
        epoch = part.leader_epoch
        pending = asyncio.ensure_future(call(broker, ApiKey.PRODUCE, 9, produce_values("t", -1)))
        await asyncio.sleep(0.05)
        assert not pending.done() and len(broker.rm.produce_purgatory) == 1
        r = await call(broker, ApiKey.FETCH, 15, follower_fetch(broker, 2, 1, epoch))
        p = r.responses[0].partitions[0]
        assert p.error_code == E.none and p.high_watermark == 1
        assert produce_code(await pending) == (E.none, 0)
        # nobody fetches: the produce times out; the batch stays in the leader's log
        timed = await call(broker, ApiKey.PRODUCE, 9, produce_values("t", -1, timeout=30))
        assert produce_code(timed) == (E.request_timed_out, 1)
        assert part.log_end_offset == 2 and part.high_watermark == 1
        # acks=1 answers at once
        assert produce_code(await call(broker, ApiKey.PRODUCE, 9,
                                       produce_values("t", 1)))[0] == E.none

    asyncio.run(scenario())


def test_not_enough_replicas_appends_nothing(broker: Broker) -> None:
    async def scenario() -> None:
        part = broker.rm.get("m", 0)
        assert part is not None
        r = await call(broker, ApiKey.PRODUCE, 9, produce_values("m", -1))
        assert produce_code(r)[0] == E.not_enough_replicas and part.log_end_offset == 0
        assert produce_code(await call(broker, ApiKey.PRODUCE, 9,
                                       produce_values("m", 1)))[0] == E.none

    asyncio.run(scenario())


def test_a_follower_refuses_writes_and_leader_only_reads(broker: Broker) -> None:
    async def scenario() -> None:
        part = broker.rm.get("t", 0)
        assert part is not None
        await call(broker, ApiKey.PRODUCE, 9, produce_values("t", 1))
        part.make_follower(2, part.leader_epoch + 1, 1, [1, 2], [1, 2])
        assert produce_code(await call(broker, ApiKey.PRODUCE, 9,
                                       produce_values("t", 1)))[0] == E.not_leader_or_follower
        lo = await call(broker, ApiKey.LIST_OFFSETS, 7, {
            "replica_id": -1, "isolation_level": 0, "topics": [{"name": "t", "partitions": [
                {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
        assert lo.topics[0].partitions[0].error_code == E.not_leader_or_follower
        ofle = await call(broker, ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, {
            "replica_id": 3, "topics": [{"topic": "t", "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]})
        assert ofle.topics[0].partitions[0].error_code == E.not_leader_or_follower
        # consumers: before Fetch v11 the leader only; with client metadata the follower
        # serves them up to its HW (KIP-392)
        old = await call(broker, ApiKey.FETCH, 10, consumer_fetch(10))
        assert old.responses[0].partitions[0].error_code == E.not_leader_or_follower
        new = await call(broker, ApiKey.FETCH, 12, consumer_fetch(12))
        p = new.responses[0].partitions[0]
        assert p.error_code == E.none and p.records and p.high_watermark == 1
        # another follower never fetches from a follower
        r = await call(broker, ApiKey.FETCH, 15, follower_fetch(broker, 3, 0, -1))
        assert r.responses[0].partitions[0].error_code == E.not_leader_or_follower

    asyncio.run(scenario())


def test_offset_for_leader_epoch_answers_followers(broker: Broker) -> None:
    async def scenario() -> None:
        part = broker.rm.get("t", 0)
        assert part is not None
        first = part.leader_epoch
        for _ in range(2):
            await call(broker, ApiKey.PRODUCE, 9, produce_values("t", 1))
        part.make_leader(first + 3, 1, [1, 2], [1, 2], now())
        await call(broker, ApiKey.PRODUCE, 9, produce_values("t", 1))

        async def ask(epoch: int, current: int = -1) -> Any:
            r = await call(broker, ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, {
                "replica_id": 2, "topics": [{"topic": "t", "partitions": [
                    {"partition": 0, "current_leader_epoch": current, "leader_epoch": epoch}]}]})
            return r.topics[0].partitions[0]

        p = await ask(first + 1)  # an epoch this leader never had: where the next one starts
        assert (p.error_code, p.leader_epoch, p.end_offset) == (E.none, first, 2)
        p = await ask(first + 3)
        assert (p.leader_epoch, p.end_offset) == (first + 3, 3)
        assert (await ask(first, current=first)).error_code == E.fenced_leader_epoch
        assert (await ask(first, current=first + 9)).error_code == E.unknown_leader_epoch

    asyncio.run(scenario())


def test_cluster_metadata_fetch_goes_to_the_raft_handler(broker: Broker,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    raft = types.ModuleType("odradek.broker.handlers.raft")

    def handle_metadata_fetch(ctx: Any, header: Any, frame: Any) -> Any:
        seen.append(header.api_version)
        from odradek.protocol.fetch import encode_fetch_response
        return response_header_version(1, header.api_version), encode_fetch_response(
            header.api_version, 0, E.none, 0, [])

    raft.handle_metadata_fetch = handle_metadata_fetch  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "odradek.broker.handlers.raft", raft)

    async def scenario() -> None:
        values = consumer_fetch(12, "__cluster_metadata")
        assert (await call(broker, ApiKey.FETCH, 12, values)).error_code == E.none
        by_id = follower_fetch(broker, 2, 0, -1)
        by_id["topics"][0]["topic_id"] = uuid.UUID(int=1)  # Kafka's METADATA_TOPIC_ID
        assert (await call(broker, ApiKey.FETCH, 15, by_id)).error_code == E.none
        assert seen == [12, 15]
        # without a raft handler the fetch is answered with an error, never a traceback
        monkeypatch.setitem(sys.modules, "odradek.broker.handlers.raft",
                            types.ModuleType("odradek.broker.handlers.raft"))
        r = await call(broker, ApiKey.FETCH, 12, values)
        assert r.error_code == E.unknown_server_error

    asyncio.run(scenario())
