"""Run a Connect worker: read the three topics, start the connectors, serve the REST API on
the listeners until SIGTERM/Ctrl-C.

The worker's settings are Kafka's distributed-worker names (`group.id`,
`config.storage.topic`, `offset.storage.topic`, `status.storage.topic`, their
`.partitions` and `.replication.factor`, `key.converter`, `value.converter`), read from a
`connect-distributed.properties`-style file and overridden one by one.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Mapping
from pathlib import Path

from odradek.connect import converters, records
from odradek.connect.cluster import Cluster
from odradek.connect.store import Topics
from odradek.connect.worker import SessionFactory
from odradek.service.http import parse_http_listener, serve_http

log = logging.getLogger(__name__)

DEFAULTS = {
    "group.id": "connect-cluster",
    "config.storage.topic": records.CONFIG_TOPIC,
    "offset.storage.topic": records.OFFSET_TOPIC,
    "status.storage.topic": records.STATUS_TOPIC,
    "offset.storage.partitions": str(records.OFFSET_PARTITIONS),
    "status.storage.partitions": str(records.STATUS_PARTITIONS),
    "config.storage.replication.factor": "-1",
    "offset.storage.replication.factor": "-1",
    "status.storage.replication.factor": "-1",
    "session.timeout.ms": "10000",
    "heartbeat.interval.ms": "3000",
    "rebalance.timeout.ms": "60000",
    **converters.WORKER_DEFAULTS,
}
# Settings a distributed worker has that this one cannot honour: refused, not ignored.
REFUSED = {
    "exactly.once.source.support": "exactly-once source support is not implemented",
    "rest.advertised.listener": "TLS listeners are not implemented: use --listeners http://...",
}


def parse_listener(listener: str) -> tuple[str, int]:
    """`http://host:port` -> (host, port). Only plain HTTP for now."""
    return parse_http_listener(listener)


def read_properties(path: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        text = line.strip()
        if not text or text[0] in "#!":
            continue
        key, sep, value = text.partition("=")
        if not sep:
            key, _, value = text.partition(":")
        out[key.strip()] = value.strip()
    return out


def worker_config(overrides: Mapping[str, str]) -> dict[str, str]:
    config = {**DEFAULTS, **overrides}
    for key in overrides:
        if key in REFUSED and overrides[key] not in ("", "disabled"):
            raise ValueError(f"{key}: {REFUSED[key]}")
    for key in ("key.converter", "value.converter"):
        converters.resolve(key, {}, config)  # an unknown class is refused here
    for key in ("offset.storage.partitions", "status.storage.partitions",
                "session.timeout.ms", "heartbeat.interval.ms", "rebalance.timeout.ms"):
        if not config[key].strip().isdigit() or int(config[key]) < 1:
            raise ValueError(f"{key} must be a whole number of at least 1, got {config[key]!r}")
    return config


def topics_of(config: Mapping[str, str]) -> Topics:
    rf = {int(config[f"{k}.storage.replication.factor"]) for k in ("config", "offset", "status")}
    return Topics(config=config["config.storage.topic"],
                  offset=config["offset.storage.topic"],
                  status=config["status.storage.topic"],
                  offset_partitions=int(config["offset.storage.partitions"]),
                  status_partitions=int(config["status.storage.partitions"]),
                  replication_factor=max(rf))


def run(bootstrap: str, session: SessionFactory, listeners: str = "http://127.0.0.1:8083",
        config: Mapping[str, str] | None = None, state_dir: Path | None = None,
        client: Mapping[str, str] | None = None, fds: list[int] | None = None) -> int:
    """`client`: the TLS/SASL settings (librdkafka's names) of every client the worker and
    its queries make. `fds`: listening sockets already bound for `listeners`, in order (when
    `odradek serve` runs the worker as its child)."""
    from odradek.connect.app import build_app
    from odradek.connect.catalog import default_plugins
    from odradek.connect.group import GroupMember
    from odradek.connect.herder import Herder
    from odradek.connect.store import ConnectStore
    from odradek.connect.worker import Worker

    settings = worker_config(config or {})
    endpoints = [parse_listener(item) for item in listeners.split(",") if item.strip()]
    if not endpoints:
        raise ValueError("no listener given")
    host, port = endpoints[0]
    worker_id = f"{host}:{port}"
    own_dir = None
    if state_dir is None:
        own_dir = tempfile.TemporaryDirectory(prefix="odradek-connect-")
        state_dir = Path(own_dir.name)
    cluster = Cluster(bootstrap, dict(client or {}))
    security = cluster.native_security()  # refused here when the group could not use them
    plugins = default_plugins()
    store = ConnectStore(cluster, topics_of(settings))
    worker = Worker(store, plugins, cluster, worker_id, session, state_dir, settings)
    store.on_config = worker.wake
    store.start()
    member = GroupMember(bootstrap, settings["group.id"], f"http://{host}:{port}",
                         worker.config_view, worker.assign, worker.revoke, worker.owners,
                         session_timeout_ms=int(settings["session.timeout.ms"]),
                         rebalance_timeout_ms=int(settings["rebalance.timeout.ms"]),
                         heartbeat_interval_ms=int(settings["heartbeat.interval.ms"]),
                         security=security)
    worker.member = member
    worker.assigned = set()  # nothing runs before the group assigns it
    worker.start()
    member.start()
    app = build_app(Herder(store, plugins, cluster, worker.wake))
    try:
        print(f"connect worker {worker_id} serving on {listeners} over {bootstrap} "
              f"(group.id={settings['group.id']})", flush=True)
        serve_http(app, endpoints, fds)
    finally:
        member.close()  # leaves the group: the others take its connectors at once
        worker.close()
        store.close()
        cluster.close()
        if own_dir is not None:
            own_dir.cleanup()
    return 0
