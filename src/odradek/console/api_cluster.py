"""/api/overview and /api/topics: the cluster at a glance, the topic list (paged, searched on
the server) and one topic's partitions and configs, with create, delete and alter."""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from odradek.console.http_json import HttpFailure, call
from odradek.console.paging import BadRequest, page_params
from odradek.console.state import Console, blocking, int_field, json_body, text_field

ADMIN_PAGE = 10_000
SIZES_TTL_S = 5.0
_sizes_cache: dict[str, tuple[float, dict[str, int]]] = {}


def _local_sizes(admin_url: str) -> dict[str, int]:
    """Bytes on disk per topic of the partitions the asked node hosts, from its admin HTTP's
    paged /v1/partitions (one pass for all topics, kept SIZES_TTL_S)."""
    seen = _sizes_cache.get(admin_url)
    if seen is not None and time.monotonic() - seen[0] < SIZES_TTL_S:
        return seen[1]
    sizes: dict[str, int] = {}
    offset = 0
    while True:
        got = call(admin_url, "GET", f"/v1/partitions?offset={offset}&limit={ADMIN_PAGE}",
                   timeout=5)
        rows = got.get("partitions", [])
        for p in rows:
            if "local" in p:
                sizes[p["topic"]] = sizes.get(p["topic"], 0) + p["local"].get("size_bytes", 0)
        offset += len(rows)
        if not rows or offset >= got.get("total", 0):
            break
    _sizes_cache[admin_url] = (time.monotonic(), sizes)
    return sizes


def _admin_view(console: Console) -> dict[str, Any]:
    """What only the node's admin HTTP tells: fenced brokers, the quorum, disk use."""
    if not console.admin_url:
        return {}
    try:
        cluster = call(console.admin_url, "GET", "/v1/cluster", timeout=5)
        disk = sum(_local_sizes(console.admin_url).values())
    except HttpFailure as exc:
        return {"admin_error": exc.message}
    return {"quorum": cluster.get("quorum"), "node_id": cluster.get("node_id"),
            "fenced": [b["id"] for b in cluster.get("brokers", []) if b.get("fenced")],
            "racks": {b["id"]: b.get("rack") for b in cluster.get("brokers", [])},
            "disk_bytes": {cluster.get("node_id"): disk}, "ready": cluster.get("ready")}


def _topics_page(console: Console, q: str, page: int, size: int,
                 internal: bool) -> dict[str, Any]:
    out = console.cluster.topics_page(q, page, size, internal)
    sizes: dict[str, int] = {}
    if console.admin_url:
        try:
            sizes = _local_sizes(console.admin_url)
        except HttpFailure as exc:
            out["size_error"] = exc.message
    for row in out["topics"]:
        row["size_bytes"] = sizes.get(row["name"]) if console.admin_url else None
    return out


def routes(console: Console) -> list[Route]:
    cluster = console.cluster

    async def info(request: Request) -> JSONResponse:
        return JSONResponse({"bootstrap": cluster.bootstrap,
                             "registry": console.registry_url, "admin": console.admin_url})

    async def overview(request: Request) -> JSONResponse:
        out = await blocking(cluster.overview)
        extra = await blocking(_admin_view, console)
        fenced = set(extra.get("fenced", []))
        for b in out["brokers"]:
            b["fenced"] = b["id"] in fenced
            b["disk_bytes"] = extra.get("disk_bytes", {}).get(b["id"])
        out.update(quorum=extra.get("quorum"), admin_error=extra.get("admin_error"),
                   admin=bool(console.admin_url))
        return JSONResponse(out)

    async def topics(request: Request) -> JSONResponse:
        q, page, size = page_params(request.query_params)
        internal = request.query_params.get("internal", "") in ("1", "true", "yes")
        return JSONResponse(await blocking(_topics_page, console, q, page, size, internal))

    async def create(request: Request) -> JSONResponse:
        body = await json_body(request)
        name = text_field(body, "name").strip()
        partitions = int_field(body, "partitions", 1, 1, 100_000)
        replication = int_field(body, "replication", -1, -1, 100)
        configs = body.get("configs") or {}
        if not isinstance(configs, dict) or not all(isinstance(v, str | int)
                                                    for v in configs.values()):
            raise BadRequest("configs must be an object of name: value")
        await blocking(cluster.create_topic, name, partitions, replication,
                       {str(k): str(v) for k, v in configs.items()})
        return JSONResponse({"created": name, "partitions": partitions}, status_code=201)

    async def detail(request: Request) -> JSONResponse:
        return JSONResponse(await blocking(cluster.topic_detail, request.path_params["name"]))

    async def delete(request: Request) -> JSONResponse:
        name = request.path_params["name"]
        await blocking(cluster.delete_topic, name)
        return JSONResponse({"deleted": name})

    async def configs(request: Request) -> JSONResponse:
        name = request.path_params["name"]
        body = await json_body(request)
        set_ = body.get("set") or {}
        remove = body.get("delete") or []
        if not isinstance(set_, dict) or not isinstance(remove, list):
            raise BadRequest("give set: {name: value} and/or delete: [name]")
        if not set_ and not remove:
            raise BadRequest("nothing to change: give set or delete")
        await blocking(cluster.alter_topic_configs, name,
                       {str(k): str(v) for k, v in set_.items()}, [str(k) for k in remove])
        return JSONResponse({"altered": name, "set": set_, "deleted": remove})

    async def partitions(request: Request) -> JSONResponse:
        name = request.path_params["name"]
        total = int_field(await json_body(request), "total", None, 1, 100_000)
        await blocking(cluster.add_partitions, name, total)
        return JSONResponse({"topic": name, "partitions": total})

    return [
        Route("/api/info", info),
        Route("/api/overview", overview),
        Route("/api/topics", topics),
        Route("/api/topics", create, methods=["POST"]),
        Route("/api/topics/{name}", detail),
        Route("/api/topics/{name}", delete, methods=["DELETE"]),
        Route("/api/topics/{name}/configs", configs, methods=["POST"]),
        Route("/api/topics/{name}/partitions", partitions, methods=["POST"]),
    ]
