"""DeleteRecords and OffsetForLeaderEpoch: per-partition log operations, on the leader.

OffsetForLeaderEpoch answers followers truncating before they fetch (KIP-101/279: where a
leader epoch ends in the leader's log) and consumers validating their position (KIP-320)."""

from __future__ import annotations

from typing import Any

from odradek.broker.authz import allowed, cluster_allowed
from odradek.broker.handlers.common import Response, decode, respond, valid_topic_name
from odradek.metadata.acls import AclOperation as Op
from odradek.metadata.acls import ResourceType as RT
from odradek.protocol.apis import ApiKey, ApiVersionRange
from odradek.protocol.errors import ErrorCode, KafkaError

# OffsetForLeaderEpoch v0-1: removed in Kafka 4, not in kio
VERSIONS = (ApiVersionRange(ApiKey.DELETE_RECORDS, 0, 2),
            ApiVersionRange(ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, 4))

HIGH_WATERMARK = -1


def _missing(name: str) -> ErrorCode:
    return (ErrorCode.unknown_topic_or_partition if valid_topic_name(name)
            else ErrorCode.invalid_topic_exception)


def handle_delete_records(ctx: Any, header: Any, frame: memoryview) -> Response:
    req = decode(header, frame)
    rm = ctx.replica_manager
    topics = []
    for t in req.topics:
        parts = []
        if not allowed(ctx, header, Op.DELETE, RT.TOPIC, t.name):  # Kafka: Delete on the topic
            topics.append({"name": t.name, "partitions": [
                {"partition_index": p.partition_index, "low_watermark": -1,
                 "error_code": ErrorCode.topic_authorization_failed} for p in t.partitions]})
            continue
        for p in t.partitions:
            index = p.partition_index
            part = rm.get(t.name, index)
            if part is None or not part.is_leader:
                parts.append({"partition_index": index, "low_watermark": -1,
                              "error_code": _missing(t.name) if part is None
                              else ErrorCode.not_leader_or_follower})
                continue
            offset = part.high_watermark if p.offset == HIGH_WATERMARK else int(p.offset)
            if offset < 0 or offset > part.high_watermark:
                parts.append({"partition_index": index, "low_watermark": -1,
                              "error_code": ErrorCode.offset_out_of_range})
                continue
            try:
                low = part.log.delete_records_before(offset)
            except KafkaError as exc:
                parts.append({"partition_index": index, "low_watermark": -1,
                              "error_code": exc.code})
                continue
            parts.append({"partition_index": index, "low_watermark": low,
                          "error_code": ErrorCode.none})
        topics.append({"name": t.name, "partitions": parts})
    return respond(header, {"throttle_time": 0, "topics": topics})


def handle_offset_for_leader_epoch(ctx: Any, header: Any, frame: memoryview) -> Response:
    req = decode(header, frame)
    rm = ctx.replica_manager
    topics = []
    # Kafka: ClusterAction (a follower), else Describe on each topic
    follower = ctx.authorizer is not None and cluster_allowed(ctx, header, Op.CLUSTER_ACTION,
                                                              log_if_denied=False)
    for t in req.topics:
        parts = []
        if not follower and not allowed(ctx, header, Op.DESCRIBE, RT.TOPIC, t.topic):
            topics.append({"topic": t.topic, "partitions": [
                _epoch_err(p.partition, ErrorCode.topic_authorization_failed)
                for p in t.partitions]})
            continue
        for p in t.partitions:
            index = p.partition
            part = rm.get(t.topic, index)
            if part is None:
                parts.append(_epoch_err(index, _missing(t.topic)))
                continue
            # followers (and consumers validating their position) ask the leader
            code, epoch, end = part.last_offset_for_leader_epoch(
                int(getattr(p, "current_leader_epoch", -1)), int(p.leader_epoch))
            if code != ErrorCode.none:
                parts.append(_epoch_err(index, code))
                continue
            parts.append({"error_code": ErrorCode.none, "partition": index,
                          "leader_epoch": epoch, "end_offset": end})
        topics.append({"topic": t.topic, "partitions": parts})
    return respond(header, {"throttle_time": 0, "topics": topics})


def _epoch_err(index: int, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": code, "partition": index, "leader_epoch": -1, "end_offset": -1}
