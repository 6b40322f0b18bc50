"""/api/schemas: the registry's subjects, their versions, a diff between two versions and the
compatibility levels, through the registry's REST API (Confluent's)."""

from __future__ import annotations

import difflib
import json
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from odradek.console.http_json import HttpFailure, call
from odradek.console.paging import BadRequest, page_params, paginate
from odradek.console.state import Console, blocking, json_body, text_field

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
          "FULL_TRANSITIVE")


def pretty(schema: dict[str, Any]) -> str:
    text = schema.get("schema", "")
    if schema.get("schemaType", "AVRO") in ("AVRO", "JSON"):
        try:
            return json.dumps(json.loads(text), indent=2)
        except ValueError:
            pass
    return str(text)


def _q(name: str) -> str:
    return quote(name, safe="")


def routes(console: Console) -> list[Route]:
    def registry() -> str:
        if not console.registry_url:
            raise HttpFailure(404, "no Schema Registry is configured (odradek console "
                                   "--registry URL)")
        return console.registry_url

    async def get(path: str) -> Any:
        return await blocking(call, registry(), "GET", path)

    async def subjects(request: Request) -> JSONResponse:
        q, page, size = page_params(request.query_params)
        names = sorted(await get("/subjects"))
        found = paginate(names, q, page, size)
        level = (await get("/config"))["compatibilityLevel"]
        return JSONResponse({"subjects": found.items, "page": found.page, "pages": found.pages,
                             "total": found.total, "global_compatibility": level})

    async def subject(request: Request) -> JSONResponse:
        name = request.path_params["subject"]
        versions = await get(f"/subjects/{_q(name)}/versions")
        latest = await get(f"/subjects/{_q(name)}/versions/latest")
        level = (await get(f"/config/{_q(name)}?defaultToGlobal=true"))["compatibilityLevel"]
        return JSONResponse({"subject": name, "versions": versions, "compatibility": level,
                             "latest": {**latest, "pretty": pretty(latest)}})

    async def version(request: Request) -> JSONResponse:
        name, v = request.path_params["subject"], request.path_params["version"]
        found = await get(f"/subjects/{_q(name)}/versions/{_q(v)}")
        return JSONResponse({**found, "pretty": pretty(found)})

    async def diff(request: Request) -> JSONResponse:
        name = request.path_params["subject"]
        a = request.query_params.get("from", "")
        b = request.query_params.get("to", "latest")
        if not a:
            raise BadRequest("from is required (a version number)")
        old = await get(f"/subjects/{_q(name)}/versions/{_q(a)}")
        new = await get(f"/subjects/{_q(name)}/versions/{_q(b)}")
        lines = difflib.unified_diff(pretty(old).splitlines(), pretty(new).splitlines(),
                                     f"version {old['version']}", f"version {new['version']}",
                                     lineterm="")
        return JSONResponse({"subject": name, "from": old["version"], "to": new["version"],
                             "diff": "\n".join(lines)})

    async def set_level(request: Request) -> JSONResponse:
        name = request.path_params["subject"]
        level = text_field(await json_body(request), "compatibility").upper()
        if level not in LEVELS:
            raise BadRequest(f"compatibility must be one of {', '.join(LEVELS)}")
        path = "/config" if name == "_global" else f"/config/{_q(name)}"
        out = await blocking(call, registry(), "PUT", path, {"compatibility": level})
        return JSONResponse({"subject": name, "compatibility": out["compatibility"]})

    return [
        Route("/api/schemas", subjects),
        Route("/api/schemas/{subject}", subject),
        Route("/api/schemas/{subject}/versions/{version}", version),
        Route("/api/schemas/{subject}/diff", diff),
        Route("/api/schemas/{subject}/config", set_level, methods=["PUT"]),
    ]
