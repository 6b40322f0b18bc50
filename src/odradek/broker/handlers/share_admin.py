"""The share-group admin APIs (KIP-932): DescribeShareGroupOffsets (with lag, v1),
AlterShareGroupOffsets and DeleteShareGroupOffsets, over coordinator/share/admin.py. Share
groups in ListGroups and DeleteGroups are answered by groups.py through `list_rows` and
`delete`."""

from __future__ import annotations

from typing import Any

from kio.schema.list_offsets.v7 import request as lo
from kio.static.primitive import i8, i32, i64

from odradek.broker.authz import allowed
from odradek.broker.handlers.common import Response, decode, respond
from odradek.coordinator.share import admin
from odradek.coordinator.share.coordinator import ShareCoordinator
from odradek.coordinator.share.state_log import TOPIC, ShareKey
from odradek.metadata.acls import AclOperation as Op
from odradek.metadata.acls import ResourceType as RT
from odradek.network.channel import ChannelError
from odradek.protocol.apis import ApiKey, ApiVersionRange
from odradek.protocol.errors import ErrorCode

E = ErrorCode

VERSIONS = (
    ApiVersionRange(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, 1),
    ApiVersionRange(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, 0),
    ApiVersionRange(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, 0),
)


def _coord(ctx: Any) -> ShareCoordinator:
    return ctx.share_coordinator  # type: ignore[no-any-return]


def _hw(ctx: Any, topic: str, partition: int) -> int | None:
    part = ctx.replica_manager.get(topic, partition)
    return int(part.high_watermark) if part is not None and part.is_leader else None


def _leader_epoch(ctx: Any, topic: str, partition: int) -> int:
    part = ctx.replica_manager.get(topic, partition)
    return int(part.leader_epoch) if part is not None else -1


# ------------------------------------------------------------------ ListGroups, DeleteGroups


def list_rows(ctx: Any, states: set[str] | None, types: set[str] | None
              ) -> list[tuple[str, str, str, str]]:
    """ListGroups rows (group id, protocol type, state, type) of the share groups."""
    coord = _coord(ctx)
    if coord is None or (types and "share" not in types):
        return []
    return [(gid, "share", state, "share") for gid, state in admin.list_groups(coord, states)]


def is_share_group(ctx: Any, group_id: str) -> bool:
    coord = _coord(ctx)
    return coord is not None and group_id in admin.group_ids(coord)


async def delete(ctx: Any, group_id: str) -> ErrorCode:
    return await admin.delete_group(_coord(ctx), group_id)


# ------------------------------------------------------------------ DescribeShareGroupOffsets


def handle_describe_offsets(ctx: Any, header: Any, frame: memoryview) -> Any:
    req = decode(header, frame)
    return _describe_offsets(ctx, header, req)


def _led(ctx: Any, topic: str, partition: int) -> Any:
    part = ctx.replica_manager.get(topic, partition)
    return part if part is not None and part.is_leader else None


LATEST = -1  # ListOffsets' "latest" timestamp: the high watermark (read_uncommitted)
REMOTE_TIMEOUT_S = 10.0


async def _remote_high_watermark(ctx: Any, topic: str, partition: int) -> int | None:
    """The high watermark of a partition another node leads, for the share-partition lag:
    a ListOffsets (latest, read_uncommitted) to its leader over the inter-broker channels,
    as Kafka's group coordinator asks the leaders for the end offsets. None when it cannot
    be had (no peers, no leader, an error): the lag is then unknown (-1)."""
    channels = getattr(_coord(ctx).persister, "channels", None)
    image = ctx.image.topics_by_name.get(topic)
    part = image.partitions.get(partition) if image is not None else None
    if channels is None or part is None or part.leader < 0 or part.leader == ctx.node_id:
        return None
    request = lo.ListOffsetsRequest(
        replica_id=i32(-1), isolation_level=i8(0), topics=(lo.ListOffsetsTopic(
            name=topic, partitions=(lo.ListOffsetsPartition(
                partition_index=i32(partition), current_leader_epoch=i32(part.leader_epoch),
                timestamp=i64(LATEST)),)),))
    try:
        response = await channels.request(part.leader, request, REMOTE_TIMEOUT_S)
        [t] = response.topics
        [p] = t.partitions
    except (ChannelError, OSError, ValueError):
        return None
    return int(p.offset) if int(p.error_code) == 0 and int(p.offset) >= 0 else None


async def _describe_offsets(ctx: Any, header: Any, req: Any) -> Response:
    coord = _coord(ctx)
    # the state of a share-partition lives at its share coordinator, maybe on another node:
    # the persister asks it (once this node knows __share_group_state)
    ready = coord.topics(TOPIC) is not None and await coord.ensure_ready() == E.none
    groups = []
    for g in req.groups:
        gid = g.group_id
        row: dict[str, Any] = {"group_id": gid, "topics": [], "error_code": E.none,
                               "error_message": None}
        if not allowed(ctx, header, Op.DESCRIBE, RT.GROUP, gid):
            row["error_code"] = E.group_authorization_failed
            groups.append(row)
            continue
        wanted: dict[str, list[int] | None] = {}
        if g.topics is None:
            # every share-partition the group has state for here, and every partition of
            # the topics its members subscribe to (their state may be on other nodes)
            for key in admin.keys_of(coord, gid):
                name = coord.topic_name(key.topic_id)
                if name is not None:
                    wanted.setdefault(name, []).append(key.partition)  # type: ignore[union-attr]
            group = coord.groups.get(gid)
            for name in sorted(group.subscribed_topics() if group is not None else ()):
                info = coord.topics(name)
                if info is not None:
                    wanted.setdefault(name, []).extend(range(info[1]))  # type: ignore[union-attr]
            wanted = {n: sorted(set(ps or [])) for n, ps in wanted.items()}
        else:
            wanted = {t.topic_name: [int(p) for p in t.partitions] for t in g.topics}
        for name, parts in sorted(wanted.items()):
            info = coord.topics(name)
            if info is None or not allowed(ctx, header, Op.DESCRIBE, RT.TOPIC, name):
                code = (E.unknown_topic_or_partition if info is None
                        else E.topic_authorization_failed)
                row["topics"].append({"topic_name": name, "topic_id": None, "partitions": [
                    {"partition_index": p, "start_offset": -1, "leader_epoch": -1, "lag": -1,
                     "error_code": code} for p in parts or []]})
                continue
            tid, count = info
            out = []
            for p in sorted(parts or []):
                if not 0 <= p < count:
                    out.append({"partition_index": p, "start_offset": -1, "leader_epoch": -1,
                                "lag": -1, "error_code": E.unknown_topic_or_partition})
                    continue
                key = ShareKey(gid, tid, p)
                if ready:
                    led = _led(ctx, name, p)
                    so = await admin.start_offset_anywhere(coord, key, led)
                    if led is None and so.error == E.none and so.start_offset >= 0:
                        # led elsewhere: the lag needs that leader's high watermark
                        hw = await _remote_high_watermark(ctx, name, p)
                        so = admin.with_high_watermark(so, hw)
                else:
                    so = admin.start_offset(coord, key, _hw(ctx, name, p))
                out.append({"partition_index": p, "start_offset": so.start_offset,
                            "leader_epoch": _leader_epoch(ctx, name, p), "lag": so.lag,
                            "error_code": so.error})
            row["topics"].append({"topic_name": name, "topic_id": tid, "partitions": out})
        groups.append(row)
    return respond(header, {"throttle_time": 0, "groups": groups})


# ------------------------------------------------------------------ Alter/DeleteShareGroupOffsets


def handle_alter_offsets(ctx: Any, header: Any, frame: memoryview) -> Any:
    req = decode(header, frame)
    return _alter(ctx, header, req)


async def _alter(ctx: Any, header: Any, req: Any) -> Response:
    coord = _coord(ctx)

    def top(code: ErrorCode, message: str | None = None) -> Response:
        return respond(header, {"throttle_time": 0, "error_code": code,
                                "error_message": message, "responses": []})

    if not allowed(ctx, header, Op.READ, RT.GROUP, req.group_id):
        return top(E.group_authorization_failed)
    if await coord.ensure_ready() != E.none:
        return top(E.coordinator_not_available)
    g = coord.groups.get(req.group_id)
    if g is not None and g.members:
        return top(E.non_empty_group, f"Share group {req.group_id} is not empty.")
    responses = []
    for t in req.topics:
        info = coord.topics(t.topic_name)
        parts = []
        for p in t.partitions:
            idx = int(p.partition_index)
            if info is None or not 0 <= idx < info[1]:
                code = E.unknown_topic_or_partition
            elif not allowed(ctx, header, Op.READ, RT.TOPIC, t.topic_name):
                code = E.topic_authorization_failed
            else:
                code = await admin.alter_start_offset(coord, ShareKey(req.group_id, info[0], idx),
                                                int(p.start_offset))
            parts.append({"partition_index": idx, "error_code": code, "error_message": None})
        responses.append({"topic_name": t.topic_name,
                          "topic_id": info[0] if info else None, "partitions": parts})
    return respond(header, {"throttle_time": 0, "error_code": E.none, "error_message": None,
                            "responses": responses})


def handle_delete_offsets(ctx: Any, header: Any, frame: memoryview) -> Any:
    req = decode(header, frame)
    return _delete(ctx, header, req)


async def _delete(ctx: Any, header: Any, req: Any) -> Response:
    coord = _coord(ctx)

    def top(code: ErrorCode, message: str | None = None) -> Response:
        return respond(header, {"throttle_time": 0, "error_code": code,
                                "error_message": message, "responses": []})

    if not allowed(ctx, header, Op.DELETE, RT.GROUP, req.group_id):
        return top(E.group_authorization_failed)
    if await coord.ensure_ready() != E.none:
        return top(E.coordinator_not_available)
    if req.group_id not in admin.group_ids(coord):
        return top(E.group_id_not_found, f"Group {req.group_id} not found.")
    g = coord.groups.get(req.group_id)
    if g is not None and g.members:
        return top(E.non_empty_group, f"Share group {req.group_id} is not empty.")
    responses = []
    for t in req.topics:
        info = coord.topics(t.topic_name)
        if info is None:
            code = E.unknown_topic_or_partition
        elif not allowed(ctx, header, Op.READ, RT.TOPIC, t.topic_name):
            code = E.topic_authorization_failed
        else:
            code = await admin.delete_offsets(coord, req.group_id, info[0])
        responses.append({"topic_name": t.topic_name, "topic_id": info[0] if info else None,
                          "error_code": code, "error_message": None})
    return respond(header, {"throttle_time": 0, "error_code": E.none, "error_message": None,
                            "responses": responses})
