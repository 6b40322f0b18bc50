"""The clients odradek's tools and services use to talk to a node.

Two families: helpers over confluent-kafka (`config` for bootstrap and -X settings,
`consumer_settings` for the shipped fetch settings, `factory` for `admin_client`, `consumer`,
`producer`, re-exported here; `admin.ensure_topic`), and odradek's own native client for
reading and writing record batches as numpy columns: `connection` (one blocking socket per broker), `metadata`
(the leader lookup), `fetcher` (Fetch v11 for one partition), `columnar` (batches decoded into
columns), `batch_builder` and `producer_columnar` (batches built from columns, sent as Produce
v9). The perf tools built on them live in odradek.perf.
"""

from typing import Any

from odradek.client.config import (
    BOOTSTRAP_ENV,
    DEFAULT_BOOTSTRAP,
    client_config,
    parse_key_values,
    resolve_bootstrap,
)
from odradek.client.consumer_settings import consumer_settings

# The factories import confluent-kafka (librdkafka): load them on first use, so that the CLI's
# help and the settings texts do not pay for it.
_FACTORIES = ("admin_client", "consumer", "producer")


def __getattr__(name: str) -> Any:
    if name in _FACTORIES:
        from odradek.client import factory

        return getattr(factory, name)
    raise AttributeError(f"module 'odradek.client' has no attribute {name!r}")

__all__ = [
    "BOOTSTRAP_ENV",
    "DEFAULT_BOOTSTRAP",
    "admin_client",
    "client_config",
    "consumer",
    "consumer_settings",
    "parse_key_values",
    "producer",
    "resolve_bootstrap",
]
