"""Serve one ASGI app on several `http://host:port` listeners until SIGTERM or Ctrl-C.

Each service runs its own cleanup after the servers stop (leaving a group, writing last
offsets), so uvicorn's own signal handling is replaced: it re-raises SIGTERM after its
shutdown, before that cleanup could run, and holds for one server only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

__all__ = ["parse_http_listener", "serve_http"]


def parse_http_listener(listener: str, what: str = "a listener") -> tuple[str, int]:
    """`http://host:port` -> (host, port); ValueError naming `what` otherwise. Plain HTTP
    only: a TLS listener is refused rather than served in the clear."""
    parts = urlsplit(listener.strip())
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "http" or not parts.hostname or port is None:
        raise ValueError(f"{what} is http://host:port, got {listener!r}")
    return parts.hostname, port


def serve_http(app: Any, endpoints: list[tuple[str, int]],
               fds: list[int] | None = None) -> None:
    """Serve `app` on every endpoint (or on `fds`, sockets already bound for them in order)
    until SIGTERM/SIGINT stops them all; then return."""
    import asyncio
    import signal
    import socket

    import uvicorn

    class _Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    servers = [_Server(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                      access_log=False, lifespan="off"))
               for host, port in endpoints]
    inherited = [socket.socket(fileno=fd) for fd in fds or []]
    if inherited and len(inherited) != len(servers):
        raise ValueError(f"{len(inherited)} inherited sockets for {len(servers)} listeners")

    def stop(signum: int, frame: object) -> None:
        for server in servers:
            server.should_exit = True

    async def serve_all() -> None:
        if inherited:
            await asyncio.gather(*(server.serve(sockets=[sock])
                                   for server, sock in zip(servers, inherited, strict=True)))
        else:
            await asyncio.gather(*(server.serve() for server in servers))

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    asyncio.run(serve_all())
