"""Connect's REST API (as Kafka documents it) over a `Herder`, on starlette.

Every error answers `{"error_code": <status>, "message": ...}`. The handlers are plain
functions: starlette runs them on its thread pool, so a write waiting for Kafka's
acknowledgement does not hold the event loop.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from odradek.connect.errors import ConnectError, bad_request
from odradek.connect.herder import Herder

log = logging.getLogger(__name__)

Handler = Callable[[Request], Response]


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse(body, status_code=status, headers=headers)


def _flag(request: Request, name: str) -> bool:
    raw = request.query_params.get(name, "false").strip().lower()
    if raw not in ("true", "false"):
        raise bad_request(f"Query parameter {name} must be true or false, got {raw!r}")
    return raw == "true"


def build_app(herder: Herder) -> Starlette:
    def body(request: Request) -> Any:
        import anyio.from_thread

        raw = anyio.from_thread.run(request.body)
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise bad_request(f"Request body is not valid JSON: {exc}") from None

    def name_of(request: Request) -> str:
        return str(request.path_params["name"])

    def task_of(request: Request) -> int:
        raw = str(request.path_params["task"])
        if not raw.isdigit():
            raise ConnectError(404, f"Task {raw} not found")
        return int(raw)

    def root(request: Request) -> Response:
        return _json(200, herder.server_info())

    def connectors(request: Request) -> Response:
        if request.method == "POST":
            info = herder.create(body(request))
            return _json(201, info, {"Location": f"/connectors/{quote(info['name'], safe='')}"})
        expand = request.query_params.getlist("expand")
        unknown = [e for e in expand if e not in ("status", "info")]
        names = herder.names()
        if not expand or unknown == expand:
            return _json(200, names)
        out: dict[str, dict[str, Any]] = {}
        for name in names:
            entry: dict[str, Any] = {}
            try:
                if "status" in expand:
                    entry["status"] = herder.status(name)
                if "info" in expand:
                    entry["info"] = herder.info(name)
            except ConnectError:
                continue  # deleted, or no status yet, while we listed
            out[name] = entry
        return _json(200, out)

    def connector(request: Request) -> Response:
        name = name_of(request)
        if request.method == "DELETE":
            herder.delete(name)
            return Response(status_code=204)
        return _json(200, herder.info(name))

    def config(request: Request) -> Response:
        name = name_of(request)
        if request.method == "PUT":
            created, info = herder.put_config(name, body(request))
            if created:
                return _json(201, info, {"Location": f"/connectors/{quote(name, safe='')}"})
            return _json(200, info)
        return _json(200, herder.config(name))

    def status(request: Request) -> Response:
        return _json(200, herder.status(name_of(request)))

    def restart(request: Request) -> Response:
        include, failed = _flag(request, "includeTasks"), _flag(request, "onlyFailed")
        result = herder.restart(name_of(request), include, failed)
        if not include and not failed:
            return Response(status_code=204)
        return _json(202, result)

    def pause(request: Request) -> Response:
        herder.set_target(name_of(request), "PAUSED")
        return Response(status_code=202)

    def resume(request: Request) -> Response:
        herder.set_target(name_of(request), "STARTED")
        return Response(status_code=202)

    def stop(request: Request) -> Response:
        herder.set_target(name_of(request), "STOPPED")
        return Response(status_code=204)

    def offsets(request: Request) -> Response:
        name = name_of(request)
        if request.method == "PATCH":
            return _json(200, herder.alter_offsets(name, body(request)))
        if request.method == "DELETE":
            return _json(200, herder.reset_offsets(name))
        return _json(200, herder.offsets(name))

    def tasks(request: Request) -> Response:
        return _json(200, herder.tasks(name_of(request)))

    def task_status(request: Request) -> Response:
        return _json(200, herder.task_status(name_of(request), task_of(request)))

    def task_restart(request: Request) -> Response:
        herder.restart_task(name_of(request), task_of(request))
        return Response(status_code=204)

    def plugin_list(request: Request) -> Response:
        return _json(200, herder.plugin_list())

    def plugin_config(request: Request) -> Response:
        return _json(200, herder.plugin_config(str(request.path_params["plugin"])))

    def validate(request: Request) -> Response:
        return _json(200, herder.validate(str(request.path_params["plugin"]), body(request)))

    def connect_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ConnectError)
        return _json(exc.status, exc.body())

    def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return _json(exc.status_code, {"error_code": exc.status_code,
                                       "message": f"HTTP {exc.status_code} {exc.detail}"})

    def internal(request: Request, exc: Exception) -> Response:
        log.exception("%s %s", request.method, request.url.path)
        return _json(500, {"error_code": 500, "message": str(exc) or type(exc).__name__})

    prefix = "/connectors/{name}"
    routes = [
        Route("/", root, methods=["GET"]),
        Route("/connectors", connectors, methods=["GET", "POST"]),
        Route(prefix, connector, methods=["GET", "DELETE"]),
        Route(prefix + "/config", config, methods=["GET", "PUT"]),
        Route(prefix + "/status", status, methods=["GET"]),
        Route(prefix + "/restart", restart, methods=["POST"]),
        Route(prefix + "/pause", pause, methods=["PUT"]),
        Route(prefix + "/resume", resume, methods=["PUT"]),
        Route(prefix + "/stop", stop, methods=["PUT"]),
        Route(prefix + "/offsets", offsets, methods=["GET", "PATCH", "DELETE"]),
        Route(prefix + "/tasks", tasks, methods=["GET"]),
        Route(prefix + "/tasks/{task}/status", task_status, methods=["GET"]),
        Route(prefix + "/tasks/{task}/restart", task_restart, methods=["POST"]),
        Route("/connector-plugins", plugin_list, methods=["GET"]),
        Route("/connector-plugins/{plugin}/config", plugin_config, methods=["GET"]),
        Route("/connector-plugins/{plugin}/config/validate", validate, methods=["PUT"]),
    ]
    return Starlette(routes=routes, exception_handlers={
        ConnectError: connect_error, HTTPException: http_error, Exception: internal})
