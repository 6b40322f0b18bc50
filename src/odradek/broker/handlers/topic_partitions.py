"""DescribeTopicPartitions (v0, KIP-966): topics and their partitions from the metadata image,
a page at a time.

Topics are answered in name order (every topic when the request names none); at most
`response_partition_limit` partitions (bounded by the broker's
max.request.partition.size.limit) go in one answer, and `next_cursor` says where the next page
starts: the next partition of a topic cut short, or partition 0 of the next topic. A cursor
starts the page at its topic and partition; the request must name the cursor's topic when it
names topics, as Kafka requires. A topic named but unknown is answered with
UNKNOWN_TOPIC_OR_PARTITION and takes none of the page. odradek keeps no eligible leader
replicas (KIP-966's ELR): both lists are empty.

Authorized as Kafka's DescribeTopicPartitionsRequestHandler does: a topic the principal may not
describe is left out of an all-topics answer, and answered TOPIC_AUTHORIZATION_FAILED (whether
or not it exists) when named.
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz, refusals
from odradek.broker.handlers.common import INTERNAL_TOPICS, Response, decode, respond
from odradek.broker.handlers.metadata import NO_AUTHORIZED_OPS, error_entry, partition_entries
from odradek.metadata.acls import AclOperation, ResourceType
from odradek.protocol.apis import ApiKey, ApiVersionRange
from odradek.protocol.errors import ErrorCode

VERSIONS = (ApiVersionRange(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, 0),)

# Kafka's max.request.partition.size.limit default
PARTITION_LIMIT = 2000


def handle(ctx: Any, header: Any, frame: memoryview) -> Response:
    req = decode(header, frame)
    image = ctx.image
    names = sorted({t.name for t in req.topics})
    cursor = req.cursor
    limit = min(int(req.response_partition_limit),
                ctx.config.get("max.request.partition.size.limit") or PARTITION_LIMIT)
    refused = _refusal(names, cursor, limit)
    if refused is not None:
        refusals.note(header, ErrorCode.invalid_request, refused)
        return respond(header, {"throttle_time": 0, "next_cursor": None, "topics": [
            error_entry(ErrorCode.invalid_request, n) for n in names]})
    every = not names
    if every:
        names = sorted(image.topics_by_name)
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]
    secured = ctx.authorizer is not None
    topics: list[dict[str, Any]] = []
    next_cursor = None
    left = limit
    for name in names:
        if secured and not authz.allowed(ctx, header, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                         name, log_if_denied=not every):
            if not every:  # no topic id: it would tell that the topic exists
                topics.append(error_entry(ErrorCode.topic_authorization_failed, name))
            continue
        topic = image.topics_by_name.get(name)
        if topic is None:
            topics.append(error_entry(ErrorCode.unknown_topic_or_partition, name))
            continue
        if left == 0:
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        parts = [p for p in partition_entries(topic, image.brokers)
                 if p["partition_index"] >= start]
        page = parts[:left]
        left -= len(page)
        topics.append(_topic(topic, page))
        if len(page) < len(parts):
            next_cursor = {"topic_name": name, "partition_index": parts[len(page)]["partition_index"]}
            break
    return respond(header, {"throttle_time": 0, "topics": topics, "next_cursor": next_cursor})


def _refusal(names: list[str], cursor: Any, limit: int) -> str | None:
    if limit < 1:
        return "ResponsePartitionLimit must be positive"
    if cursor is None:
        return None
    if cursor.partition_index < 0:
        return "The partition index in the cursor should be non-negative"
    if names and cursor.topic_name not in names:
        return "The topic list should contain the cursor topic"
    return None


def _topic(topic: Any, partitions: list[dict[str, Any]]) -> dict[str, Any]:
    for p in partitions:
        p["eligible_leader_replicas"] = ()
        p["last_known_elr"] = ()
    return {"error_code": ErrorCode.none, "name": topic.name, "topic_id": topic.topic_id,
            "is_internal": topic.name in INTERNAL_TOPICS, "partitions": partitions,
            "topic_authorized_operations": NO_AUTHORIZED_OPS}
