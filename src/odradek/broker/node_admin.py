"""The node's side of the admin HTTP and the metrics: what `Node` calls, in one place.

`NodeAdmin` owns the node's NodeView, the request stats (when requests are measured) and
the uvicorn server. Requests are measured when there is an admin listener to read them or
a slow-request log to write (`request.slow.log.ms` >= 0 with admin.listeners empty still
times them); both off, the servers' `stats` is None and nothing is timed (the A/B of
bench/RESULTS.md, issue 18). The timing itself is the server's (Connection._dispatch).
"""

from __future__ import annotations

import logging
import socket
from typing import Any

from odradek.broker.admin_http import AdminHttp
from odradek.broker.metrics.requests import RequestStats, bound_call
from odradek.broker.node_view import NodeView
from odradek.broker.startup import StartRefused

log = logging.getLogger("odradek.node")


class NodeAdmin:
    def __init__(self, config: Any, roles: tuple[str, ...]) -> None:
        self.view = NodeView(config.node_id, roles)
        slow_ms = config.get_int("request.slow.log.ms")
        self.serving = bool((config.get_str("admin.listeners") or "").strip())
        if self.serving or slow_ms >= 0:
            self.view.requests = RequestStats(slow_ms)
        self.http: AdminHttp | None = None

    async def start(self, sockets: list[socket.socket]) -> None:
        if not sockets:
            return
        self.http = AdminHttp(self.view, sockets)
        try:
            await self.http.start()
        except (OSError, SystemExit) as exc:
            self.http = None
            raise StartRefused(f"cannot serve the admin HTTP (admin.listeners): {exc}") from None

    async def stop(self) -> None:
        self.view.stopping = True
        if self.http is not None:
            await self.http.stop()
            self.http = None

    @property
    def stats(self) -> RequestStats | None:
        """What the Servers time requests into (None: requests are not measured)."""
        return self.view.requests  # type: ignore[no-any-return]

    @staticmethod
    def dispatch(dispatcher: Any) -> Any:
        """The Dispatcher as the Server should call it: its bound __call__, cheaper to call
        than the object."""
        return bound_call(dispatcher)

    def serving_with(self, server: Any, listener: str) -> Any:
        """A Server that now serves `listener`: counted in the connection metrics."""
        server.listener_name = listener
        if server not in self.view.servers:
            self.view.servers.append(server)
        return server
