"""CreateTopics, DeleteTopics, CreatePartitions: metadata changes through the controller."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from odradek.broker.authz import allowed
from odradek.broker.handlers import admin, mutation_quota
from odradek.broker.handlers.common import INTERNAL_TOPICS, Response, decode, respond
from odradek.metadata.acls import AclOperation as Op
from odradek.metadata.acls import ResourceType as RT
from odradek.metadata.controller_requests import (
    CreatableTopic,
    CreatePartitionsResult,
    CreatePartitionsTopic,
    CreateTopicResult,
    DeleteTopicResult,
)
from odradek.protocol.apis import ApiKey, ApiVersionRange
from odradek.protocol.errors import ErrorCode

# CreateTopics v0-1, DeleteTopics v0: removed in Kafka 4, not in kio
VERSIONS = (ApiVersionRange(ApiKey.CREATE_TOPICS, 2, 7), ApiVersionRange(ApiKey.DELETE_TOPICS, 1, 6),
            ApiVersionRange(ApiKey.CREATE_PARTITIONS, 0, 3))

log = logging.getLogger(__name__)

_ZERO = uuid.UUID(int=0)


def _config_entries(entries: list[Any]) -> list[dict[str, Any]]:
    return [{"name": e.name, "value": e.value, "read_only": e.read_only,
             "config_source": int(e.source), "is_sensitive": e.sensitive} for e in entries]


def handle_create_topics(ctx: Any, header: Any, frame: memoryview) -> Any:
    req = decode(header, frame)
    specs = []
    for t in req.topics:
        assignments = ({int(a.partition_index): [int(b) for b in a.broker_ids]
                        for a in t.assignments} if t.assignments else None)
        specs.append(CreatableTopic(
            name=t.name, num_partitions=int(t.num_partitions),
            replication_factor=int(t.replication_factor), assignments=assignments,
            configs={c.name: c.value for c in t.configs}))
    validate_only = bool(getattr(req, "validate_only", False))
    return _create_topics(ctx, header, specs, validate_only)


async def _create_topics(ctx: Any, header: Any, specs: list[CreatableTopic],
                         validate_only: bool) -> Response:
    denied: list[CreateTopicResult] = []
    if ctx.authorizer is not None and not allowed(ctx, header, Op.CREATE, RT.CLUSTER,
                                                         "kafka-cluster", log_if_denied=False):
        # Kafka: Create on the cluster, else Create on each topic (TOPIC_AUTHORIZATION_FAILED)
        denied = [CreateTopicResult(s.name, ErrorCode.topic_authorization_failed,
                                    "Authorization failed.")
                  for s in specs if not allowed(ctx, header, Op.CREATE, RT.TOPIC, s.name)]
        refused_names = {r.name for r in denied}
        specs = [s for s in specs if s.name not in refused_names]
    default_count = int(ctx.config.get("num.partitions") or 1)
    throttled = mutation_quota.admit(ctx, header, [
        (s.name, len(s.assignments) if s.assignments else
         (s.num_partitions if s.num_partitions > 0 else default_count)) for s in specs])
    if throttled:
        denied += [CreateTopicResult(n, ErrorCode.throttling_quota_exceeded,
                                     "The throttling quota has been exceeded.")
                   for n in sorted(throttled)]
        specs = [s for s in specs if s.name not in throttled]
    results = await admin.run(
        ctx, ctx.controller.create_topics, specs, validate_only,
        refused=lambda exc: [CreateTopicResult(s.name, exc.code, exc.message) for s in specs]
    ) if specs else []
    results = [*denied, *results]
    topics = []
    for r in results:
        ok = r.error_code == 0
        if not ok:
            log.debug("CreateTopics %r refused: %s%s", r.name, ErrorCode(r.error_code).name.upper(),
                     f": {r.error_message}" if r.error_message else "")
        elif not validate_only:
            log.info("created topic %r (%d partitions, id %s)", r.name, r.num_partitions,
                     r.topic_id)
        topics.append({
            "name": r.name, "topic_id": r.topic_id if ok else _ZERO, "error_code": r.error_code,
            "error_message": r.error_message, "topic_config_error_code": 0,
            "num_partitions": r.num_partitions if ok else -1,
            "replication_factor": r.replication_factor if ok else -1,
            "configs": _config_entries(r.configs) if ok else None})
    return respond(header, {"throttle_time": 0, "topics": topics})


def handle_delete_topics(ctx: Any, header: Any, frame: memoryview) -> Any:
    req = decode(header, frame)
    names: list[str] = []
    ids: list[uuid.UUID] = []
    if header.api_version >= 6:
        for t in req.topics:
            if t.name is not None:
                names.append(t.name)
            else:
                ids.append(t.topic_id or _ZERO)
    else:
        names = list(req.topic_names)
    return _delete_topics(ctx, header, names, ids)


def _refuse_internal(ctx: Any, names: list[str], ids: list[uuid.UUID]
                     ) -> tuple[list[str], list[uuid.UUID], list[DeleteTopicResult]]:
    """The coordinators' topics are never deleted: their loss would drop every group's
    offsets and every transaction's state. Kafka's own tools refuse it ("is a kafka internal
    topic and is not allowed to be marked for deletion"); on the wire the answer is
    INVALID_TOPIC_EXCEPTION, as Kafka gives for records deleted from an internal topic."""
    refused: list[DeleteTopicResult] = []
    keep_names = []
    for name in names:
        if name in INTERNAL_TOPICS:
            topic = ctx.image.topics_by_name.get(name)
            refused.append(DeleteTopicResult(
                name, topic.topic_id if topic is not None else _ZERO,
                ErrorCode.invalid_topic_exception,
                f"Topic {name} is an internal topic and cannot be deleted."))
        else:
            keep_names.append(name)
    keep_ids = []
    for tid in ids:
        topic = ctx.image.topics_by_id.get(tid)
        if topic is not None and topic.name in INTERNAL_TOPICS:
            refused.append(DeleteTopicResult(
                topic.name, tid, ErrorCode.invalid_topic_exception,
                f"Topic {topic.name} is an internal topic and cannot be deleted."))
        else:
            keep_ids.append(tid)
    for r in refused:
        log.debug("DeleteTopics of internal topic %s refused", r.name)
    return keep_names, keep_ids, refused


async def _delete_topics(ctx: Any, header: Any, names: list[str], ids: list[uuid.UUID]) -> Response:
    names, ids, refused = _refuse_internal(ctx, names, ids)
    if ctx.authorizer is not None:
        # Kafka: Delete on each topic (by id: Describe too, else the id stays unknown)
        by_id = {i: ctx.image.topics_by_id.get(i) for i in ids}
        for i, t in by_id.items():
            if t is not None and not allowed(ctx, header, Op.DESCRIBE, RT.TOPIC, t.name):
                refused.append(DeleteTopicResult(None, i, ErrorCode.topic_authorization_failed,
                                                 None))
            elif t is not None and not allowed(ctx, header, Op.DELETE, RT.TOPIC, t.name):
                refused.append(DeleteTopicResult(t.name, i,
                                                 ErrorCode.topic_authorization_failed, None))
        refused_ids = {r.topic_id for r in refused}
        ids = [i for i in ids if i not in refused_ids]
        for n in names:
            if not allowed(ctx, header, Op.DELETE, RT.TOPIC, n):
                refused.append(DeleteTopicResult(n, _ZERO, ErrorCode.topic_authorization_failed,
                                                 None))
        names = [n for n in names if n not in {r.name for r in refused}]
    image = ctx.image
    costs: list[tuple[Any, int]] = [
        (n, len(t.partitions) if (t := image.topics_by_name.get(n)) is not None else 0)
        for n in names]
    costs += [(i, len(t.partitions) if (t := image.topics_by_id.get(i)) is not None else 0)
              for i in ids]
    throttled = mutation_quota.admit(ctx, header, costs)
    if throttled:
        refused += [DeleteTopicResult(n, _ZERO, ErrorCode.throttling_quota_exceeded,
                                      "The throttling quota has been exceeded.")
                    for n in names if n in throttled]
        refused += [DeleteTopicResult(None, i, ErrorCode.throttling_quota_exceeded,
                                      "The throttling quota has been exceeded.")
                    for i in ids if i in throttled]
        names = [n for n in names if n not in throttled]
        ids = [i for i in ids if i not in throttled]
    results = (await admin.run(
        ctx, ctx.controller.delete_topics, names, ids,
        refused=lambda exc: [DeleteTopicResult(n, _ZERO, exc.code, exc.message) for n in names]
        + [DeleteTopicResult(None, i, exc.code, exc.message) for i in ids])
        if names or ids else [])
    results = refused + list(results)
    for r in results:
        if r.error_code == 0:
            log.info("deleted topic %r (id %s)", r.name, r.topic_id)
    return respond(header, {"throttle_time": 0, "responses": [
        {"name": r.name, "topic_id": r.topic_id, "error_code": r.error_code,
         "error_message": r.error_message} for r in results]})


def handle_create_partitions(ctx: Any, header: Any, frame: memoryview) -> Any:
    req = decode(header, frame)
    specs = [CreatePartitionsTopic(
        name=t.name, count=int(t.count),
        assignments=[[int(b) for b in a.broker_ids] for a in t.assignments]
        if t.assignments is not None else None) for t in req.topics]
    return _create_partitions(ctx, header, specs, bool(req.validate_only))


async def _create_partitions(ctx: Any, header: Any, specs: list[CreatePartitionsTopic],
                             validate_only: bool) -> Response:
    # Kafka: Alter on each topic
    denied = [CreatePartitionsResult(s.name, ErrorCode.topic_authorization_failed,
                                     "The topic authorization is failed.")
              for s in specs if not allowed(ctx, header, Op.ALTER, RT.TOPIC, s.name)]
    specs = [s for s in specs if s.name not in {d.name for d in denied}]
    image = ctx.image
    throttled = mutation_quota.admit(ctx, header, [
        (s.name, s.count - len(t.partitions) if (t := image.topics_by_name.get(s.name))
         is not None else 0) for s in specs])
    denied += [CreatePartitionsResult(s.name, ErrorCode.throttling_quota_exceeded,
                                      "The throttling quota has been exceeded.")
               for s in specs if s.name in throttled]
    specs = [s for s in specs if s.name not in throttled]
    results = [*denied, *(await admin.run(
        ctx, ctx.controller.create_partitions, specs, validate_only,
        refused=lambda exc: [CreatePartitionsResult(s.name, exc.code, exc.message)
                             for s in specs]) if specs else [])]
    return respond(header, {"throttle_time": 0, "results": [
        {"name": r.name, "error_code": r.error_code, "error_message": r.error_message}
        for r in results]})
