"""The console's starlette app: the page shell and its scripts (static/), the charting library
(plotly.js, shipped inside the plotly package from PyPI: no CDN, works offline) and the JSON
API. Every failure is a JSON {"error": message} with a 4xx/5xx status the page shows."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from odradek.console import api_cluster, api_groups, api_messages, api_schemas, api_security
from odradek.console.cluster import KafkaFailure
from odradek.console.http_json import HttpFailure
from odradek.console.paging import BadRequest
from odradek.console.state import Console

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
MAX_QUERY = 4096  # bytes of a query string; the API's parameters are short


def plotly_js() -> Path:
    import plotly

    return Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


class _QueryLimit:
    """A query string over MAX_QUERY bytes is answered 414 before any route sees it."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and len(scope.get("query_string", b"")) > MAX_QUERY:
            resp = JSONResponse({"error": f"the query string is over {MAX_QUERY} bytes"}, 414)
            await resp(scope, receive, send)
            return
        await self.app(scope, receive, send)


def build_app(console: Console) -> Any:
    async def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})

    async def plotly(request: Request) -> Response:
        return FileResponse(plotly_js(), media_type="text/javascript",
                            headers={"Cache-Control": "max-age=86400"})

    async def bad_request(request: Request, exc: Exception) -> Response:
        return JSONResponse({"error": str(exc)}, 400)

    async def kafka_failure(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, KafkaFailure)
        return JSONResponse({"error": exc.message}, exc.status)

    async def http_failure(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HttpFailure)
        status = exc.status if 400 <= exc.status < 600 else 502
        return JSONResponse({"error": exc.message}, status)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        text = {404: f"no such page or API: {request.url.path[:200]}",
                405: f"{request.method} is not allowed on {request.url.path[:200]}"}
        return JSONResponse({"error": text.get(exc.status_code, exc.detail)}, exc.status_code)

    async def unexpected(request: Request, exc: Exception) -> Response:
        log.exception("console request %s failed", request.url.path)
        return JSONResponse({"error": f"internal error: {type(exc).__name__}: {exc}"}, 500)

    routes = [
        Route("/", index),
        # the pages are one shell; the script shows the page the path names
        *(Route(f"/{page}", index) for page in ("topics", "messages", "groups", "schemas",
                                                          "security")),
        Route("/topics/{name:path}", index),
        Route("/groups/{name:path}", index),
        Route("/schemas/{name:path}", index),
        Route("/vendor/plotly.min.js", plotly),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
        *api_cluster.routes(console),
        *api_messages.routes(console),
        *api_groups.routes(console),
        *api_schemas.routes(console),
        *api_security.routes(console),
    ]
    app = Starlette(routes=routes, exception_handlers={
        BadRequest: bad_request, KafkaFailure: kafka_failure, HttpFailure: http_failure,
        HTTPException: http_error, Exception: unexpected})
    return _QueryLimit(app)
