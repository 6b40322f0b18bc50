"""Sending transaction markers (Kafka's TransactionMarkerChannelManager): the I/O around
`MarkerQueue`.

A partition led by this node gets its marker appended here (`append_marker`, the same path
the WriteTxnMarkers handler takes) and waits for its ISR; a partition led elsewhere gets a
WriteTxnMarkers request (v1, one per broker for every transaction that has partitions there)
over the inter-broker listener. Failed or refused partitions go again after
`retry.backoff.ms`, each time to the leader the metadata image names by then (the image is
the node's view of the metadata log, so reading it again is the metadata refresh). When every
marker of a transaction is written, `on_done(entry)` lets the coordinator write its
CompleteCommit/CompleteAbort.

Partitions whose ISR is this node alone are done the moment their marker is appended: a
transaction whose partitions are all such (a single node) completes inside the EndTxn call.
Background work runs in a fresh contextvars context, so coordinator writes it makes are
never counted as writes of whichever request was being handled when it was started.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable
from typing import Any

from kio.schema.write_txn_markers.v1 import request as wtm

from odradek.coordinator.transaction.marker_queue import (
    TP,
    LeaderOf,
    MarkerQueue,
    PendingMarkers,
)
from odradek.network.channel import ChannelError
from odradek.protocol.errors import ErrorCode
from odradek.replication.markers import MarkerAppend, append_marker

__all__ = ["TxnMarkerChannelManager"]

log = logging.getLogger(__name__)

E = ErrorCode
RETRY_BACKOFF_S = 0.1  # retry.backoff.ms
# the receiving leader waits up to request.timeout.ms (30 s) for its ISR; the channel waits
# a little longer so that answer, not a channel timeout, normally ends the request
REQUEST_TIMEOUT_S = 40.0
ISR_WAIT_MS = 30000

Written = Callable[[TP, int, bool], None]


class TxnMarkerChannelManager:
    def __init__(self, rm: Any, leader_of: LeaderOf, on_done: Callable[[PendingMarkers], None],
                 channels: Any = None, on_written: Written | None = None) -> None:
        self.rm = rm
        self.node_id = int(getattr(rm, "node_id", -1))
        self.leader_of = leader_of
        self.on_done = on_done
        # inter-broker channels (odradek.network.Channels); None on a single node
        self.channels = channels
        # a marker this node appended is in its ISR (the group coordinator's transactional
        # offsets of __consumer_offsets take effect)
        self.on_written = on_written
        self.queue = MarkerQueue()
        self._retry: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.stopped = False
        self.requests_sent = 0

    # ------------------------------------------------------------------ api

    def send(self, entry: PendingMarkers) -> None:
        """Write the transaction's markers (replacing any of the same transactional id)."""
        self.queue.add(entry)
        self.pump()

    def cancel(self, transactional_ids: list[str]) -> None:
        self.queue.cancel(transactional_ids)

    def pending(self, transactional_id: str) -> PendingMarkers | None:
        return self.queue.get(transactional_id)

    async def stop(self) -> None:
        self.stopped = True
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        for t in tasks:
            try:
                await t
            except (asyncio.CancelledError, Exception):
                pass

    # ------------------------------------------------------------------ the pump

    def pump(self) -> None:
        """Send what is ready, complete what is done, schedule a retry for what waits."""
        if self.stopped:
            return
        for broker, items in self.queue.plan(self.leader_of).items():
            if broker == self.node_id:
                self._write_local(items)
            elif self.channels is None:
                # a single node has no peers: a leader elsewhere is metadata not yet applied
                for entry, tps in items:
                    self.queue.on_failed(entry, tps)
            else:
                self._spawn(self._send_remote(broker, items))
        self._complete()
        if self.queue.waiting():
            self._retry_later()

    def _complete(self) -> None:
        for entry in self.queue.completed():
            try:
                self.on_done(entry)
            except Exception:
                log.exception("completing transaction %r failed", entry.transactional_id)

    def _retry_later(self) -> None:
        if self._retry is not None or self.stopped:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # called outside the loop (a blocking start-up step): the
            return            # next pump, on the loop, sends what waits

        def fire() -> None:
            self._retry = None
            self.pump()

        self._retry = loop.call_later(RETRY_BACKOFF_S, fire, context=contextvars.Context())

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro, context=contextvars.Context())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _answered(self) -> None:
        self._complete()
        if self.queue.waiting():
            self._retry_later()

    # ------------------------------------------------------------------ local

    def _write_local(self, items: list[tuple[PendingMarkers, list[TP]]]) -> None:
        waits: list[tuple[PendingMarkers, TP, MarkerAppend]] = []
        for entry, tps in items:
            for tp in tps:
                r = append_marker(self.rm, tp[0], tp[1], entry.producer_id,
                                  entry.producer_epoch, entry.coordinator_epoch, entry.commit)
                if r.error != E.none:
                    self.queue.on_result(entry, tp, r.error)
                elif r.replicated:
                    self._written(entry, tp)
                else:
                    waits.append((entry, tp, r))
        if waits:
            self._spawn(self._wait_local(waits))

    def _written(self, entry: PendingMarkers, tp: TP) -> None:
        if self.on_written is not None and self.queue.is_current(entry):
            try:
                self.on_written(tp, entry.producer_id, entry.commit)
            except Exception:
                log.exception("applying the marker of %r to %s-%d failed",
                              entry.transactional_id, tp[0], tp[1])
        self.queue.on_result(entry, tp, E.none)

    async def _wait_local(self, waits: list[tuple[PendingMarkers, TP, MarkerAppend]]) -> None:
        try:
            for entry, tp, r in waits:
                part = r.partition
                error = await self.rm.wait_for_hw(part, r.required_offset, ISR_WAIT_MS)
                if error == E.none and part.leader_epoch != r.leader_epoch:
                    error = E.not_leader_or_follower  # the marker may be cut off the new log
                if error == E.none:
                    self._written(entry, tp)
                else:
                    self.queue.on_result(entry, tp, error)
        finally:
            for entry, tp, _ in waits:  # a cancelled wait: the markers go again
                self.queue.on_failed(entry, [tp])
            self._answered()

    # ------------------------------------------------------------------ remote

    async def _send_remote(self, broker: int,
                           items: list[tuple[PendingMarkers, list[TP]]]) -> None:
        request = build_request(items)
        try:
            self.requests_sent += 1
            response = await self.channels.request(broker, request, REQUEST_TIMEOUT_S)
        except (ChannelError, OSError) as exc:
            log.info("WriteTxnMarkers to broker %d failed (%s); sending again", broker, exc)
            for entry, tps in items:
                self.queue.on_failed(entry, tps)
            self._answered()
            return
        except asyncio.CancelledError:
            for entry, tps in items:
                self.queue.on_failed(entry, tps)
            raise
        answers = parse_response(response)
        for entry, tps in items:
            got = answers.get(entry.producer_id, {})
            for tp in tps:
                code = got.get(tp)
                if code is None:
                    self.queue.on_failed(entry, [tp])  # left out of the answer: again
                else:
                    self.queue.on_result(entry, tp, code)
        self._answered()


def build_request(items: list[tuple[PendingMarkers, list[TP]]]) -> Any:
    """WriteTxnMarkers v1 for one broker: one marker per transaction."""
    markers = []
    for entry, tps in items:
        by_topic: dict[str, list[int]] = {}
        for t, p in tps:
            by_topic.setdefault(t, []).append(p)
        markers.append(wtm.WritableTxnMarker(
            producer_id=entry.producer_id, producer_epoch=entry.producer_epoch,
            transaction_result=entry.commit, coordinator_epoch=entry.coordinator_epoch,
            topics=tuple(wtm.WritableTxnMarkerTopic(name=t, partition_indexes=tuple(ps))
                         for t, ps in by_topic.items())))
    return wtm.WriteTxnMarkersRequest(markers=tuple(markers))


def parse_response(response: Any) -> dict[int, dict[TP, ErrorCode]]:
    """producer id -> partition -> error code."""
    out: dict[int, dict[TP, ErrorCode]] = {}
    for marker in response.markers:
        got = out.setdefault(int(marker.producer_id), {})
        for t in marker.topics:
            for p in t.partitions:
                got[(t.name, int(p.partition_index))] = ErrorCode(p.error_code)
    return out
