"""Thin helpers over confluent-kafka for tools and services that talk to a node as a client."""

from odradek.client.config import (
    BOOTSTRAP_ENV,
    DEFAULT_BOOTSTRAP,
    client_config,
    parse_key_values,
    resolve_bootstrap,
)
from odradek.client.consumer_settings import consumer_settings
from odradek.client.factory import admin_client, consumer, producer

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
