"""Run the console: uvicorn on each listener, the lag sampler beside it, until SIGTERM."""

from __future__ import annotations

import contextlib
import logging
import signal
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

log = logging.getLogger(__name__)


def parse_listener(listener: str) -> tuple[str, int]:
    """`http://host:port` -> (host, port); ValueError with a message otherwise."""
    parts = urlsplit(listener.strip())
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "http" or not parts.hostname or port is None:
        raise ValueError(f"a console listener is http://host:port, got {listener!r}")
    return parts.hostname, port


def run(bootstrap: str, listeners: str, history: Path, registry: str | None = None,
        admin: str | None = None, fds: list[int] | None = None,
        sample_interval_s: float = 5.0, overrides: dict[str, object] | None = None) -> int:
    import asyncio
    import socket

    import uvicorn

    from odradek.console.app import build_app
    from odradek.console.cluster import Cluster
    from odradek.console.decode import Decoder
    from odradek.console.groups import LagSampler
    from odradek.console.lag_history import LagHistory
    from odradek.console.messages import Reader
    from odradek.console.state import Console

    endpoints = [parse_listener(item) for item in listeners.split(",") if item.strip()]
    if not endpoints:
        raise ValueError("no console listener given")
    cluster = Cluster(bootstrap, overrides)
    decoder = Decoder(registry)
    lag_history = LagHistory(history)
    console = Console(cluster, decoder, Reader(cluster, decoder), lag_history,
                      registry_url=registry, admin_url=admin)
    sampler = LagSampler(cluster, lag_history, sample_interval_s)
    app = build_app(console)

    class _Server(uvicorn.Server):
        # we stop every server on SIGTERM ourselves (uvicorn's own handling holds for one)
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    servers = [_Server(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                      access_log=False, lifespan="off"))
               for host, port in endpoints]

    def stop(signum: int, frame: object) -> None:
        for server in servers:
            server.should_exit = True

    inherited = [socket.socket(fileno=fd) for fd in fds or []]
    if inherited and len(inherited) != len(servers):
        raise ValueError(f"{len(inherited)} inherited sockets for {len(servers)} listeners")

    async def serve_all() -> None:
        if inherited:
            await asyncio.gather(*(server.serve(sockets=[sock])
                                   for server, sock in zip(servers, inherited, strict=True)))
        else:
            await asyncio.gather(*(server.serve() for server in servers))

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    sampler.start()
    try:
        print(f"console serving on {listeners} over {bootstrap}"
              f"{f', registry {registry}' if registry else ''}"
              f"{f', admin {admin}' if admin else ''}; lag history in {history}", flush=True)
        asyncio.run(serve_all())
    finally:
        sampler.stop()
        lag_history.close()
    return 0
