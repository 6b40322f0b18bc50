"""The clients odradek's tools and services use to talk to a node. confluent-kafka helpers:
`config` (resolve_bootstrap, client_config) and `factory` (admin_client, producer, consumer),
re-exported here. odradek's own native client, no Python object per record: `fetcher`
(PartitionFetcher), `columnar` (decode_fetched into numpy columns), `batch_builder`
(build_columnar_batch), `producer_columnar` (ColumnarProducer). The perf tools behind `odradek
bench` live here too for now: `perf`, `perf_columnar`, `perf_parallel`, `e2e_columnar`."""

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
