"""CreateAcls, DescribeAcls, DeleteAcls (v1-3; v0 is gone in Kafka 4).

Kafka's answers: SECURITY_DISABLED when no authorizer is configured, CLUSTER_AUTHORIZATION_
FAILED without Alter (create, delete) or Describe (describe) on the cluster, INVALID_REQUEST
for a binding or filter with unknown or ANY values where a concrete one is needed. The changes
go through the controller as AccessControlEntryRecord / RemoveAccessControlEntryRecord.
"""

from __future__ import annotations

import enum
from typing import Any, TypeVar

from odradek.broker import authz
from odradek.broker.handlers import admin
from odradek.broker.handlers.common import Response, decode, respond
from odradek.metadata.acls import (
    AclEntry,
    AclFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)
from odradek.metadata.controller_acls import AclResult, DeleteAclsResult
from odradek.protocol.apis import ApiKey, ApiVersionRange
from odradek.protocol.errors import ErrorCode

VERSIONS = (
    ApiVersionRange(ApiKey.DESCRIBE_ACLS, 1, 3),
    ApiVersionRange(ApiKey.CREATE_ACLS, 1, 3),
    ApiVersionRange(ApiKey.DELETE_ACLS, 1, 3),
)

NO_AUTHORIZER = "No Authorizer is configured."
DENIED = "Cluster authorization failed."
E = TypeVar("E", bound=enum.IntEnum)


def _enum(cls: type[E], value: int) -> E:
    """Kafka's fromCode: a number it does not know is UNKNOWN (then refused), not an error."""
    try:
        return cls(int(value))
    except ValueError:
        return cls(0)


def _filter(f: Any) -> AclFilter:
    return AclFilter(_enum(ResourceType, f.resource_type_filter), f.resource_name_filter,
                     _enum(PatternType, getattr(f, "pattern_type_filter", 3)),
                     f.principal_filter, f.host_filter, _enum(AclOperation, f.operation),
                     _enum(PermissionType, f.permission_type))


def handle_create_acls(ctx: Any, header: Any, frame: memoryview) -> Any:
    req = decode(header, frame)
    refusal = None
    if ctx.authorizer is None:
        refusal = (ErrorCode.security_disabled, NO_AUTHORIZER)
    elif not authz.cluster_allowed(ctx, header, AclOperation.ALTER):
        refusal = (ErrorCode.cluster_authorization_failed, DENIED)
    if refusal is not None:
        return _created(header, [AclResult(*refusal) for _ in req.creations])
    acls = [AclEntry(_enum(ResourceType, c.resource_type), c.resource_name,
                     _enum(PatternType, getattr(c, "resource_pattern_type", 3)), c.principal,
                     c.host, _enum(AclOperation, c.operation),
                     _enum(PermissionType, c.permission_type)) for c in req.creations]
    return _create(ctx, header, acls)


async def _create(ctx: Any, header: Any, acls: list[AclEntry]) -> Response:
    results = await admin.run(ctx, ctx.controller.create_acls, acls,
                              refused=lambda exc: [AclResult(exc.code, exc.message)
                                                   for _ in acls])
    return _created(header, results)


def _created(header: Any, results: list[AclResult]) -> Response:
    return respond(header, {"throttle_time": 0, "results": [
        {"error_code": r.error_code, "error_message": r.error_message} for r in results]})


def handle_describe_acls(ctx: Any, header: Any, frame: memoryview) -> Response:
    req = decode(header, frame)
    if ctx.authorizer is None:
        return _described(header, ErrorCode.security_disabled, NO_AUTHORIZER, [])
    if not authz.cluster_allowed(ctx, header, AclOperation.DESCRIBE):
        return _described(header, ErrorCode.cluster_authorization_failed, DENIED, [])
    flt = _filter(req)
    problem = flt.error()
    if problem is not None:
        return _described(header, ErrorCode.invalid_request, problem, [])
    by_pattern: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for acl in sorted(ctx.image.acls.values(), key=str):
        if flt.matches(acl):
            key = (int(acl.resource_type), acl.resource_name, int(acl.pattern_type))
            by_pattern.setdefault(key, []).append({
                "principal": acl.principal, "host": acl.host, "operation": int(acl.operation),
                "permission_type": int(acl.permission)})
    resources = [{"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
                 for (t, n, p), acls in sorted(by_pattern.items())]
    return _described(header, ErrorCode.none, None, resources)


def _described(header: Any, code: ErrorCode, message: str | None,
               resources: list[dict[str, Any]]) -> Response:
    return respond(header, {"throttle_time": 0, "error_code": code, "error_message": message,
                            "resources": resources})


def handle_delete_acls(ctx: Any, header: Any, frame: memoryview) -> Any:
    req = decode(header, frame)
    refusal = None
    if ctx.authorizer is None:
        refusal = (ErrorCode.security_disabled, NO_AUTHORIZER)
    elif not authz.cluster_allowed(ctx, header, AclOperation.ALTER):
        refusal = (ErrorCode.cluster_authorization_failed, DENIED)
    if refusal is not None:
        return _deleted(header, [DeleteAclsResult(*refusal) for _ in req.filters])
    return _delete(ctx, header, [_filter(f) for f in req.filters])


async def _delete(ctx: Any, header: Any, filters: list[AclFilter]) -> Response:
    results = await admin.run(ctx, ctx.controller.delete_acls, filters,
                              refused=lambda exc: [DeleteAclsResult(exc.code, exc.message)
                                                   for _ in filters])
    return _deleted(header, results)


def _deleted(header: Any, results: list[DeleteAclsResult]) -> Response:
    return respond(header, {"throttle_time": 0, "filter_results": [
        {"error_code": r.error_code, "error_message": r.error_message, "matching_acls": [
            {"error_code": ErrorCode.none, "error_message": None,
             "resource_type": int(a.resource_type), "resource_name": a.resource_name,
             "pattern_type": int(a.pattern_type), "principal": a.principal, "host": a.host,
             "operation": int(a.operation), "permission_type": int(a.permission)}
            for a in r.deleted]} for r in results]})
