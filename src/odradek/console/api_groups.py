"""/api/groups: consumer groups (paged, searched), one group's lag with its history, offset
resets with a dry-run preview, deletion."""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from odradek.console import groups
from odradek.console.paging import int_param, page_params, paginate
from odradek.console.state import Console, blocking, json_body, text_field


def routes(console: Console) -> list[Route]:
    cluster = console.cluster

    async def listing(request: Request) -> JSONResponse:
        q, page, size = page_params(request.query_params)
        rows = await blocking(groups.list_groups, cluster)
        by_id = {r["id"]: r for r in rows}
        found = paginate([r["id"] for r in rows], q, page, size)
        return JSONResponse({"groups": [by_id[g] for g in found.items], "page": found.page,
                             "pages": found.pages, "total": found.total, "size": found.size})

    async def detail(request: Request) -> JSONResponse:
        return JSONResponse(await blocking(groups.describe, cluster, request.path_params["id"]))

    async def history(request: Request) -> JSONResponse:
        minutes = int_param(request.query_params, "minutes", 60, 1, 24 * 60)
        since = int(time.time() * 1000) - minutes * 60_000
        samples = await blocking(console.history.series, request.path_params["id"], since)
        return JSONResponse({"group": request.path_params["id"],
                             "samples": [{"ts": s.ts_ms, "total": s.total,
                                          "partitions": s.partitions} for s in samples]})

    async def reset(request: Request) -> JSONResponse:
        group = request.path_params["id"]
        body = await json_body(request)
        mode = text_field(body, "mode")
        value = text_field(body, "value", required=mode in ("offset", "timestamp"))
        topic = text_field(body, "topic", required=False).strip() or None
        dry_run = body.get("dry_run", True) is not False
        plan = await blocking(groups.reset_plan, cluster, group, mode, value, topic)
        if not dry_run:
            await blocking(groups.apply_plan, cluster, group, plan)
        return JSONResponse({"group": group, "dry_run": dry_run, "plan": plan})

    async def delete(request: Request) -> JSONResponse:
        group = request.path_params["id"]
        await blocking(groups.delete_group, cluster, group)
        await blocking(console.history.forget, group)
        return JSONResponse({"deleted": group})

    return [
        Route("/api/groups", listing),
        Route("/api/groups/{id}", detail),
        Route("/api/groups/{id}", delete, methods=["DELETE"]),
        Route("/api/groups/{id}/history", history),
        Route("/api/groups/{id}/reset", reset, methods=["POST"]),
    ]
