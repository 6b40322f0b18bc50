"""Group APIs: FindCoordinator, the classic group protocol, offsets, KIP-848, admin.

Each handler turns the kio request into plain values for the coordinator
(odradek.coordinator.group) and its answer into the response of the
request's version. Handlers that may wait (JoinGroup, SyncGroup) return a
coroutine; the server keeps the connection's responses in order.
"""

from __future__ import annotations

import json
import logging
import struct
import uuid
from typing import Any

from odradek.broker.authz import allowed, authorized_operations
from odradek.broker.entities import ms
from odradek.broker.handlers import admin, share_admin, share_state
from odradek.broker.handlers.common import Response, decode, respond
from odradek.coordinator.group.classic import ClassicGroup, GroupState
from odradek.coordinator.group.consumer import ConsumerGroup
from odradek.coordinator.group.coordinator import (
    CONSUMER_STATE_NAMES,
    GroupCoordinator,
    JoinRequest,
    OffsetCommitEntry,
)
from odradek.metadata.acls import AclOperation as Op
from odradek.metadata.acls import ResourceType as RT
from odradek.protocol.apis import ApiKey, ApiVersionRange
from odradek.protocol.errors import ErrorCode
from odradek.protocol.primitives import encode_uvarint as _uvarint

log = logging.getLogger(__name__)
E = ErrorCode
# what `odradek group describe` sends as client id to get the node's lag status
LAG_CLIENT_ID = "odradek-group-cli"
LAG_TAG = 10_000
LAG_TRAILER = b"ODRADEK-LAG"
GROUP_KEY = 0
TRANSACTION_KEY = 1
TOPIC_ID_OFFSETS_VERSION = 10
SHARE_KEY = 2  # FindCoordinator v6: "group:topic-id:partition" of a share group
_ZERO = uuid.UUID(int=0)


def _coord(ctx: Any) -> GroupCoordinator:
    return ctx.group_coordinator  # type: ignore[no-any-return]


def _host(peer: str | None) -> str:
    if not peer:
        return ""
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return "/" + host.strip("[]")


# OffsetCommit/OffsetFetch start where kio's schemas do. ConsumerGroupHeartbeat/Describe go
# to v1 (Kafka 4.0, KIP-1082, beyond Kafka 3.9): librdkafka 2.10+ needs v1 for
# group.protocol=consumer.
VERSIONS = (
    # v6 (Kafka 4.0) adds the share key type (KIP-932), for brokers' share-state
    # persisters (share_state.find_share_coordinator); group and transaction keys are
    # answered as in v5
    ApiVersionRange(ApiKey.FIND_COORDINATOR, 0, 6),
    ApiVersionRange(ApiKey.JOIN_GROUP, 0, 9),
    ApiVersionRange(ApiKey.SYNC_GROUP, 0, 5),
    ApiVersionRange(ApiKey.HEARTBEAT, 0, 4),
    ApiVersionRange(ApiKey.LEAVE_GROUP, 0, 5),
    # v10 (Kafka 4.1, KIP-848): topics by id
    ApiVersionRange(ApiKey.OFFSET_COMMIT, 2, 10),
    ApiVersionRange(ApiKey.OFFSET_FETCH, 1, 10),
    ApiVersionRange(ApiKey.OFFSET_DELETE, 0, 0),
    ApiVersionRange(ApiKey.DESCRIBE_GROUPS, 0, 6),  # v6: GROUP_ID_NOT_FOUND, error_message
    ApiVersionRange(ApiKey.LIST_GROUPS, 0, 5),
    ApiVersionRange(ApiKey.DELETE_GROUPS, 0, 2),
    ApiVersionRange(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1),
    ApiVersionRange(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1),
)


# ------------------------------------------------------------------ FindCoordinator


def handle_find_coordinator(ctx: Any, header: Any, frame: memoryview) -> Response:
    req = decode(header, frame)
    key_type = int(getattr(req, "key_type", 0))
    keys = list(req.coordinator_keys) if header.api_version >= 4 else [req.key]
    results = [_authorized_find(ctx, header, key_type, key) for key in keys]
    if header.api_version >= 4:
        return respond(header, {"throttle_time": 0, "coordinators": results})
    r = results[0]
    return respond(header, {"throttle_time": 0, "error_code": r["error_code"],
                            "error_message": r["error_message"], "node_id": r["node_id"],
                            "host": r["host"], "port": r["port"]})


def _authorized_find(ctx: Any, header: Any, key_type: int, key: str) -> dict[str, Any]:
    # issue 16: Describe on the group or transactional id whose coordinator is asked for
    rt, code = ((RT.TRANSACTIONAL_ID, E.transactional_id_authorization_failed)
                if key_type == TRANSACTION_KEY else (RT.GROUP, E.group_authorization_failed))
    if key and key_type in (GROUP_KEY, TRANSACTION_KEY) and not allowed(
            ctx, header, Op.DESCRIBE, rt, key):
        return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": code,
                "error_message": None}
    if key_type == SHARE_KEY:  # issue 20: a share-state persister's lookup (share_state.py)
        return share_state.find_share_coordinator(ctx, header, key)
    return _find_one(ctx, key_type, key)


def _group_denied(ctx: Any, header: Any, op: Op, group_id: str) -> bool:
    return not allowed(ctx, header, op, RT.GROUP, group_id)


def _find_one(ctx: Any, key_type: int, key: str) -> dict[str, Any]:
    def err(code: ErrorCode, message: str | None = None) -> dict[str, Any]:
        return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": code,
                "error_message": message}

    if key_type == TRANSACTION_KEY:
        # issue 6: the transaction coordinator answers for its transactional ids
        tc = getattr(ctx, "transaction_coordinator", None)
        if not key:
            return err(E.invalid_request, "empty transactional id")
        if tc is None:
            return err(E.coordinator_not_available)
        if not tc.is_coordinator_for(key):  # issue 14: the leader of its partition, elsewhere
            return admin.coordinator_at(ctx, "__transaction_state", tc.partition_of(key),
                                        key) or err(E.coordinator_not_available)
    elif key_type != GROUP_KEY:
        return err(E.invalid_request, f"unknown key type {key_type}")
    elif not key:
        return err(E.invalid_request, "empty group id")
    elif not _coord(ctx).is_coordinator_for(key):
        return admin.coordinator_at(ctx, "__consumer_offsets",
                                    _coord(ctx).store.partition_for(key), key) \
            or err(E.coordinator_not_available)
    me = next((b for b in admin.live_brokers(ctx) if b.node_id == ctx.node_id), None)
    if me is None:
        return err(E.coordinator_not_available)
    return {"key": key, "node_id": me.node_id, "host": me.host, "port": me.port,
            "error_code": E.none, "error_message": None}


# ------------------------------------------------------------------ classic protocol


def _is_share_group(ctx: Any, group_id: str) -> bool:
    """Issue 20: group ids are one namespace; a share group's id is not a classic or
    consumer group's (Kafka answers GROUP_ID_NOT_FOUND, "is not a classic group")."""
    return group_id not in _coord(ctx).groups and share_admin.is_share_group(ctx, group_id)


def handle_join_group(ctx: Any, header: Any, frame: memoryview, peer: str | None = None) -> Any:
    req = decode(header, frame)
    denied = _group_denied(ctx, header, Op.READ, req.group_id)
    if denied or _is_share_group(ctx, req.group_id):
        return respond(header, {
            "throttle_time": 0, "error_code": E.group_authorization_failed if denied
            else E.group_id_not_found, "generation_id": -1,
            "protocol_type": None, "protocol_name": None if header.api_version >= 7 else "",
            "leader": "", "skip_assignment": False, "member_id": req.member_id, "members": []})
    session = ms(req.session_timeout)
    rebalance = ms(req.rebalance_timeout) if header.api_version >= 1 else session
    join = JoinRequest(
        group_id=req.group_id, member_id=req.member_id,
        group_instance_id=getattr(req, "group_instance_id", None),
        client_id=header.client_id or "", client_host=_host(peer),
        session_timeout_ms=session, rebalance_timeout_ms=rebalance,
        protocol_type=req.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in req.protocols],
        require_known_member_id=header.api_version >= 4)
    return _join(ctx, header, join)


async def _join(ctx: Any, header: Any, join: JoinRequest) -> Response:
    r = await _coord(ctx).join_group(join)
    return respond(header, {
        "throttle_time": 0, "error_code": r.error, "generation_id": r.generation_id,
        "protocol_type": r.protocol_type, "protocol_name": r.protocol_name or (
            None if header.api_version >= 7 else ""),
        "leader": r.leader, "skip_assignment": r.skip_assignment, "member_id": r.member_id,
        "members": [{"member_id": mid, "group_instance_id": iid, "metadata": meta}
                    for mid, iid, meta in r.members]})


def handle_sync_group(ctx: Any, header: Any, frame: memoryview) -> Any:
    req = decode(header, frame)
    if _group_denied(ctx, header, Op.READ, req.group_id):
        return respond(header, {"throttle_time": 0, "error_code": E.group_authorization_failed,
                                "protocol_type": None, "protocol_name": None,
                                "assignment": b""})
    return _sync(ctx, header, req)


async def _sync(ctx: Any, header: Any, req: Any) -> Response:
    r = await _coord(ctx).sync_group(
        req.group_id, int(req.generation_id), req.member_id,
        getattr(req, "group_instance_id", None), getattr(req, "protocol_type", None),
        getattr(req, "protocol_name", None),
        {a.member_id: bytes(a.assignment) for a in req.assignments})
    return respond(header, {"throttle_time": 0, "error_code": r.error,
                            "protocol_type": r.protocol_type, "protocol_name": r.protocol_name,
                            "assignment": r.assignment})


def handle_heartbeat(ctx: Any, header: Any, frame: memoryview) -> Response:
    req = decode(header, frame)
    if _group_denied(ctx, header, Op.READ, req.group_id):
        return respond(header, {"throttle_time": 0, "error_code": E.group_authorization_failed})
    code = _coord(ctx).heartbeat(req.group_id, int(req.generation_id), req.member_id,
                                 getattr(req, "group_instance_id", None))
    return respond(header, {"throttle_time": 0, "error_code": code})


def handle_leave_group(ctx: Any, header: Any, frame: memoryview) -> Response:
    req = decode(header, frame)
    if _group_denied(ctx, header, Op.READ, req.group_id):
        return respond(header, {"throttle_time": 0, "error_code": E.group_authorization_failed,
                                "members": []})
    if header.api_version >= 3:
        members = [(m.member_id, m.group_instance_id) for m in req.members]
    else:
        members = [(req.member_id, None)]
    top, results = _coord(ctx).leave_group(req.group_id, members)
    if header.api_version < 3 and top == E.none and results:
        top = results[0][2]
    return respond(header, {"throttle_time": 0, "error_code": top, "members": [
        {"member_id": mid, "group_instance_id": iid, "error_code": code}
        for mid, iid, code in results]})


# ------------------------------------------------------------------ offsets


def _topic_name(ctx: Any, t: Any, version: int) -> str | None:
    # OffsetCommit/OffsetFetch v10 (Kafka 4.1) name topics by id; None for an unknown id
    if version < TOPIC_ID_OFFSETS_VERSION:
        return t.name  # type: ignore[no-any-return]
    topic = ctx.image.topics_by_id.get(t.topic_id)
    return None if topic is None else topic.name  # type: ignore[no-any-return]


def _topic_key(ctx: Any, name: str, version: int) -> dict[str, Any]:
    if version < TOPIC_ID_OFFSETS_VERSION:
        return {"name": name}
    topic = ctx.image.topics_by_name.get(name)
    return {"topic_id": topic.topic_id if topic is not None else _ZERO}


def handle_offset_commit(ctx: Any, header: Any, frame: memoryview) -> Response:
    req = decode(header, frame)
    version = header.api_version
    denied: set[str] = set()
    if ctx.authorizer is not None:
        # Kafka: Read on the group (else every partition GROUP_AUTHORIZATION_FAILED), then
        # Read on each topic (TOPIC_AUTHORIZATION_FAILED for the partitions of the others)
        if _group_denied(ctx, header, Op.READ, req.group_id):
            return respond(header, {"throttle_time": 0, "topics": [
                {**({"name": t.name} if version < TOPIC_ID_OFFSETS_VERSION
                    else {"topic_id": t.topic_id}), "partitions": [
                    {"partition_index": int(p.partition_index),
                     "error_code": E.group_authorization_failed} for p in t.partitions]}
                for t in req.topics]})
        names = [_topic_name(ctx, t, version) for t in req.topics]
        denied = {n for n in names
                  if n is not None and not allowed(ctx, header, Op.READ, RT.TOPIC, n)}
    entries = []
    unknown: list[dict[str, Any]] = []
    for t in req.topics:
        name = _topic_name(ctx, t, version)
        if name is None:
            unknown.append({"topic_id": t.topic_id, "partitions": [
                {"partition_index": p.partition_index, "error_code": E.unknown_topic_id}
                for p in t.partitions]})
            continue
        for p in t.partitions:
            entries.append(OffsetCommitEntry(
                name, int(p.partition_index), int(p.committed_offset),
                int(getattr(p, "committed_leader_epoch", -1)), p.committed_metadata))
    retention = -1
    if 2 <= version <= 4:
        retention = ms(req.retention_time)
    allowed_entries = [e for e in entries if e.topic not in denied] if denied else entries
    errors = _coord(ctx).commit_offsets(
        req.group_id, int(req.generation_id_or_member_epoch), req.member_id,
        getattr(req, "group_instance_id", None), allowed_entries, retention,
        kip848_errors=version >= 9) if allowed_entries else {}
    topics: dict[str, list[dict[str, Any]]] = {}
    for e in entries:
        code = (E.topic_authorization_failed if e.topic in denied
                else errors[(e.topic, e.partition)])
        topics.setdefault(e.topic, []).append({"partition_index": e.partition,
                                               "error_code": code})
    return respond(header, {"throttle_time": 0, "topics": [
        {**_topic_key(ctx, name, version), "partitions": parts}
        for name, parts in topics.items()] + unknown})


def _fetch_group(ctx: Any, group_id: str, topics: Any, member_id: str | None,
                 member_epoch: int, version: int, header: Any = None,
                 require_stable: bool = False) -> tuple[ErrorCode, list[dict[str, Any]]]:
    secured = header is not None and ctx.authorizer is not None
    if secured and _group_denied(ctx, header, Op.DESCRIBE, group_id):
        return E.group_authorization_failed, []
    wanted = None
    unknown: list[dict[str, Any]] = []
    if topics is not None:
        wanted = []
        for t in topics:
            name = _topic_name(ctx, t, version)
            if name is None:
                unknown.append({"topic_id": t.topic_id, "partitions": [
                    {"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1,
                     "metadata": "", "error_code": E.unknown_topic_id}
                    for p in t.partition_indexes]})
            else:
                wanted.append((name, list(t.partition_indexes)))
    err, rows = _coord(ctx).fetch_offsets(group_id, wanted, member_id, member_epoch,
                                          require_stable)
    if secured:
        # requested topics it may not describe: TOPIC_AUTHORIZATION_FAILED; all topics: left out
        visible = {t for t in {r[0] for r in rows}
                   if allowed(ctx, header, Op.DESCRIBE, RT.TOPIC, t,
                              log_if_denied=wanted is not None)}
        if wanted is None:
            rows = [r for r in rows if r[0] in visible]
        else:
            rows = [r if r[0] in visible else (r[0], r[1], E.topic_authorization_failed)
                    for r in rows]
    out: dict[str, list[dict[str, Any]]] = {}
    for topic, p, v in rows:
        if isinstance(v, ErrorCode):
            out.setdefault(topic, []).append({
                "partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1,
                "metadata": "", "error_code": v})
            continue
        out.setdefault(topic, []).append({
            "partition_index": p, "committed_offset": v.offset if v else -1,
            "committed_leader_epoch": v.leader_epoch if v else -1,
            "metadata": v.metadata if v else "", "error_code": E.none})
    by_id = version >= TOPIC_ID_OFFSETS_VERSION
    return err, [{**_topic_key(ctx, t, version), "partitions": ps} for t, ps in out.items()
                 # v10 names topics by id: offsets of a deleted topic have none to give
                 if not by_id or t in ctx.image.topics_by_name] + unknown


def handle_offset_fetch(ctx: Any, header: Any, frame: memoryview) -> Response:
    req = decode(header, frame)
    version = header.api_version
    # v7+ (KIP-447): read_committed consumers ask for offsets no open transaction may change
    stable = bool(getattr(req, "require_stable", False))
    if version >= 8:
        groups = []
        for g in req.groups:
            err, topics = _fetch_group(ctx, g.group_id, g.topics, getattr(g, "member_id", None),
                                       int(getattr(g, "member_epoch", -1)), version, header,
                                       stable)
            groups.append({"group_id": g.group_id, "topics": topics if err == E.none else [],
                           "error_code": err})
        return respond(header, {"throttle_time": 0, "groups": groups})
    err, topics = _fetch_group(ctx, req.group_id, req.topics, None, -1, version, header, stable)
    if version < 2 and err != E.none:
        # v0-1 have no top-level error: it goes on every requested partition
        topics = [{"name": t.name, "partitions": [
            {"partition_index": p, "committed_offset": -1, "metadata": "", "error_code": err}
            for p in t.partition_indexes]} for t in (req.topics or [])]
    return respond(header, {"throttle_time": 0, "topics": topics, "error_code": err})


def handle_offset_delete(ctx: Any, header: Any, frame: memoryview) -> Response:
    req = decode(header, frame)
    wanted = [(t.name, [int(p.partition_index) for p in t.partitions]) for t in req.topics]
    if _group_denied(ctx, header, Op.DELETE, req.group_id):
        return respond(header, {"throttle_time": 0, "error_code": E.group_authorization_failed,
                                "topics": []})
    denied = {n for n, _ in wanted if not allowed(ctx, header, Op.READ, RT.TOPIC, n)}
    err, results = _coord(ctx).delete_offsets(
        req.group_id, [w for w in wanted if w[0] not in denied])
    results = {**results, **{(n, p): E.topic_authorization_failed
                             for n, ps in wanted if n in denied for p in ps}}
    topics = [{"name": name, "partitions": [
        {"partition_index": p, "error_code": results.get((name, p), E.none)} for p in parts]}
        for name, parts in wanted] if err == E.none else []
    return respond(header, {"throttle_time": 0, "error_code": err, "topics": topics})


# ------------------------------------------------------------------ admin


def handle_describe_groups(ctx: Any, header: Any, frame: memoryview) -> Response:
    req = decode(header, frame)
    coord = _coord(ctx)
    out = []
    for gid in req.groups:
        if _group_denied(ctx, header, Op.DESCRIBE, gid):
            out.append({"error_code": E.group_authorization_failed, "error_message": None,
                        "group_id": gid, "group_state": "", "protocol_type": "",
                        "protocol_data": "", "members": [],
                        "authorized_operations": -2147483648})
            continue
        err, g = coord.describe_group(gid)
        row: dict[str, Any] = {"error_code": err, "error_message": None, "group_id": gid,
                               "group_state": "Dead", "protocol_type": "", "protocol_data": "",
                               "members": [], "authorized_operations": -2147483648}
        if getattr(req, "include_authorized_operations", False):
            row["authorized_operations"] = authorized_operations(ctx, header, RT.GROUP, gid)
        if err == E.none and g is None and header.api_version >= 6:
            row["error_code"] = E.group_id_not_found
            row["error_message"] = f"Group {gid} not found."
        elif isinstance(g, ClassicGroup):
            stable = g.state is GroupState.STABLE
            row.update(group_state=g.state.value, protocol_type=g.protocol_type or "",
                       protocol_data=g.protocol_name or "" if stable else "", members=[
                           {"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                            "client_id": m.client_id, "client_host": m.client_host,
                            "member_metadata": m.metadata_for(g.protocol_name or "")
                            if stable else b"",
                            "member_assignment": m.assignment if stable else b""}
                           for m in g.members.values()])
        elif isinstance(g, ConsumerGroup) and header.api_version >= 6:
            # Kafka describes only classic groups here: a consumer group, also one with
            # classic members during a migration, is "not a classic group" (v6, KIP-1043) and
            # Dead before; its members of both kinds are in ConsumerGroupDescribe (member_type)
            row["error_code"] = E.group_id_not_found
            row["error_message"] = f"Group {gid} is not a classic group."
        out.append(row)
    version, parts = respond(header, {"throttle_time": 0, "groups": out})
    if header.client_id == LAG_CLIENT_ID and header.api_version >= 5:
        parts = [_with_lag_tag(bytes(parts[0]), coord, list(req.groups))]
    return version, parts


def _with_lag_tag(body: bytes, coord: GroupCoordinator, group_ids: list[str]) -> bytes:
    """The node's lag evaluation for `odradek group describe`, as a top-level tagged field.

    Kafka clients skip tagged fields they do not know, so the response stays a
    valid DescribeGroups v5+ for anyone; the payload ends with a fixed trailer.
    """
    report = {}
    for gid in group_ids:
        status, rows = coord.group_lag(gid)
        report[gid] = {"status": status.value, "partitions": [
            [r.topic, r.partition, r.committed, r.log_end_offset, r.lag_ms, r.status.value]
            for r in rows]}
    payload = json.dumps(report).encode()
    data = payload + struct.pack(">i", len(payload)) + LAG_TRAILER
    # the body ends with the empty top-level tagged-field section (one zero byte)
    if body[-1:] != b"\x00":
        return body
    return body[:-1] + _uvarint(1) + _uvarint(LAG_TAG) + _uvarint(len(data)) + data


def handle_list_groups(ctx: Any, header: Any, frame: memoryview) -> Response:
    req = decode(header, frame)
    states = {s.lower() for s in getattr(req, "states_filter", ()) or ()} or None
    types = {t.lower() for t in getattr(req, "types_filter", ()) or ()} or None
    rows = _coord(ctx).list_groups(states, types) + share_admin.list_rows(ctx, states, types)
    # Kafka: every group with Describe on the cluster, else the ones it may describe
    if ctx.authorizer is not None and not allowed(ctx, header, Op.DESCRIBE, RT.CLUSTER,
                                                  "kafka-cluster", log_if_denied=False):
        rows = [r for r in rows
                if allowed(ctx, header, Op.DESCRIBE, RT.GROUP, r[0], log_if_denied=False)]
    return respond(header, {"throttle_time": 0, "error_code": E.none, "groups": [
        {"group_id": gid, "protocol_type": ptype, "group_state": state, "group_type": gtype}
        for gid, ptype, state, gtype in rows]})


def handle_delete_groups(ctx: Any, header: Any, frame: memoryview) -> Response:
    req = decode(header, frame)
    names = list(req.groups_names)
    denied = {g for g in names if _group_denied(ctx, header, Op.DELETE, g)}
    # issue 20: a share group is deleted by the share coordinator, with its state
    shared = {g for g in names if g not in denied and g not in _coord(ctx).groups
              and share_admin.is_share_group(ctx, g)}
    results = _coord(ctx).delete_groups([g for g in names if g not in denied | shared])
    results.update(dict.fromkeys(denied, E.group_authorization_failed))

    def answer() -> Response:
        return respond(header, {"throttle_time": 0, "results": [
            {"group_id": gid, "error_code": code} for gid, code in results.items()]})

    if not shared:
        return answer()

    async def with_share_groups() -> Response:
        # their state may be coordinated on other nodes: deleted there first
        for g in sorted(shared):
            results[g] = await share_admin.delete(ctx, g)
        return answer()

    return with_share_groups()  # type: ignore[return-value]


# ------------------------------------------------------------------ KIP-848


def handle_consumer_group_heartbeat(ctx: Any, header: Any, frame: memoryview,
                                    peer: str | None = None) -> Response:
    req = decode(header, frame)
    coord = _coord(ctx)
    if _group_denied(ctx, header, Op.READ, req.group_id):
        return respond(header, {
            "throttle_time": 0, "error_code": E.group_authorization_failed, "error_message": None,
            "member_id": req.member_id, "member_epoch": -1, "heartbeat_interval": 0,
            "assignment": None})
    if _is_share_group(ctx, req.group_id):
        return respond(header, {
            "throttle_time": 0, "error_code": E.group_id_not_found,
            "error_message": f"Group {req.group_id} is not a consumer group.",
            "member_id": req.member_id, "member_epoch": -1, "heartbeat_interval": 0,
            "assignment": None})
    owned = None
    if req.topic_partitions is not None:
        owned = {}
        for tp in req.topic_partitions:
            name = coord.topic_names(tp.topic_id)
            if name is not None:
                owned.setdefault(name, set()).update(int(p) for p in tp.partitions)
    r = coord.consumer_group_heartbeat(
        req.group_id, req.member_id, int(req.member_epoch), req.instance_id, req.rack_id,
        ms(req.rebalance_timeout), list(req.subscribed_topic_names)
        if req.subscribed_topic_names is not None else None, req.server_assignor, owned,
        header.client_id or "", _host(peer), getattr(req, "subscribed_topic_regex", None))
    assignment = None
    if r.assignment is not None:
        tps = []
        for topic, parts in r.assignment.items():
            info = coord.topics(topic)
            if info is not None:
                tps.append({"topic_id": info[0], "partitions": parts})
        assignment = {"topic_partitions": tps}
    return respond(header, {
        "throttle_time": 0, "error_code": r.error, "error_message": r.message,
        "member_id": r.member_id, "member_epoch": r.member_epoch,
        "heartbeat_interval": r.heartbeat_interval_ms, "assignment": assignment})


def handle_consumer_group_describe(ctx: Any, header: Any, frame: memoryview) -> Response:
    req = decode(header, frame)
    coord = _coord(ctx)
    out = []
    for gid in req.group_ids:
        err, g = coord.describe_group(gid)
        if _group_denied(ctx, header, Op.DESCRIBE, gid):
            err, g = E.group_authorization_failed, None
        row: dict[str, Any] = {
            "error_code": err, "error_message": None, "group_id": gid, "group_state": "dead",
            "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "", "members": [],
            "authorized_operations": -2147483648}
        if err == E.none and not isinstance(g, ConsumerGroup):
            row["error_code"] = E.group_id_not_found
            row["error_message"] = (f"Group {gid} is not a consumer group." if g is not None
                                    else f"Group {gid} not found.")
        elif isinstance(g, ConsumerGroup):
            # Kafka's ConsumerGroupState names: "Stable", "Reconciling", ...
            row.update(group_state=CONSUMER_STATE_NAMES[g.state], group_epoch=g.group_epoch,
                       assignment_epoch=g.assignment_epoch, assignor_name=g.assignor_name,
                       members=[{
                           "member_id": m.member_id, "instance_id": m.instance_id,
                           "rack_id": m.rack_id, "member_epoch": m.member_epoch,
                           "client_id": m.client_id, "client_host": m.client_host,
                           "subscribed_topic_names": list(m.subscribed_topic_names),
                           "subscribed_topic_regex": m.subscribed_topic_regex,
                           "member_type": 0 if m.classic is not None else 1,
                           "assignment": {"topic_partitions": _named(coord, m.assigned)},
                           "target_assignment": {"topic_partitions": _named(
                               coord, g.target.get(m.member_id, {}))}}
                           for m in g.members.values()])
        out.append(row)
    return respond(header, {"throttle_time": 0, "groups": out})


def _named(coord: GroupCoordinator, tps: Any) -> list[dict[str, Any]]:
    out = []
    for topic, parts in sorted(tps.items()):
        info = coord.topics(topic)
        out.append({"topic_id": info[0] if info else _ZERO, "topic_name": topic,
                    "partitions": sorted(parts)})
    return out
