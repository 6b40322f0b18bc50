"""/api/acls, /api/users and /api/quotas: ACLs (list, create, delete), SCRAM users (list,
create or change a password, delete) and client quotas (list, set, remove), acting as the
principal the console logs in as."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from odradek.console import quotas, security
from odradek.console.state import Console, blocking, int_field, json_body, text_field


def routes(console: Console) -> list[Route]:
    cluster = console.cluster

    async def acls(request: Request) -> JSONResponse:
        return JSONResponse({"acls": await blocking(security.list_acls, cluster)})

    async def create_acl(request: Request) -> JSONResponse:
        b = security.binding(await json_body(request))
        await blocking(security.create_acl, cluster, b)
        return JSONResponse({"created": f"{b.permission_type.name} {b.principal} "
                                        f"{b.operation.name} on {b.restype.name} {b.name}"},
                            status_code=201)

    async def delete_acl(request: Request) -> JSONResponse:
        b = security.binding(await json_body(request))
        return JSONResponse({"deleted": await blocking(security.delete_acl, cluster, b)})

    async def users(request: Request) -> JSONResponse:
        return JSONResponse({"users": await blocking(security.list_users, cluster)})

    async def upsert_user(request: Request) -> JSONResponse:
        body = await json_body(request)
        user = text_field(body, "user").strip()
        await blocking(security.upsert_user, cluster, user, text_field(body, "password"),
                       text_field(body, "mechanism", required=False) or "SCRAM-SHA-256",
                       int_field(body, "iterations", 4096, 4096, 16384))
        return JSONResponse({"user": user}, status_code=201)

    async def delete_user(request: Request) -> JSONResponse:
        user = request.path_params["user"]
        mech = request.query_params.get("mechanism", "SCRAM-SHA-256")
        await blocking(security.delete_user, cluster, user, mech)
        return JSONResponse({"deleted": user, "mechanism": mech})

    async def list_quotas(request: Request) -> JSONResponse:
        return JSONResponse({"quotas": await blocking(quotas.list_quotas, cluster)})

    async def set_quota(request: Request) -> JSONResponse:
        body = await json_body(request)
        entity, key = quotas.entity_of(body.get("entity")), quotas.key_of(body.get("key"))
        value = quotas.value_of(key, body.get("value"))
        await blocking(quotas.alter_quota, cluster, entity, key, value)
        return JSONResponse({"entity": quotas.label(entity), "key": key,
                             "value": int(value) if value == int(value) else value})

    async def remove_quota(request: Request) -> JSONResponse:
        body = await json_body(request)
        entity, key = quotas.entity_of(body.get("entity")), quotas.key_of(body.get("key"))
        await blocking(quotas.alter_quota, cluster, entity, key, None)
        return JSONResponse({"entity": quotas.label(entity), "removed": key})

    return [
        Route("/api/acls", acls),
        Route("/api/acls", create_acl, methods=["POST"]),
        Route("/api/acls/delete", delete_acl, methods=["POST"]),
        Route("/api/users", users),
        Route("/api/users", upsert_user, methods=["POST"]),
        Route("/api/users/{user}", delete_user, methods=["DELETE"]),
        Route("/api/quotas", list_quotas),
        Route("/api/quotas", set_quota, methods=["POST"]),
        Route("/api/quotas/remove", remove_quota, methods=["POST"]),
    ]
