"""ListOffsets (v1+): earliest, latest, max timestamp, by timestamp."""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.handlers.common import Response, decode, respond, valid_topic_name
from odradek.metadata.acls import AclOperation, ResourceType
from odradek.protocol.apis import ApiKey, ApiVersionRange
from odradek.protocol.errors import ErrorCode, KafkaError

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6  # v11 (Kafka 4.2, KIP-1023)
READ_COMMITTED = 1
DEBUGGING_REPLICA_ID = -2


# v0: Kafka 4 removed it and kio (our codec) has no schema for it; v10 adds a timeout for
# reads from remote storage (odradek has none: nothing to wait for), v11 the earliest pending
# upload offset (none without tiered storage: -1, as Kafka answers without remote storage)
VERSIONS = (ApiVersionRange(ApiKey.LIST_OFFSETS, 1, 11),)


def handle(ctx: Any, header: Any, frame: memoryview) -> Response:
    req = decode(header, frame)
    committed = int(getattr(req, "isolation_level", 0)) == READ_COMMITTED
    # only the debugging replica id may read a follower's offsets (as Kafka)
    leader_only = int(getattr(req, "replica_id", -1)) != DEBUGGING_REPLICA_ID
    rm = ctx.replica_manager
    topics = []
    for t in req.topics:
        if not authz.allowed(ctx, header, AclOperation.DESCRIBE, ResourceType.TOPIC, t.name):
            parts = [_err(p.partition_index, ErrorCode.topic_authorization_failed)
                     for p in t.partitions]
            topics.append({"name": t.name, "partitions": parts})
            continue
        parts = []
        for p in t.partitions:
            parts.append(_one(rm, t.name, p, committed, leader_only, header.api_version))
        topics.append({"name": t.name, "partitions": parts})
    return respond(header, {"throttle_time": 0, "topics": topics})


def _one(rm: Any, name: str, p: Any, committed: bool, leader_only: bool,
         version: int) -> dict[str, Any]:
    index = p.partition_index
    part = rm.get(name, index)
    if part is None:
        code = (ErrorCode.unknown_topic_or_partition if valid_topic_name(name)
                else ErrorCode.invalid_topic_exception)
        return _err(index, code)
    if leader_only and not part.is_leader:
        return _err(index, ErrorCode.not_leader_or_follower)
    fenced = part.leader_epoch_error(int(getattr(p, "current_leader_epoch", -1)))
    if fenced is not None:
        return _err(index, fenced)
    ts = int(p.timestamp)
    epoch = part.leader_epoch
    upper = part.last_stable_offset if committed else part.high_watermark
    try:
        if ts == LATEST:
            offset, found_ts = upper, -1
        elif ts in (EARLIEST, EARLIEST_LOCAL):
            offset, found_ts = part.log_start_offset, -1
        elif ts == LATEST_TIERED or (ts == EARLIEST_PENDING_UPLOAD and version >= 11):
            offset, found_ts, epoch = -1, -1, -1
        elif ts == MAX_TIMESTAMP:
            found = part.log.max_timestamp_offset()
            if found is None or found[0] < 0:
                offset, found_ts, epoch = -1, -1, -1
            else:
                offset, found_ts = found
        elif ts < 0:
            return _err(index, ErrorCode.invalid_request)
        else:
            found = part.log.offset_for_timestamp(ts)
            if found is None or found[0] >= upper:
                offset, found_ts, epoch = -1, -1, -1
            else:
                offset, found_ts = found
    except KafkaError as exc:
        return _err(index, exc.code)
    return {"partition_index": index, "error_code": ErrorCode.none, "timestamp": found_ts,
            "offset": offset, "leader_epoch": epoch}


def _err(index: int, code: ErrorCode) -> dict[str, Any]:
    return {"partition_index": index, "error_code": code, "timestamp": -1, "offset": -1,
            "leader_epoch": -1}
