"""Replica fetchers (Kafka's ReplicaFetcherManager and ReplicaFetcherThread), as asyncio tasks.

One fetcher per (source broker, fetcher id), `num.replica.fetchers` per source broker; a
partition goes to fetcher `crc32(topic, partition) % num.replica.fetchers` of its leader. Each
fetcher loops: an OffsetForLeaderEpoch round for the partitions that must truncate, then one
Fetch (v15, with ReplicaState) for the rest, whose batches are appended as they came. The
decisions are `follower.FollowerFetchState`'s (sans-I/O); this module is only the I/O.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import zlib
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from kio.schema.fetch.v15 import request as fetch_req
from kio.schema.offset_for_leader_epoch.v4 import request as ofle_req

from odradek.protocol.errors import ErrorCode
from odradek.replication.config import ReplicationConfig
from odradek.replication.follower import FETCHING, TRUNCATING, FollowerFetchState
from odradek.replication.partition import Partition

__all__ = ["ReplicaFetcher", "ReplicaFetcherManager"]

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def fetcher_id(topic: str, partition: int, num_fetchers: int) -> int:
    return zlib.crc32(f"{topic}-{partition}".encode()) % max(1, num_fetchers)


class ReplicaFetcherManager:
    """The follower partitions of this node, spread over fetcher tasks by leader."""

    def __init__(self, node_id: int, channels: Any, config: ReplicationConfig,
                 broker_epoch: Callable[[], int] = lambda: -1,
                 on_fetched: Callable[[Partition], None] | None = None) -> None:
        self.node_id = node_id
        self.channels = channels
        self.config = config
        self.broker_epoch = broker_epoch
        self.on_fetched = on_fetched
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._where: dict[tuple[str, int], tuple[int, int]] = {}
        # set by shutdown: the logs close next, so a late add (a metadata change applied
        # meanwhile) must not start a fetcher that would append into a closed log
        self.closed = False

    def add(self, part: Partition) -> None:
        """Fetch `part` from its leader, truncating first (a new leader or epoch)."""
        if self.closed:
            return
        key = (part.topic, part.index)
        where = (part.leader, fetcher_id(part.topic, part.index, self.config.num_replica_fetchers))
        old = self._where.get(key)
        if old is not None and old != where:
            self.remove(part)
        fetcher = self.fetchers.get(where)
        if fetcher is None:
            fetcher = self.fetchers[where] = ReplicaFetcher(self, where[0], where[1])
        fetcher.add(part)
        self._where[key] = where

    def remove(self, part: Partition) -> None:
        key = (part.topic, part.index)
        where = self._where.pop(key, None)
        if where is None:
            return
        fetcher = self.fetchers.get(where)
        if fetcher is not None:
            fetcher.remove(key)
            if not fetcher.states:
                del self.fetchers[where]
                fetcher.stop()

    def state_of(self, topic: str, partition: int) -> FollowerFetchState | None:
        where = self._where.get((topic, partition))
        fetcher = self.fetchers.get(where) if where is not None else None
        return fetcher.states.get((topic, partition)) if fetcher is not None else None

    async def shutdown(self) -> None:
        self.closed = True
        fetchers, self.fetchers = list(self.fetchers.values()), {}
        self._where.clear()
        for f in fetchers:
            f.stop()
        for f in fetchers:
            await f.join()


class ReplicaFetcher:
    """One task fetching the partitions led by `source` that hash to this fetcher id."""

    def __init__(self, manager: ReplicaFetcherManager, source: int, fid: int) -> None:
        self.manager = manager
        self.source = source
        self.fid = fid
        self.states: dict[tuple[str, int], FollowerFetchState] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopped = False

    def add(self, part: Partition) -> None:
        key = (part.topic, part.index)
        state = self.states.get(key)
        if state is None or state.partition is not part:
            self.states[key] = FollowerFetchState(part)
        else:
            state.restart()
        self._wake.set()
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    def remove(self, key: tuple[str, int]) -> None:
        self.states.pop(key, None)

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()

    async def join(self) -> None:
        task = self._task
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _run(self) -> None:
        cfg = self.manager.config
        while not self._stopped:
            try:
                worked = await self._once(cfg)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a channel error, a decoding failure: back off
                log.debug("replica fetcher %d-%d from node %d: %s", self.fid, self.source,
                          self.source, exc)
                worked = False
                await asyncio.sleep(cfg.replica_fetch_backoff_ms / 1000)
                continue
            if not worked:
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self._idle_s(cfg))

    def _idle_s(self, cfg: ReplicationConfig) -> float:
        now = _now_ms()
        waits = [s.delayed_until - now for s in self.states.values() if s.delayed_until > now]
        return max(0.01, min(waits) / 1000) if waits else cfg.replica_fetch_backoff_ms / 1000

    async def _once(self, cfg: ReplicationConfig) -> bool:
        now = _now_ms()
        ready = [s for s in list(self.states.values()) if s.ready(now)]
        if not ready:
            return False
        truncating = [s for s in ready if s.state == TRUNCATING]
        if truncating:
            await self._truncate(truncating, cfg)
            return True
        await self._fetch(ready, cfg)
        return True

    async def _truncate(self, states: list[FollowerFetchState], cfg: ReplicationConfig) -> None:
        asks: dict[str, list[tuple[FollowerFetchState, int, int]]] = {}
        generations = {id(s): s.generation for s in states}
        for s in states:
            req = s.epoch_request()
            if req is not None:
                asks.setdefault(s.partition.topic, []).append((s, req[0], req[1]))
        if not asks:
            return
        request = ofle_req.OffsetForLeaderEpochRequest(
            replica_id=self.manager.node_id,  # type: ignore[arg-type]
            topics=tuple(ofle_req.OffsetForLeaderTopic(
                topic=topic,  # type: ignore[arg-type]
                partitions=tuple(ofle_req.OffsetForLeaderPartition(
                    partition=s.partition.index, current_leader_epoch=cur,  # type: ignore[arg-type]
                    leader_epoch=latest) for s, cur, latest in items))  # type: ignore[arg-type]
                for topic, items in asks.items()))
        resp = await self.manager.channels.request(self.source, request,
                                                   cfg.replica_socket_timeout_ms / 1000)
        by_key = {(t.topic, p.partition): p for t in resp.topics for p in t.partitions}
        now = _now_ms()
        for items in asks.values():
            for s, _, _ in items:
                key = (s.partition.topic, s.partition.index)
                if self.states.get(key) is not s or s.generation != generations[id(s)]:
                    continue  # removed, replaced or restarted meanwhile
                p = by_key.get(key)
                if p is None:
                    s.on_error(ErrorCode.unknown_topic_or_partition, now,
                               cfg.replica_fetch_backoff_ms)
                    continue
                s.on_epoch_response(ErrorCode(int(p.error_code)), int(p.leader_epoch),
                                    int(p.end_offset), now, cfg.replica_fetch_backoff_ms)

    async def _fetch(self, states: list[FollowerFetchState], cfg: ReplicationConfig) -> None:
        by_topic: dict[Any, list[tuple[FollowerFetchState, tuple[int, int, int, int]]]] = {}
        generations = {id(s): s.generation for s in states}
        for s in states:
            by_topic.setdefault(s.partition.topic_id, []).append((s, s.fetch_position()))
        request = fetch_req.FetchRequest(
            replica_state=fetch_req.ReplicaState(
                replica_id=self.manager.node_id,  # type: ignore[arg-type]
                replica_epoch=self.manager.broker_epoch()),  # type: ignore[arg-type]
            max_wait=timedelta(milliseconds=cfg.replica_fetch_wait_max_ms),  # type: ignore[arg-type]
            min_bytes=cfg.replica_fetch_min_bytes,  # type: ignore[arg-type]
            max_bytes=cfg.replica_fetch_response_max_bytes,  # type: ignore[arg-type]
            isolation_level=0,  # type: ignore[arg-type]
            session_id=0,  # type: ignore[arg-type]
            session_epoch=-1,  # type: ignore[arg-type]
            topics=tuple(fetch_req.FetchTopic(topic_id=tid, partitions=tuple(
                fetch_req.FetchPartition(
                    partition=s.partition.index,  # type: ignore[arg-type]
                    current_leader_epoch=pos[1],  # type: ignore[arg-type]
                    fetch_offset=pos[0],  # type: ignore[arg-type]
                    last_fetched_epoch=pos[2],  # type: ignore[arg-type]
                    log_start_offset=pos[3],  # type: ignore[arg-type]
                    partition_max_bytes=cfg.replica_fetch_max_bytes)  # type: ignore[arg-type]
                for s, pos in items)) for tid, items in by_topic.items()),
            forgotten_topics_data=(),
        )
        timeout = (cfg.replica_socket_timeout_ms + cfg.replica_fetch_wait_max_ms) / 1000
        resp = await self.manager.channels.request(self.source, request, timeout)
        now = _now_ms()
        if int(resp.error_code) != 0:
            for s in states:
                s.on_error(ErrorCode(int(resp.error_code)), now, cfg.replica_fetch_backoff_ms)
            return
        by_key = {(t.topic_id, p.partition_index): p for t in resp.responses
                  for p in t.partitions}
        on_fetched = self.manager.on_fetched
        for items in by_topic.values():
            for s, pos in items:
                part = s.partition
                key = (part.topic, part.index)
                if (self.states.get(key) is not s or s.state != FETCHING
                        or s.generation != generations[id(s)]):
                    continue
                if part.log.log_end_offset != pos[0]:
                    continue  # the log moved meanwhile (a truncation): this answer is stale
                p = by_key.get((part.topic_id, part.index))
                if p is None:
                    continue
                s.on_fetch_response(ErrorCode(int(p.error_code)), int(p.high_watermark),
                                    int(p.log_start_offset), p.records, now,
                                    cfg.replica_fetch_backoff_ms)
                if on_fetched is not None:
                    on_fetched(part)
