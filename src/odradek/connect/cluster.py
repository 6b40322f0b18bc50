"""The cluster a worker talks to: its bootstrap address and the client settings (TLS, SASL)
every client the worker creates must use, in librdkafka's names.

One value handed everywhere, so no client is ever made without the settings: the store's
producer and consumers, the admin calls on a sink's group, the group membership's native
connection, and each connector's Spark query (as `kafka.*` options, which the odradek data
source takes as Spark's Kafka source does).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Cluster:
    bootstrap: str
    settings: Mapping[str, str] = field(default_factory=dict)

    def admin(self) -> Any:
        from odradek.client import admin_client

        return admin_client(self.bootstrap, dict(self.settings))

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
