"""The clients odradek's tools and services use to talk to a node. confluent-kafka helpers:
`config` (resolve_bootstrap, client_config) and `factory` (admin_client, producer, consumer),
re-exported here. odradek's own native client, no Python object per record: `fetcher`
(PartitionFetcher), `columnar` (decode_fetched into numpy columns), `batch_builder`
(build_columnar_batch), `producer_columnar` (ColumnarProducer). The perf tools behind `odradek
bench` live here too for now: `perf`, `perf_columnar`, `perf_parallel`, `e2e_columnar`."""

from odradek.client.config import (
    BOOTSTRAP_ENV,
    DEFAULT_BOOTSTRAP,
    client_config,
    parse_key_values,
    resolve_bootstrap,
)
from odradek.client.factory import admin_client, consumer, producer

__all__ = [
    "BOOTSTRAP_ENV",
    "DEFAULT_BOOTSTRAP",
    "admin_client",
    "client_config",
    "consumer",
    "parse_key_values",
    "producer",
    "resolve_bootstrap",
]
