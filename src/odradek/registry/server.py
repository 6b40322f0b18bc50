"""Run the registry: read `_schemas`, then serve HTTP on the listeners until SIGTERM/Ctrl-C."""

from __future__ import annotations

import contextlib
import logging
import signal
from collections.abc import Iterator
from urllib.parse import urlsplit

from odradek.registry.records import TOPIC

log = logging.getLogger(__name__)


def parse_listener(listener: str) -> tuple[str, int]:
    """`http://host:port` -> (host, port). Only plain HTTP for now."""
    parts = urlsplit(listener.strip())
    if parts.scheme != "http" or not parts.hostname or parts.port is None:
        raise ValueError(f"a listener is http://host:port, got {listener!r}")
    return parts.hostname, parts.port


def run(bootstrap: str, listeners: str = "http://127.0.0.1:8081", topic: str = TOPIC,
        leader_eligibility: bool = True, fds: list[int] | None = None) -> int:
    """`fds`: listening sockets already bound for the listeners, in order (from `odradek
    serve`, which binds them before its node starts so a port in use refuses that start)."""
    import asyncio
    import socket

    import uvicorn

    from odradek.registry.app import build_app
    from odradek.registry.election import Election
    from odradek.registry.store import KafkaStore

    endpoints = [parse_listener(item) for item in listeners.split(",") if item.strip()]
    if not endpoints:
        raise ValueError("no listener given")
    store = KafkaStore(bootstrap, topic)
    store.start()
    # The first listener is the URL other instances forward writes to (the group's client.id).
    host, port = endpoints[0]
    election = Election(bootstrap, topic, f"http://{host}:{port}", eligible=leader_eligibility)
    election.start()
    app = build_app(store, election)
    class _Server(uvicorn.Server):
        # uvicorn's own handling re-raises SIGTERM after shutdown (so our cleanup, leaving the
        # group among it, would not run) and holds for one server only: we stop them all.
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
    try:
        print(f"registry serving on {listeners} over {bootstrap} ({topic})", flush=True)
        asyncio.run(serve_all())
    finally:
        election.close()
        store.close()
    return 0
