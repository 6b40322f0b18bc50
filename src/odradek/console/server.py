"""Run the console: uvicorn on each listener, the lag sampler beside it, until SIGTERM."""

from __future__ import annotations

import logging
from pathlib import Path

from odradek.service.http import parse_http_listener, serve_http

log = logging.getLogger(__name__)


def parse_listener(listener: str) -> tuple[str, int]:
    """`http://host:port` -> (host, port); ValueError with a message otherwise."""
    return parse_http_listener(listener, "a console listener")


def run(bootstrap: str, listeners: str, history: Path, registry: str | None = None,
        admin: str | None = None, fds: list[int] | None = None,
        sample_interval_s: float = 5.0, overrides: dict[str, object] | None = None) -> int:
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

    sampler.start()
    try:
        print(f"console serving on {listeners} over {bootstrap}"
              f"{f', registry {registry}' if registry else ''}"
              f"{f', admin {admin}' if admin else ''}; lag history in {history}", flush=True)
        serve_http(app, endpoints, fds)
    finally:
        sampler.stop()
        lag_history.close()
    return 0
