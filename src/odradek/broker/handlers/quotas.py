"""AlterClientQuotas and DescribeClientQuotas (v0-1).

Kafka's checks: AlterConfigs on the cluster to alter, DescribeConfigs to describe (else
CLUSTER_AUTHORIZATION_FAILED). Changes go through the controller as ClientQuotaRecords;
descriptions read the image. Describe filters are Kafka's: each component names an entity type
and matches EXACT (a name, or null: the default), DEFAULT, or SPECIFIED (any non-default);
`strict` keeps only entities with no other component types.
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.handlers import admin
from odradek.broker.handlers.common import Response, decode, respond
from odradek.metadata.acls import AclOperation
from odradek.metadata.controller_quotas import ClientQuotaAlteration, quota_entity_error
from odradek.protocol.apis import ApiKey, ApiVersionRange
from odradek.protocol.errors import ErrorCode

VERSIONS = (
    ApiVersionRange(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, 1),
    ApiVersionRange(ApiKey.ALTER_CLIENT_QUOTAS, 0, 1),
)

EXACT, DEFAULT, SPECIFIED = 0, 1, 2


def _entity(parts: Any) -> list[dict[str, Any]]:
    return [{"entity_type": t, "entity_name": n} for t, n in parts]


def handle_alter_client_quotas(ctx: Any, header: Any, frame: memoryview) -> Any:
    req = decode(header, frame)
    entries = [ClientQuotaAlteration([(e.entity_type, e.entity_name) for e in entry.entity],
                                     [(o.key, float(o.value), bool(o.remove)) for o in entry.ops])
               for entry in req.entries]
    if not authz.cluster_allowed(ctx, header, AclOperation.ALTER_CONFIGS):
        return _altered(header, entries, [(ErrorCode.cluster_authorization_failed, None)
                                          for _ in entries])
    return _alter(ctx, header, entries, bool(req.validate_only))


async def _alter(ctx: Any, header: Any, entries: list[ClientQuotaAlteration],
                 validate_only: bool) -> Response:
    results = await admin.run(ctx, ctx.controller.alter_client_quotas, entries, validate_only,
                              refused=lambda exc: [(exc.code, exc.message) for _ in entries])
    return _altered(header, entries, results)


def _altered(header: Any, entries: list[ClientQuotaAlteration],
             results: list[tuple[ErrorCode, str | None]]) -> Response:
    return respond(header, {"throttle_time": 0, "entries": [
        {"error_code": code, "error_message": message, "entity": _entity(e.entity)}
        for e, (code, message) in zip(entries, results, strict=True)]})


def _matches(entity: tuple[tuple[str, str | None], ...], components: list[Any],
             strict: bool) -> bool:
    names = dict(entity)
    for c in components:
        if c.entity_type not in names:
            return False
        name = names[c.entity_type]
        kind = int(c.match_type)
        if kind == EXACT and name != c.match:
            return False
        if kind == DEFAULT and name is not None:
            return False
        if kind == SPECIFIED and name is None:
            return False
    return not strict or len(names) == len(components)


def handle_describe_client_quotas(ctx: Any, header: Any, frame: memoryview) -> Response:
    req = decode(header, frame)
    if not authz.cluster_allowed(ctx, header, AclOperation.DESCRIBE_CONFIGS):
        return _described(header, ErrorCode.cluster_authorization_failed, None, None)
    components = list(req.components)
    types = [c.entity_type for c in components]
    problem = quota_entity_error([(t, None) for t in types]) if types else None
    if problem is None and any(int(c.match_type) not in (EXACT, DEFAULT, SPECIFIED)
                               for c in components):
        problem = "Unknown match type"
    if problem is not None:
        return _described(header, ErrorCode.invalid_request, problem, None)
    entries = [{"entity": _entity(entity),
                "values": [{"key": k, "value": v} for k, v in sorted(values.items())]}
               for entity, values in sorted(ctx.image.client_quotas.items(), key=repr)
               if _matches(entity, components, bool(req.strict))]
    return _described(header, ErrorCode.none, None, entries)


def _described(header: Any, code: ErrorCode, message: str | None,
               entries: list[dict[str, Any]] | None) -> Response:
    return respond(header, {"throttle_time": 0, "error_code": code, "error_message": message,
                            "entries": entries})
