"""Metadata (v0-13; v13 adds a top-level error code, Kafka 4.0's KIP-1102): brokers, controller, cluster id, topics and partitions.

Unknown topics are created when auto.create.topics.enable is on and the
client allows it (always for v0-3), as Kafka does; that is disk work, so
those requests are answered from a coroutine after the creation.
"""

from __future__ import annotations

import logging
from typing import Any

from odradek.broker import authz
from odradek.broker.handlers import admin
from odradek.broker.handlers.common import (
    INTERNAL_TOPICS,
    Response,
    decode,
    encode_item,
    item_class,
    respond,
    respond_with_items,
    valid_topic_name,
)
from odradek.broker.refusals import REFUSALS
from odradek.metadata.acls import AclOperation, ResourceType
from odradek.metadata.directories import MIGRATING_DIR, UNASSIGNED_DIR, dir_of, is_online
from odradek.protocol.apis import ApiKey, ApiVersionRange
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

NO_AUTHORIZED_OPS = -2147483648


def brokers(ctx: Any) -> list[dict[str, Any]]:
    return [{"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in admin.live_brokers(ctx)]


def online_dirs(brokers: Any) -> frozenset[Any]:
    """Every directory some broker has online, and the reserved ids (never offline but LOST):
    a partition whose directories are all in it has no offline replica (the common case,
    one set test per directory)."""
    if not brokers:
        return frozenset()
    return frozenset({d for b in brokers.values() for d in b.log_dirs}
                     | {MIGRATING_DIR, UNASSIGNED_DIR})


def offline_replicas(p: Any, brokers: Any, online: frozenset[Any]) -> tuple[int, ...]:
    """The replicas whose log directory is offline (KIP-858: Kafka's getOfflineReplicas
    asks the broker's registration whether the replica's directory is online)."""
    dirs = getattr(p, "directories", ())
    if not dirs or not brokers or all(d in online for d in dirs):
        return ()
    out = []
    for replica in p.replicas:
        registration = brokers.get(replica)
        if registration is not None and not is_online(
                dir_of(p.replicas, dirs, replica), registration.log_dirs):
            out.append(replica)
    return tuple(out)


def partition_entries(topic: Any, brokers: Any = None) -> list[dict[str, Any]]:
    parts = topic.partitions
    online = online_dirs(brokers)
    out = []
    for p in sorted(parts.values() if isinstance(parts, dict) else parts,
                    key=lambda p: p.partition):
        out.append({
            "error_code": ErrorCode.none if p.leader >= 0 else ErrorCode.leader_not_available,
            "partition_index": p.partition, "leader_id": p.leader,
            "leader_epoch": p.leader_epoch, "replica_nodes": tuple(p.replicas),
            "isr_nodes": tuple(p.isr), "offline_replicas": offline_replicas(p, brokers, online)})
    return out


def topic_entry(topic: Any, brokers: Any = None) -> dict[str, Any]:
    return {"error_code": ErrorCode.none, "name": topic.name, "topic_id": topic.topic_id,
            "is_internal": topic.name in INTERNAL_TOPICS, "partitions": partition_entries(topic, brokers),
            "topic_authorized_operations": NO_AUTHORIZED_OPS}


class _Found:
    """A topic the answer shows as it is in the image (encoded from the cache if it can be)."""

    __slots__ = ("brokers", "topic")

    def __init__(self, topic: Any, brokers: Any) -> None:
        self.topic = topic
        self.brokers = brokers


# Encoded topic entries, per entry class (one a version), by topic id: (topic image, brokers,
# bytes). Images are immutable and a change makes new TopicImage/brokers objects, so an entry
# whose objects are the ones cached is answered with the bytes encoded then. Without it a
# client's Metadata of every topic rebuilt and re-encoded each partition per request: with
# 20,000 partitions most of a producer's start went there (tests/system/test_partitions_20k.py).
_ENCODED: dict[Any, dict[Any, tuple[Any, Any, bytes]]] = {}


def _encoded_topic(header: Any, found: _Found, topic_count: int) -> bytes:
    cache = _ENCODED.setdefault(item_class(header, "topics"), {})
    topic = found.topic
    hit = cache.get(topic.topic_id)
    if hit is not None and hit[0] is topic and hit[1] is found.brokers:
        return hit[2]
    encoded = encode_item(header, "topics", topic_entry(topic, found.brokers))
    if len(cache) > 2 * topic_count + 64:  # deleted topics' entries: start again
        cache.clear()
    cache[topic.topic_id] = (topic, found.brokers, encoded)
    return encoded


def error_entry(code: ErrorCode, name: str | None, topic_id: Any = None) -> dict[str, Any]:
    return {"error_code": code, "name": name, "topic_id": topic_id, "is_internal": False,
            "partitions": (), "topic_authorized_operations": NO_AUTHORIZED_OPS}


VERSIONS = (ApiVersionRange(ApiKey.METADATA, 0, 13),)


def handle(ctx: Any, header: Any, frame: memoryview) -> Any:
    req = decode(header, frame)
    version = header.api_version
    image = ctx.image
    requested = req.topics
    secured = ctx.authorizer is not None
    if requested is None or (version == 0 and len(requested) == 0):
        # every topic the principal may describe; the others are left out, unlogged (Kafka)
        return _answer(ctx, header, req, [
            _Found(t, image.brokers) for t in sorted(image.topics_by_name.values(), key=lambda t: t.name)
            if not secured or authz.allowed(ctx, header, AclOperation.DESCRIBE,
                                            ResourceType.TOPIC, t.name, log_if_denied=False)])
    allow_auto = version < 4 or bool(getattr(req, "allow_auto_topic_creation", True))
    auto = allow_auto and ctx.config.get_bool("auto.create.topics.enable")
    entries: list[dict[str, Any] | str] = []
    to_create: list[str] = []
    for t in requested:
        name = getattr(t, "name", None)
        topic_id = getattr(t, "topic_id", None)
        if name is None and topic_id is not None and topic_id.int != 0:
            found = image.topics_by_id.get(topic_id)
            if found is not None and secured and not _describable(ctx, header, found.name):
                entries.append(error_entry(ErrorCode.topic_authorization_failed, None, topic_id))
                continue
            entries.append(_Found(found, image.brokers) if found is not None
                           else error_entry(ErrorCode.unknown_topic_id, None, topic_id))
            continue
        if name is None:
            entries.append(error_entry(ErrorCode.invalid_topic_exception, None))
            continue
        if secured and valid_topic_name(name) and not _describable(ctx, header, name):
            entries.append(error_entry(ErrorCode.topic_authorization_failed, name))
            continue
        found = image.topics_by_name.get(name)
        if found is not None:
            entries.append(_Found(found, image.brokers))
        elif not valid_topic_name(name):
            log.debug("Metadata request from client %r names an invalid topic %r",
                     header.client_id, name)
            entries.append(error_entry(ErrorCode.invalid_topic_exception, name))
        elif auto and secured and not _creatable(ctx, header, name):
            entries.append(error_entry(ErrorCode.topic_authorization_failed, name))
        elif auto:
            entries.append(name)
            to_create.append(name)
        else:
            entries.append(error_entry(ErrorCode.unknown_topic_or_partition, name))
    if not to_create:
        return _answer(ctx, header, req, entries)  # type: ignore[arg-type]
    return _auto_create(ctx, header, req, entries, to_create)


async def _auto_create(ctx: Any, header: Any, req: Any, entries: list[Any],
                       names: list[str]) -> Response:
    errors = await admin.auto_create_topics(ctx, names)
    image = ctx.image
    final = []
    for e in entries:
        if isinstance(e, str):
            topic = image.topics_by_name.get(e)
            if topic is not None:
                final.append(_Found(topic, image.brokers))
            else:
                final.append(error_entry(errors.get(e, ErrorCode.leader_not_available), e))
        else:
            final.append(e)
    return _answer(ctx, header, req, final)


def _describable(ctx: Any, header: Any, name: str) -> bool:
    return authz.allowed(ctx, header, AclOperation.DESCRIBE, ResourceType.TOPIC, name)


def _creatable(ctx: Any, header: Any, name: str) -> bool:
    # auto-creation needs Create on the cluster or on the topic (KafkaApis)
    return (authz.allowed(ctx, header, AclOperation.CREATE, ResourceType.CLUSTER,
                          "kafka-cluster", log_if_denied=False)
            or authz.allowed(ctx, header, AclOperation.CREATE, ResourceType.TOPIC, name))


def _answer(ctx: Any, header: Any, req: Any, entries: list[Any]) -> Response:
    include_ops = getattr(req, "include_topic_authorized_operations", False)
    topics = [e if isinstance(e, dict) or not include_ops else topic_entry(e.topic, e.brokers)
              for e in entries]
    if include_ops:
        for t in topics:
            if t["error_code"] == ErrorCode.none:
                t["topic_authorized_operations"] = authz.authorized_operations(
                    ctx, header, ResourceType.TOPIC, t["name"])
    cluster_ops = NO_AUTHORIZED_OPS
    if (getattr(req, "include_cluster_authorized_operations", False)
            and authz.cluster_allowed(ctx, header, AclOperation.DESCRIBE)):
        cluster_ops = authz.authorized_operations(ctx, header, ResourceType.CLUSTER,
                                                  "kafka-cluster")
    values = {
        "throttle_time": 0, "error_code": ErrorCode.none, "brokers": brokers(ctx), "cluster_id": ctx.cluster_id,
        "controller_id": ctx.controller_id, "cluster_authorized_operations": cluster_ops}
    if include_ops:
        return respond(header, {**values, "topics": topics})
    # the error entries go by refusals.py as respond's would; a found topic's partition
    # codes are none or LEADER_NOT_AVAILABLE, routine, never logged
    errors = [t for t in topics if isinstance(t, dict)]
    REFUSALS.response(header, {"topics": errors})
    return respond_with_items(header, values, "topics", [
        encode_item(header, "topics", t) if isinstance(t, dict)
        else _encoded_topic(header, t, len(ctx.image.topics_by_id)) for t in topics])
