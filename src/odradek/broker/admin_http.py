"""The admin HTTP on `admin.listeners`: /metrics, /health/live, /health/ready, /v1/cluster and
/v1/partitions, served by uvicorn on the node's own event loop.

On the loop rather than a thread: a scrape reads the node's state (partitions, groups, the
image) that only the loop changes, so it needs no locks and sees a consistent picture; it
costs the loop the scrape's time (milliseconds every scrape interval). Bad input gets a 4xx
with a JSON message: an unknown path 404, a wrong method 405, bad parameters 400, a query
string over MAX_QUERY bytes 414; uvicorn answers a request line or headers over its limit
with 400 itself. None of it reaches the Kafka side.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator
from typing import Any

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.process_collector import ProcessCollector
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from odradek.broker.admin_views import BadParameter, cluster_json, partitions_json, readiness
from odradek.broker.metrics.collector import NodeCollector
from odradek.broker.node_view import NodeView

log = logging.getLogger(__name__)

MAX_QUERY = 4096  # bytes of a query string; our endpoints take a few short parameters
# bytes of a request line plus headers uvicorn (h11) buffers before answering 400
MAX_HEAD = 16384


def make_app(view: NodeView) -> Starlette:
    registry = CollectorRegistry(auto_describe=False)
    ProcessCollector(registry=registry)  # process_cpu_seconds_total, resident memory, fds
    registry.register(NodeCollector(view))

    async def metrics(request: Request) -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    async def live(request: Request) -> Response:
        if view.stopping:
            return JSONResponse({"status": "stopping"}, status_code=503)
        return JSONResponse({"status": "live", "node_id": view.node_id})

    async def ready(request: Request) -> Response:
        problems = readiness(view)
        if problems:
            return JSONResponse({"status": "not ready", "reasons": problems}, status_code=503)
        return JSONResponse({"status": "ready", "node_id": view.node_id})

    async def cluster(request: Request) -> Response:
        return JSONResponse(cluster_json(view))

    async def partitions(request: Request) -> Response:
        return JSONResponse(partitions_json(view, dict(request.query_params)))

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        message = {404: f"no such endpoint: {request.url.path} (see /v1/cluster, "
                        "/v1/partitions, /metrics, /health/live, /health/ready)",
                   405: f"method {request.method} not allowed on {request.url.path}"
                   }.get(exc.status_code, exc.detail)
        return JSONResponse({"error": message}, status_code=exc.status_code)

    async def bad_parameter(request: Request, exc: Exception) -> Response:
        return JSONResponse({"error": str(exc)}, status_code=getattr(exc, "status", 400))

    app = Starlette(routes=[
        Route("/metrics", metrics),
        Route("/health/live", live),
        Route("/health/ready", ready),
        Route("/v1/cluster", cluster),
        Route("/v1/partitions", partitions),
    ], exception_handlers={HTTPException: http_error, BadParameter: bad_parameter})
    return _LimitQuery(app)  # type: ignore[return-value]


class _LimitQuery:
    """ASGI wrapper: a query string over MAX_QUERY bytes is answered 414 before routing."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and len(scope.get("query_string", b"")) > MAX_QUERY:
            response = JSONResponse(
                {"error": f"query string of {len(scope['query_string'])} bytes is over the "
                          f"limit of {MAX_QUERY}"}, status_code=414)
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.exit = asyncio.Event()

    # the node handles SIGTERM/SIGINT itself (a clean stop); uvicorn must not take them
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def main_loop(self) -> None:
        # uvicorn's own wakes every 0.1 s to look at should_exit and refreshes its Date header
        # every tenth time: ten wake-ups a second of the node's loop, busy or idle (issue 18:
        # the metrics' cost). Here the header is refreshed once a second and the exit is an
        # event that AdminHttp.stop sets.
        while not self.should_exit:
            await self.on_tick(0)  # tick 0: the Date header (no exit check needed here)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.exit.wait(), 1.0)


class AdminHttp:
    """uvicorn serving the admin app on the sockets startup.prepare bound."""

    def __init__(self, view: NodeView, sockets: list[socket.socket]) -> None:
        self.sockets = sockets
        if logging.getLogger("uvicorn.error").level == logging.NOTSET:
            # uvicorn's start and stop lines: the node logs its own
            logging.getLogger("uvicorn.error").setLevel(logging.WARNING)
        config = uvicorn.Config(make_app(view), log_config=None, access_log=False,
                                lifespan="off", http="h11", limit_concurrency=64,
                                h11_max_incomplete_event_size=MAX_HEAD, timeout_keep_alive=5)
        self.server = _Server(config)
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.task = asyncio.ensure_future(self.server.serve(sockets=self.sockets))
        while not self.server.started and not self.task.done():
            await asyncio.sleep(0.01)
        if self.task.done():
            self.task.result()  # raises what stopped it
        for sock in self.sockets:
            host, port = sock.getsockname()[:2]
            log.info("admin HTTP on http://%s:%d (/metrics, /health/ready)", host, port)

    async def stop(self) -> None:
        if self.task is None:
            return
        self.server.should_exit = True
        self.server.exit.set()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await asyncio.wait_for(self.task, 5.0)
        self.task = None
