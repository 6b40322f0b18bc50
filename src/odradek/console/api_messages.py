"""/api/topics/{name}/messages and /search: browse records, search them with a streamed
progress count (NDJSON), produce one from the form."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from odradek.console.messages import MAX_BROWSE, Filters, produce
from odradek.console.paging import BadRequest, int_param
from odradek.console.state import Console, blocking, int_field, json_body

MAX_SCAN = 10_000_000
MAX_MATCHES = 1000


def _partition(params: Any) -> int | None:
    raw = params.get("partition", "")
    if raw in ("", "all"):
        return None
    return int_param(params, "partition", None, 0, 1 << 31)


def routes(console: Console) -> list[Route]:
    reader = console.reader

    async def browse(request: Request) -> JSONResponse:
        qp = request.query_params
        out = await blocking(reader.browse, request.path_params["name"], _partition(qp),
                             qp.get("start", "newest"), qp.get("at", ""),
                             int_param(qp, "limit", 50, 1, MAX_BROWSE),
                             qp.get("order", "newest") != "oldest")
        return JSONResponse(out)

    async def search(request: Request) -> StreamingResponse:
        qp = request.query_params
        f = Filters(key=qp.get("key", ""), value=qp.get("value", ""),
                    header=qp.get("header", ""), json_path=qp.get("json_path", ""))
        events = reader.search(request.path_params["name"], _partition(qp),
                               qp.get("start", "oldest"), qp.get("at", ""), f,
                               int_param(qp, "max_scan", 1_000_000, 1, MAX_SCAN),
                               int_param(qp, "max_matches", 200, 1, MAX_MATCHES))
        # the first event is made here: a bad parameter or unknown topic is a 4xx, not a
        # stream that breaks
        first = await blocking(next, events)

        def lines() -> Iterator[bytes]:
            yield (json.dumps(first) + "\n").encode()
            for event in events:
                yield (json.dumps(event) + "\n").encode()

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    async def send(request: Request) -> JSONResponse:
        body = await json_body(request)
        raw_part = body.get("partition")
        partition = None if raw_part in (None, "", "any") else \
            int_field(body, "partition", None, 0, 1 << 31)
        headers = []
        for h in body.get("headers") or []:
            if not isinstance(h, dict) or not str(h.get("name") or "").strip():
                raise BadRequest("each header needs a name")
            headers.append((str(h["name"]).strip(), str(h.get("value") or "")))
        key = body.get("key")
        value = body.get("value")
        out = await blocking(produce, console.cluster, request.path_params["name"], partition,
                             None if key in (None, "") else str(key),
                             None if value is None else str(value), headers)
        return JSONResponse(out, status_code=201)

    return [
        Route("/api/topics/{name}/messages", browse),
        Route("/api/topics/{name}/messages", send, methods=["POST"]),
        Route("/api/topics/{name}/search", search),
    ]
