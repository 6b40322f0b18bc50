"""Run the registry: read `_schemas`, then serve HTTP on the listeners until SIGTERM/Ctrl-C."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from odradek.registry.records import TOPIC
from odradek.service.http import parse_http_listener, serve_http

log = logging.getLogger(__name__)


def parse_listener(listener: str) -> tuple[str, int]:
    """`http://host:port` -> (host, port). Only plain HTTP for now."""
    return parse_http_listener(listener)


def run(bootstrap: str, listeners: str = "http://127.0.0.1:8081", topic: str = TOPIC,
        leader_eligibility: bool = True, fds: list[int] | None = None,
        client: Mapping[str, object] | None = None) -> int:
    """`fds`: listening sockets already bound for the listeners, in order (from `odradek
    serve`, which binds them before its node starts so a port in use refuses that start).
    `client`: librdkafka settings (TLS, SASL) for every Kafka client the registry makes.
    Exit 1 with one line when the cluster refuses the registry's connection."""

    from odradek.registry.app import build_app
    from odradek.registry.election import Election
    from odradek.registry.store import KafkaStore, StoreUnreachable

    endpoints = [parse_listener(item) for item in listeners.split(",") if item.strip()]
    if not endpoints:
        raise ValueError("no listener given")
    store = KafkaStore(bootstrap, topic, client=client)
    try:
        store.start()
    except StoreUnreachable as exc:
        log.error("%s", exc)  # on stderr, or in the node's log under `odradek serve`
        return 1
    # The first listener is the URL other instances forward writes to (the group's client.id).
    host, port = endpoints[0]
    election = Election(bootstrap, topic, f"http://{host}:{port}", eligible=leader_eligibility,
                        client=client)
    election.start()
    app = build_app(store, election)
    try:
        print(f"registry serving on {listeners} over {bootstrap} ({topic})", flush=True)
        serve_http(app, endpoints, fds)
    finally:
        election.close()
        store.close()
    return 0
