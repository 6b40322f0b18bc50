"""DescribeConfigs, AlterConfigs, IncrementalAlterConfigs for topics, this broker and groups."""

from __future__ import annotations

from typing import Any

from odradek.broker.authz import allowed
from odradek.broker.handlers import admin
from odradek.broker.handlers.common import Response, decode, respond, valid_topic_name
from odradek.metadata.acls import AclOperation as Op
from odradek.metadata.acls import ResourceType as RT
from odradek.metadata.config.config_def import ConfigSource
from odradek.metadata.config.describe import describe_broker_configs, describe_topic_configs
from odradek.metadata.config.group_configs import describe_group_configs, validate_group_name
from odradek.metadata.controller_requests import (
    AlterConfigsResource,
    AlterConfigsResult,
    IncrementalAlterConfigsResource,
)
from odradek.protocol.apis import ApiKey, ApiVersionRange
from odradek.protocol.errors import ErrorCode, KafkaError

TOPIC = 2
BROKER = 4
GROUP = 32


def _entry(e: Any, include_synonyms: bool) -> dict[str, Any]:
    return {"name": e.name, "value": e.value, "read_only": e.read_only,
            "config_source": int(e.source), "is_sensitive": e.sensitive,
            "synonyms": [{"name": s.name, "value": s.value, "source": int(s.source)}
                         for s in e.synonyms] if include_synonyms else [],
            "config_type": int(e.type), "documentation": e.documentation}


def _config_denied(ctx: Any, header: Any, op: Op, rtype: int, name: str) -> ErrorCode | None:
    # Kafka: (Describe|Alter)Configs on the topic, or on the cluster for a broker
    if ctx.authorizer is None:
        return None
    if rtype == TOPIC:
        return None if allowed(ctx, header, op, RT.TOPIC, name) \
            else ErrorCode.topic_authorization_failed
    return None if allowed(ctx, header, op, RT.CLUSTER, "kafka-cluster") \
        else ErrorCode.cluster_authorization_failed


def _describe_one(ctx: Any, res: Any, synonyms: bool, docs: bool) -> list[Any]:
    keys = list(res.configuration_keys) if res.configuration_keys is not None else None
    name = res.resource_name
    if res.resource_type == TOPIC:
        if not valid_topic_name(name):
            raise KafkaError(ErrorCode.invalid_topic_exception, f"invalid topic name {name!r}")
        image = ctx.image
        if name not in image.topics_by_name:
            raise KafkaError(ErrorCode.unknown_topic_or_partition,
                             f"topic {name} does not exist")
        return describe_topic_configs(image.topic_configs(name), ctx.config,
                                      include_synonyms=synonyms, include_documentation=docs,
                                      names=keys)
    if res.resource_type == BROKER:
        config = ctx.config
        if name == "":
            entries = describe_broker_configs(config, include_synonyms=synonyms,
                                              include_documentation=docs, names=keys)
            return [e for e in entries
                    if e.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
        try:
            broker_id = int(name)
        except ValueError:
            raise KafkaError(ErrorCode.invalid_request,
                             f"broker id must be an integer, got {name!r}") from None
        if broker_id != ctx.node_id:
            raise KafkaError(ErrorCode.invalid_request,
                             f"unexpected broker id, expected {ctx.node_id} or empty string, "
                             f"but received {name}")
        return describe_broker_configs(config, include_synonyms=synonyms,
                                       include_documentation=docs, names=keys)
    if res.resource_type == GROUP:
        validate_group_name(name)
        overrides = ctx.image.configs.get((GROUP, name), {})
        return describe_group_configs(overrides, ctx.config.get, include_synonyms=synonyms,
                                      include_documentation=docs, names=keys)
    raise KafkaError(ErrorCode.invalid_request,
                     f"unsupported resource type {res.resource_type}")


VERSIONS = (
    ApiVersionRange(ApiKey.DESCRIBE_CONFIGS, 1, 4),  # v0: removed in Kafka 4, not in kio
    ApiVersionRange(ApiKey.ALTER_CONFIGS, 0, 2),
    ApiVersionRange(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1),
    # v0 was ListClientMetricsResources; v1 (Kafka 4.1, KIP-1142) lists every resource type
    ApiVersionRange(ApiKey.LIST_CONFIG_RESOURCES, 0, 1),
)

CLIENT_METRICS = 16
BROKER_LOGGER = 8
# what ListConfigResources v1 lists when asked for no type in particular (Kafka's set)
_LISTED_TYPES = (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP)


def handle_list_config_resources(ctx: Any, header: Any, frame: memoryview) -> Response:
    """Config resources by type: topics, brokers (and their loggers) by id, groups (those
    with configs and those this node coordinates). odradek keeps no client-metrics
    subscriptions (KIP-714), so that type lists none."""
    req = decode(header, frame)
    wanted = (tuple(int(t) for t in req.resource_types) or _LISTED_TYPES
              if header.api_version >= 1 else (CLIENT_METRICS,))
    unknown = sorted(set(wanted) - set(_LISTED_TYPES))
    if unknown:
        return respond(header, {"throttle_time": 0, "error_code": ErrorCode.invalid_request,
                                "config_resources": []})
    image = ctx.image
    out: list[dict[str, Any]] = []
    for rtype in wanted:
        if rtype == TOPIC:
            names: list[str] = sorted(image.topics_by_name)
        elif rtype in (BROKER, BROKER_LOGGER):
            names = [str(b) for b in sorted(image.brokers)]
        elif rtype == GROUP:
            coordinated = ctx.group_coordinator.list_groups() if ctx.group_coordinator else []
            names = sorted({name for t, name in image.configs if t == GROUP}
                           | {row[0] for row in coordinated})
        else:
            names = []
        out += [{"resource_name": n, "resource_type": rtype} for n in names]
    return respond(header, {"throttle_time": 0, "error_code": ErrorCode.none,
                            "config_resources": out})


def handle_describe_configs(ctx: Any, header: Any, frame: memoryview) -> Response:
    req = decode(header, frame)
    synonyms = bool(getattr(req, "include_synonyms", False))
    docs = bool(getattr(req, "include_documentation", False))
    results = []
    for res in req.resources:
        try:
            denied = _config_denied(ctx, header, Op.DESCRIBE_CONFIGS, res.resource_type,
                                    res.resource_name)
            if denied is not None:
                raise KafkaError(denied)
            entries = _describe_one(ctx, res, synonyms, docs)
        except KafkaError as exc:
            results.append({"error_code": exc.code, "error_message": exc.message or None,
                            "resource_type": res.resource_type,
                            "resource_name": res.resource_name, "configs": []})
            continue
        results.append({"error_code": ErrorCode.none, "error_message": None,
                        "resource_type": res.resource_type, "resource_name": res.resource_name,
                        "configs": [_entry(e, synonyms) for e in entries]})
    return respond(header, {"throttle_time": 0, "results": results})


def _responses(results: list[Any]) -> list[dict[str, Any]]:
    return [{"error_code": r.error_code, "error_message": r.error_message,
             "resource_type": r.resource_type, "resource_name": r.resource_name}
            for r in results]


def handle_alter_configs(ctx: Any, header: Any, frame: memoryview) -> Any:
    req = decode(header, frame)
    resources = [AlterConfigsResource(int(r.resource_type), r.resource_name,
                                      [(c.name, c.value) for c in r.configs])
                 for r in req.resources]
    return _alter(ctx, header, ctx.controller.alter_configs, resources, bool(req.validate_only))


def handle_incremental_alter_configs(ctx: Any, header: Any, frame: memoryview) -> Any:
    req = decode(header, frame)
    resources = [IncrementalAlterConfigsResource(
        int(r.resource_type), r.resource_name,
        [(c.name, int(c.config_operation), c.value) for c in r.configs])
        for r in req.resources]
    return _alter(ctx, header, ctx.controller.incremental_alter_configs, resources,
                  bool(req.validate_only))


async def _alter(ctx: Any, header: Any, fn: Any, resources: list[Any],
                 validate_only: bool) -> Response:
    denied = []
    for r in resources:
        code = _config_denied(ctx, header, Op.ALTER_CONFIGS, int(r.resource_type),
                              r.resource_name)
        if code is not None:
            denied.append(AlterConfigsResult(int(r.resource_type), r.resource_name, code, None))
    if denied:
        names = {(d.resource_type, d.resource_name) for d in denied}
        resources = [r for r in resources
                     if (int(r.resource_type), r.resource_name) not in names]
    results = [*denied, *(await admin.run(
        ctx, fn, resources, validate_only,
        refused=lambda exc: [AlterConfigsResult(int(r.resource_type), r.resource_name, exc.code,
                                                exc.message) for r in resources])
        if resources else [])]
    return respond(header, {"throttle_time": 0, "responses": _responses(results)})
