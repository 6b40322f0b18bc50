"""Fetch (v4+): records straight from segment files, with long poll.

Records are returned as FileRegions that the server sends with os.sendfile.
Fetch sessions are not kept (as a Kafka broker whose session cache is full):
every response is a full one with session id 0, and an incremental request
for a session we never handed out gets FETCH_SESSION_ID_NOT_FOUND.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import Any

from odradek.broker.handlers.common import Response
from odradek.protocol.apis import response_header_version
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.fetch import (
    FetchPartitionResponse,
    FetchRequest,
    decode_fetch_request,
    encode_fetch_response,
)
from odradek.replication.delayed_fetch import DelayedFetch

READ_COMMITTED = 1
# Records up to this size are read into the response (one pread) instead of being sent with
# os.sendfile: a small fetch (a consumer at the head of the log) then leaves in the same
# writelines as the other responses of its loop pass, where a FileRegion costs a send task,
# a drain wait and a sendfile plus a send per partition.
INLINE_READ_BYTES = 32 * 1024
_ZERO_UUID = uuid.UUID(int=0)


class _Request:
    __slots__ = ("isolation", "max_bytes", "max_wait_ms", "min_bytes", "topics", "version")

    def __init__(self, version: int, req: FetchRequest) -> None:
        self.version = version
        self.max_wait_ms = req.max_wait_ms
        self.min_bytes = req.min_bytes
        self.max_bytes = req.max_bytes
        self.isolation = req.isolation_level
        # (name, topic id, [(partition, fetch offset, partition max bytes, current leader epoch)])
        self.topics: list[tuple[str | None, uuid.UUID, list[tuple[int, int, int, int]]]] = [
            (t.name, t.topic_id or _ZERO_UUID,
             [(p.partition, p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch)
              for p in t.partitions])
            for t in req.topics]


def handle(ctx: Any, header: Any, frame: memoryview) -> Any:
    version = header.api_version
    req = decode_fetch_request(frame, header.body_offset, version)
    hv = response_header_version(1, version)
    session_id = req.session_id
    session_epoch = req.session_epoch
    if session_id != 0 and session_epoch > 0:
        return hv, encode_fetch_response(version, 0, ErrorCode.fetch_session_id_not_found, 0, [])
    request = _Request(version, req)
    if version >= 13:
        image = ctx.image
        resolved = []
        for _name, tid, parts in request.topics:
            topic = image.topics_by_id.get(tid)
            resolved.append((topic.name if topic is not None else None, tid, parts))
        request.topics = resolved
    topics, accumulated, errors, watched = _read(ctx, request)
    if (accumulated >= request.min_bytes or request.max_wait_ms <= 0 or errors
            or not watched):
        return hv, encode_fetch_response(version, 0, ErrorCode.none, 0, topics)
    return _long_poll(ctx, request, hv, accumulated, watched)


def _long_poll(ctx: Any, request: _Request, hv: int, accumulated: int,
               watched: dict[Any, int]) -> Response | asyncio.Future[Response]:
    """A future the server answers with once the parked fetch is woken and has read again
    (callbacks, not a coroutine: no task per long poll); the answer itself when there is
    nothing to wait for."""
    # read_committed waits for the LSO to pass what was read, not for appends under it
    delayed = DelayedFetch(watched, request.min_bytes, accumulated,
                           read_committed=request.isolation == READ_COMMITTED,
                           stable_offsets=watched)
    fut: asyncio.Future[Response] = asyncio.get_running_loop().create_future()

    def answer() -> None:
        if fut.done():  # cancelled: the connection or the node went away
            return
        try:
            topics, _, _, _ = _read(ctx, request)
            fut.set_result((hv, encode_fetch_response(request.version, 0, ErrorCode.none, 0,
                                                      topics)))
        except Exception as exc:  # reported by the server as a failed handler
            fut.set_exception(exc)

    if not delayed.start(request.max_wait_ms, answer):
        topics, _, _, _ = _read(ctx, request)
        return hv, encode_fetch_response(request.version, 0, ErrorCode.none, 0, topics)
    fut.add_done_callback(lambda _: delayed.cancel())  # a cancelled one stops waiting
    return fut


def _read(ctx: Any, request: _Request) -> tuple[list[Any], int, bool, dict[Any, int]]:
    """The response's topics, bytes read, whether any partition failed, and the partitions a
    long poll watches with the LSO each was read at."""
    rm = ctx.replica_manager
    version = request.version
    committed = request.isolation == READ_COMMITTED
    aborted: list[tuple[int, int]] | None = [] if committed else None
    remaining = request.max_bytes
    min_one = True
    accumulated = 0
    errors = False
    watched: dict[Any, int] = {}
    out = []
    for name, tid, parts in request.topics:
        results = []
        for index, offset, part_max, leader_epoch in parts:
            part = rm.get(name, index) if name is not None else None
            if part is None:
                code = (ErrorCode.unknown_topic_id if version >= 13 and name is None
                        else ErrorCode.unknown_topic_or_partition)
                results.append(FetchPartitionResponse(index, code, -1, -1, -1, None, -1, None))
                errors = True
                continue
            hw = part.high_watermark
            lso = part.last_stable_offset
            if leader_epoch >= 0 and leader_epoch != part.leader_epoch:
                code = (ErrorCode.fenced_leader_epoch if leader_epoch < part.leader_epoch
                        else ErrorCode.unknown_leader_epoch)
                results.append(FetchPartitionResponse(index, code, hw, lso,
                                                      part.log_start_offset, None, -1, None))
                errors = True
                continue
            lg = part.log
            start = lg.log_start_offset
            leo = lg.log_end_offset
            upper = lso if committed else hw
            if start <= offset <= leo and offset >= (upper if upper < leo else leo):
                # a consumer at the tail (the common case of a long poll): what Log.read
                # answers for it, without its lock and segment lookup
                region = None
                size = 0
            else:
                limit = min(part_max, remaining) if remaining > 0 else 0
                try:
                    res = lg.read(offset, max(limit, 0), upper, min_one)
                except KafkaError as exc:
                    results.append(FetchPartitionResponse(index, exc.code, hw, lso,
                                                          lg.log_start_offset, None, -1, None))
                    errors = True
                    continue
                region = res.region
                size = region.size if region is not None else 0
                start = lg.log_start_offset
            if size:
                remaining -= size
                accumulated += size
                min_one = False
            watched[part] = lso
            # the clients drop the aborted transactions' records themselves
            txns = part.aborted_transactions(offset, lso) if committed and size else aborted
            records: Any = region if size else None
            if 0 < size <= INLINE_READ_BYTES:
                try:
                    data = os.pread(region.fd, size, region.position)
                except OSError:  # the segment went away: the region path reports it
                    data = b""
                if len(data) == size:
                    records = data
            results.append(FetchPartitionResponse(index, ErrorCode.none, hw, lso, start, txns,
                                                   -1, records))
        out.append((name or "", tid, results))
    return out, accumulated, errors, watched
