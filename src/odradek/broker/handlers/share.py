"""Share groups (KIP-932): ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch and
ShareAcknowledge, over the node's ShareCoordinator (coordinator/share/).

ShareFetch applies the acknowledgements it carries, then acquires records for the member
from every partition of its share session: it reads whole batches from the log (up to the
high watermark) starting at the share-partition's next fetch offset, acquires what the
share-partition allows and returns those batches with their AcquiredRecords ranges. With
nothing acquired it waits, up to max_wait, for the high watermark of one of the session's
partitions to move. Every state change is written to `__share_group_state` and the answer
waits for that write (apis.COORDINATOR_WRITES).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from odradek.broker.authz import allowed
from odradek.broker.handlers.common import Response, decode, respond
from odradek.coordinator.share.coordinator import ShareCoordinator
from odradek.coordinator.share.group import ShareGroup
from odradek.coordinator.share.partition import AckBatch, AckError
from odradek.coordinator.share.sessions import SessionError
from odradek.coordinator.share.state_log import ShareKey
from odradek.metadata.acls import AclOperation as Op
from odradek.metadata.acls import ResourceType as RT
from odradek.protocol.apis import ApiKey, ApiVersionRange
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import iter_batches

E = ErrorCode
_ZERO = uuid.UUID(int=0)
_NO_LEADER = {"leader_id": -1, "leader_epoch": -1}
_TRANSACTIONAL = 0x10  # record batch attributes
_CONTROL = 0x20
RECORD_LIMIT_MODE = 1  # ShareFetch v2's share_acquire_mode

# Kafka 4.1 made the share APIs v1 (the first GA version); v2 (Kafka 4.2) adds renew
# acknowledgements (KIP-1222). v0 was the early-access version, not served by Kafka 4.2.
VERSIONS = (
    ApiVersionRange(ApiKey.SHARE_GROUP_HEARTBEAT, 1, 1),
    ApiVersionRange(ApiKey.SHARE_GROUP_DESCRIBE, 1, 1),
    ApiVersionRange(ApiKey.SHARE_FETCH, 1, 2),
    ApiVersionRange(ApiKey.SHARE_ACKNOWLEDGE, 1, 2),
)


def _coord(ctx: Any) -> ShareCoordinator:
    return ctx.share_coordinator  # type: ignore[no-any-return]


def _host(peer: str | None) -> str:
    if not peer:
        return ""
    return "/" + (peer.rsplit(":", 1)[0] if ":" in peer else peer).strip("[]")


# ------------------------------------------------------------------ ShareGroupHeartbeat


def handle_heartbeat(ctx: Any, header: Any, frame: memoryview, peer: str | None = None) -> Any:
    req = decode(header, frame)
    return _heartbeat(ctx, header, req, peer)


async def _heartbeat(ctx: Any, header: Any, req: Any, peer: str | None) -> Response:
    def fail(code: ErrorCode, message: str | None = None) -> Response:
        return respond(header, {"throttle_time": 0, "error_code": code, "error_message": message,
                                "member_id": req.member_id, "member_epoch": req.member_epoch,
                                "heartbeat_interval": 0, "assignment": None})

    if not allowed(ctx, header, Op.READ, RT.GROUP, req.group_id):
        return fail(E.group_authorization_failed)
    if not req.group_id:
        return fail(E.invalid_request, "GroupId can't be empty.")
    group = ctx.group_coordinator.groups.get(req.group_id)
    if group is not None and not isinstance(group, ShareGroup):
        return fail(E.group_id_not_found, f"Group {req.group_id} is not a share group.")
    if not ctx.group_coordinator.is_coordinator_for(req.group_id):
        return fail(E.not_coordinator)
    coord = _coord(ctx)
    code = await coord.ensure_ready()
    if code != E.none:
        return fail(code)
    subscribed = (list(req.subscribed_topic_names)
                  if req.subscribed_topic_names is not None else None)
    r = coord.heartbeat(req.group_id, req.member_id, int(req.member_epoch), subscribed,
                        req.rack_id, header.client_id or "", _host(peer))
    assignment = None
    if r.assignment is not None:
        tps = []
        for topic, parts in sorted(r.assignment.items()):
            info = coord.topics(topic)
            if info is not None:
                tps.append({"topic_id": info[0], "partitions": parts})
        assignment = {"topic_partitions": tps}
    return respond(header, {
        "throttle_time": 0, "error_code": r.error, "error_message": r.message,
        "member_id": r.member_id, "member_epoch": r.member_epoch,
        "heartbeat_interval": r.heartbeat_interval_ms, "assignment": assignment})


# ------------------------------------------------------------------ ShareGroupDescribe


def handle_describe(ctx: Any, header: Any, frame: memoryview) -> Response:
    req = decode(header, frame)
    coord = _coord(ctx)
    out = []
    for gid in req.group_ids:
        row: dict[str, Any] = {
            "error_code": E.none, "error_message": None, "group_id": gid,
            "group_state": "Dead", "group_epoch": -1, "assignment_epoch": -1,
            "assignor_name": "simple", "members": [], "authorized_operations": -2147483648}
        g = coord.groups.get(gid)
        if not allowed(ctx, header, Op.DESCRIBE, RT.GROUP, gid):
            row["error_code"] = E.group_authorization_failed
        elif g is None:
            row["error_code"] = E.group_id_not_found
            row["error_message"] = (f"Group {gid} is not a share group."
                                    if gid in ctx.group_coordinator.groups
                                    else f"Group {gid} not found.")
        else:
            row.update(group_state=g.state, group_epoch=g.group_epoch,
                       assignment_epoch=g.assignment_epoch, members=[{
                           "member_id": m.member_id, "rack_id": m.rack_id,
                           "member_epoch": m.member_epoch, "client_id": m.client_id,
                           "client_host": m.client_host,
                           "subscribed_topic_names": list(m.subscribed),
                           "assignment": {"topic_partitions": [
                               {"topic_id": (coord.topics(t) or (_ZERO,))[0],
                                "topic_name": t, "partitions": ps}
                               for t, ps in sorted(m.assignment.items())]}}
                           for m in g.members.values()])
        out.append(row)
    return respond(header, {"throttle_time": 0, "groups": out})


# ------------------------------------------------------------------ acknowledgements


def _acks(batches: Any) -> list[AckBatch]:
    return [AckBatch(int(b.first_offset), int(b.last_offset),
                     tuple(int(t) for t in b.acknowledge_types)) for b in batches]


async def _acknowledge(ctx: Any, group_id: str, member_id: str, topic_id: uuid.UUID,
                       partition: int, batches: list[AckBatch], renew: bool
                       ) -> tuple[ErrorCode, str | None]:
    coord = _coord(ctx)
    name = coord.topic_name(topic_id)
    if name is None:
        return E.unknown_topic_id, None
    part = ctx.replica_manager.get(name, partition)
    if part is None or not part.is_leader:
        return E.not_leader_or_follower, None
    key = ShareKey(group_id, topic_id, partition)
    code = await coord.load(key, part)
    if code != E.none:
        return code, None
    if not part.is_leader or not coord.loaded(key, part):
        return E.not_leader_or_follower, None  # leadership moved while the state was read
    sp = coord.share_partition(key, part)
    try:
        sp.acknowledge(member_id, batches, time.time() * 1000, renew_allowed=renew)
    except AckError as e:
        return e.code, e.message
    if renew:
        coord.arm(time.time() * 1000 + sp.lock_duration_ms)
    coord.notify_released()  # a release makes records available to waiting fetches
    return E.none, None


def _leader(ctx: Any, topic_id: uuid.UUID, partition: int) -> dict[str, int]:
    name = _coord(ctx).topic_name(topic_id)
    part = ctx.replica_manager.get(name, partition) if name else None
    if part is None:
        return _NO_LEADER
    return {"leader_id": int(part.leader), "leader_epoch": int(part.leader_epoch)}


# ------------------------------------------------------------------ ShareAcknowledge


def handle_acknowledge(ctx: Any, header: Any, frame: memoryview) -> Any:
    req = decode(header, frame)
    return _acknowledge_request(ctx, header, req)


async def _acknowledge_request(ctx: Any, header: Any, req: Any) -> Response:
    coord = _coord(ctx)
    lock_ms = coord.lock_duration_ms(req.group_id or "")

    def top(code: ErrorCode, message: str | None = None) -> Response:
        return respond(header, {"throttle_time": 0, "error_code": code, "error_message": message,
                                "acquisition_lock_timeout": lock_ms, "responses": [],
                                "node_endpoints": []})

    if not req.group_id or not req.member_id:
        return top(E.invalid_request, "group id and member id must be set")
    if not allowed(ctx, header, Op.READ, RT.GROUP, req.group_id):
        return top(E.group_authorization_failed)
    if await coord.ensure_ready() != E.none:
        return top(E.coordinator_not_available)
    try:
        _, closing = coord.sessions.acknowledge(req.group_id, req.member_id,
                                                      int(req.share_session_epoch))
    except SessionError as e:
        return top(e.code, e.message)
    renew = bool(getattr(req, "is_renew_ack", False))
    responses = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            code, message = await _acknowledge(ctx, req.group_id, req.member_id, t.topic_id,
                                               int(p.partition_index),
                                               _acks(p.acknowledgement_batches), renew)
            parts.append({"partition_index": p.partition_index, "error_code": code,
                          "error_message": message,
                          "current_leader": _leader(ctx, t.topic_id, p.partition_index)})
        responses.append({"topic_id": t.topic_id, "partitions": parts})
    if closing:
        _release(ctx, req.group_id, req.member_id)
    code = await coord.persist_changed(None if closing else [
        ShareKey(req.group_id, t.topic_id, int(p.partition_index))
        for t in req.topics for p in t.partitions])
    coord.notify_released()
    if code != E.none:
        return top(code)
    return respond(header, {"throttle_time": 0, "error_code": E.none, "error_message": None,
                            "acquisition_lock_timeout": lock_ms, "responses": responses,
                            "node_endpoints": []})


def _release(ctx: Any, group_id: str, member_id: str) -> None:
    for key, sp in _coord(ctx).partitions.items():
        if key.group_id == group_id:
            sp.release_member(member_id)


# ------------------------------------------------------------------ ShareFetch


def handle_fetch(ctx: Any, header: Any, frame: memoryview) -> Any:
    req = decode(header, frame)
    return _fetch(ctx, header, req)


async def _fetch(ctx: Any, header: Any, req: Any) -> Response:
    coord = _coord(ctx)
    gid, mid = req.group_id or "", req.member_id or ""
    lock_ms = coord.lock_duration_ms(gid)

    def top(code: ErrorCode, message: str | None = None) -> Response:
        return respond(header, {"throttle_time": 0, "error_code": code, "error_message": message,
                                "acquisition_lock_timeout": lock_ms, "responses": [],
                                "node_endpoints": []})

    if not gid or not mid:
        return top(E.invalid_request, "group id and member id must be set")
    if not allowed(ctx, header, Op.READ, RT.GROUP, gid):
        return top(E.group_authorization_failed)
    if await coord.ensure_ready() != E.none:
        return top(E.coordinator_not_available)
    added = [(t.topic_id, int(p.partition_index)) for t in req.topics for p in t.partitions]
    forgotten = [(t.topic_id, int(p)) for t in req.forgotten_topics_data for p in t.partitions]
    has_acks = any(p.acknowledgement_batches for t in req.topics for p in t.partitions)
    try:
        session, closing = coord.sessions.fetch(gid, mid, int(req.share_session_epoch),
                                                added, forgotten, has_acks)
    except SessionError as e:
        return top(e.code, e.message)
    renew = bool(getattr(req, "is_renew_ack", False))
    rows: dict[tuple[uuid.UUID, int], dict[str, Any]] = {}
    for t in req.topics:
        for p in t.partitions:
            if p.acknowledgement_batches:
                code, message = await _acknowledge(ctx, gid, mid, t.topic_id,
                                                   int(p.partition_index),
                                                   _acks(p.acknowledgement_batches), renew)
                rows[(t.topic_id, int(p.partition_index))] = _row(
                    ctx, t.topic_id, int(p.partition_index), ack=(code, message))
    if closing:
        _release(ctx, gid, mid)
        coord.notify_released()
    elif renew:
        pass  # KIP-1222: a fetch carrying renew acknowledgements only acknowledges
    else:
        allowed_topics = {tid for tid, _ in session.partitions
                          if _topic_allowed(ctx, header, coord, tid)}
        targets = list(session.partitions)
        deadline = time.monotonic() + max(0, int(req.max_wait.total_seconds() * 1000)) / 1000
        max_records = max(1, int(req.max_records) if int(req.max_records) > 0 else 500)
        # v2: 0 batch-optimized (whole batches, max_records may be passed), 1 record-limit
        record_limit = int(getattr(req, "share_acquire_mode", 0)) == RECORD_LIMIT_MODE
        while True:
            load_errors = await _load_all(ctx, gid, targets)
            got = _acquire_all(ctx, gid, mid, targets, allowed_topics, max_records,
                               int(req.max_bytes), rows, load_errors, record_limit)
            # records, or an error a client must act on (a moved leader...), answer at once
            failed = any(r["error_code"] != E.none for r in rows.values())
            if got or failed or time.monotonic() >= deadline or not targets:
                break
            await _wait_for_data(ctx, coord, targets, deadline)
    code = await coord.persist_changed(None if closing else
                                       [ShareKey(gid, tid, p) for tid, p in session.partitions])
    if code != E.none:
        return top(code)
    by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for (tid, _), row in rows.items():
        by_topic.setdefault(tid, []).append(row)
    return respond(header, {
        "throttle_time": 0, "error_code": E.none, "error_message": None,
        "acquisition_lock_timeout": lock_ms,
        "responses": [{"topic_id": tid, "partitions": ps} for tid, ps in by_topic.items()],
        "node_endpoints": []})


def _topic_allowed(ctx: Any, header: Any, coord: ShareCoordinator, topic_id: uuid.UUID) -> bool:
    name = coord.topic_name(topic_id)
    return name is None or allowed(ctx, header, Op.READ, RT.TOPIC, name)


def _row(ctx: Any, topic_id: uuid.UUID, partition: int,
         ack: tuple[ErrorCode, str | None] | None = None) -> dict[str, Any]:
    return {"partition_index": partition, "error_code": E.none, "error_message": None,
            "acknowledge_error_code": ack[0] if ack else E.none,
            "acknowledge_error_message": ack[1] if ack else None,
            "current_leader": _leader(ctx, topic_id, partition), "records": b"",
            "acquired_records": []}


def _acquire_all(ctx: Any, gid: str, mid: str, targets: list[tuple[uuid.UUID, int]],
                 allowed_topics: set[uuid.UUID], max_records: int, max_bytes: int,
                 rows: dict[tuple[uuid.UUID, int], dict[str, Any]],
                 load_errors: dict[ShareKey, ErrorCode], record_limit: bool = False) -> int:
    """Acquire from every partition of the session; how many records were acquired."""
    coord = _coord(ctx)
    total = 0
    budget = max_bytes
    for tid, p in targets:
        row = rows.get((tid, p)) or _row(ctx, tid, p)
        rows[(tid, p)] = row
        if row["acquired_records"]:
            total += 1
            continue
        name = coord.topic_name(tid)
        if name is None:
            row["error_code"] = E.unknown_topic_id
            continue
        if tid not in allowed_topics:
            row["error_code"] = E.topic_authorization_failed
            continue
        part = ctx.replica_manager.get(name, p)
        if part is None or not part.is_leader:
            row["error_code"] = E.not_leader_or_follower
            continue
        key = ShareKey(gid, tid, p)
        if not coord.loaded(key, part):
            # its state could not be read from its share coordinator (the error it gave)
            row["error_code"] = load_errors.get(key, E.coordinator_not_available)
            continue
        if total >= max_records or budget <= 0:
            continue
        sp = coord.share_partition(key, part)
        offset = sp.next_fetch_offset()
        # SharePartition.can_acquire, without scanning the window twice
        if offset > sp.end_offset and sp.in_flight_count() >= sp.max_record_locks:
            continue
        committed = coord.read_committed(gid)
        limit = part.last_stable_offset if committed else part.high_watermark
        if offset >= limit:
            continue
        try:
            region = part.log.read(offset, budget, max_offset=limit).region
            data = part.log.read_bytes(region) if region is not None else b""
        except KafkaError as e:  # an offline log directory (KAFKA_STORAGE_ERROR)...
            row["error_code"] = e.code
            continue
        if not data:
            continue
        headers = list(iter_batches(data))
        aborted = part.aborted_transactions(offset, limit) if committed else []
        batches = [(h.base_offset, h.base_offset + h.last_offset_delta, view, ok)
                   for (h, view), ok in zip(headers, _deliverable(headers, aborted),
                                            strict=True)]
        got = sp.acquire(mid, [(a, b, ok) for a, b, _, ok in batches], max_records - total,
                         time.time() * 1000, record_limit=record_limit)
        if not got:
            continue
        keep = b"".join(bytes(v) for a, b, v, _ in batches
                        if any(r.first_offset <= b and r.last_offset >= a for r in got))
        budget -= len(keep)
        row["records"] = keep
        row["acquired_records"] = [{"first_offset": r.first_offset, "last_offset": r.last_offset,
                                    "delivery_count": r.delivery_count} for r in got]
        total += sum(r.last_offset - r.first_offset + 1 for r in got)
        coord.arm(time.time() * 1000 + sp.lock_duration_ms)
    return total


async def _load_all(ctx: Any, gid: str, targets: list[tuple[uuid.UUID, int]]
                    ) -> dict[ShareKey, ErrorCode]:
    """Read the state of every share-partition of the session this node leads and has not
    in memory (from its share coordinator, here or on another node); the errors."""
    coord = _coord(ctx)
    keys = []
    for tid, p in targets:
        name = coord.topic_name(tid)
        part = ctx.replica_manager.get(name, p) if name else None
        if part is not None and part.is_leader:
            key = ShareKey(gid, tid, p)
            if not coord.loaded(key, part):
                keys.append((key, part))
    if not keys:
        return {}
    codes = await asyncio.gather(*(coord.load(k, part) for k, part in keys))
    return {k: c for (k, _), c in zip(keys, codes, strict=True) if c != E.none}


def _deliverable(headers: list[tuple[Any, Any]], aborted: list[tuple[int, int]]
                 ) -> list[bool]:
    """Which batches may be delivered: not a control batch (a transaction marker; it is
    archived, never handed to a client), and not a batch of an aborted transaction
    (`aborted`: (producer id, first offset) from the transaction index, read_committed
    only), as a read_committed consumer skips them."""
    pending = sorted(aborted, key=lambda a: a[1])
    active: set[int] = set()
    i = 0
    out = []
    for h, _ in headers:
        last = h.base_offset + h.last_offset_delta
        while i < len(pending) and pending[i][1] <= last:
            active.add(pending[i][0])
            i += 1
        if h.attributes & _CONTROL:
            active.discard(h.producer_id)  # the marker ends its transaction
            out.append(False)
        else:
            out.append(not (h.attributes & _TRANSACTIONAL and h.producer_id in active))
    return out


async def _wait_for_data(ctx: Any, coord: ShareCoordinator, targets: list[tuple[uuid.UUID, int]],
                         deadline: float) -> None:
    """Until the high watermark of one of the partitions moves, records are released, or
    the deadline passes."""
    loop = asyncio.get_running_loop()
    woken = asyncio.Event()
    parts = []
    for tid, p in targets:
        name = coord.topic_name(tid)
        part = ctx.replica_manager.get(name, p) if name else None
        if part is not None:
            parts.append(part)

    def wake(_part: Any = None, _size: int = 0) -> None:
        loop.call_soon(woken.set)

    for part in parts:
        part.add_watcher(wake)
    # a released record (lock timeout, a release, a member leaving) is no HW move
    coord.release_watchers.add(wake)
    try:
        try:
            await asyncio.wait_for(woken.wait(), max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            pass
    finally:
        coord.release_watchers.discard(wake)
        for part in parts:
            part.remove_watcher(wake)

