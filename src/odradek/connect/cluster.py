"""The cluster a worker talks to: its bootstrap address and the client settings (TLS, SASL)
every client the worker creates must use, in librdkafka's names.

One value handed everywhere, so no client is ever made without the settings: the store's
producer and consumers, the admin calls on a sink's group, the group membership's native
connection, and each connector's Spark query (as `kafka.*` options, which the odradek data
source takes as Spark's Kafka source does).

A Cluster keeps one admin client, made at the first `admin()` call and shared by every caller
after it: a librdkafka client is a handful of threads and a connection per broker, too much to
make for each metadata look-up (the mirror lists and describes topics every round), and its
calls may come from any thread.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class _Shared:
    """The one admin client of a Cluster, made on first use under a lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.client: Any = None


@dataclass(frozen=True)
class Cluster:
    bootstrap: str
    settings: Mapping[str, str] = field(default_factory=dict)
    _admin: _Shared = field(default_factory=_Shared, init=False, repr=False, compare=False)

    def admin(self) -> Any:
        """The cluster's admin client: one per Cluster, safe to use from any thread (librdkafka
        serialises its own state; confluent-kafka's calls return futures)."""
        shared = self._admin
        with shared.lock:
            if shared.client is None:
                from odradek.client import admin_client

                shared.client = admin_client(self.bootstrap, dict(self.settings))
            return shared.client

    def close(self) -> None:
        """Let the admin client go. It is not destroyed under a caller still using it: the
        handle goes with the last reference (a call in flight keeps it); an `admin()` after
        this makes a new one."""
        with self._admin.lock:
            self._admin.client = None

    def producer(self, extra: Mapping[str, object] | None = None) -> Any:
        from odradek.client import producer

        return producer(self.bootstrap, {**self.settings, **(extra or {})})

    def consumer(self, extra: Mapping[str, object] | None = None) -> Any:
        from odradek.client import consumer

        return consumer(self.bootstrap, {**self.settings, **(extra or {})})

    def spark_options(self) -> dict[str, str]:
        """The options a Spark query's `odradek` source or sink needs to reach the cluster."""
        return {"kafka.bootstrap.servers": self.bootstrap,
                **{f"kafka.{k}": str(v) for k, v in self.settings.items()}}

    def native_security(self) -> Any:
        """The native client connection's TLS/SASL (None: plaintext); ValueError when the
        settings ask for something it cannot do."""
        from odradek.client.connection import security_of, supports

        if supports(dict(self.settings)):
            return None
        try:
            return security_of(dict(self.settings))
        except ValueError:
            raise ValueError(
                "these security settings cannot be used by the worker's group membership: it "
                "speaks TLS (PEM files: ssl.ca.location, ssl.certificate.location, "
                "ssl.key.location) and SASL PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512") from None
