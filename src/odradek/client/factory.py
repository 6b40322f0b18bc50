"""confluent-kafka clients built from a bootstrap address (the one Kafka client we use)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from odradek.client.config import client_config
from odradek.client.consumer_settings import consumer_settings


def admin_client(bootstrap: str | None = None,
                 overrides: Mapping[str, object] | None = None) -> AdminClient:
    return AdminClient(client_config(bootstrap, overrides))


def producer(bootstrap: str | None = None, overrides: Mapping[str, object] | None = None,
             **defaults: object) -> Producer:
    return Producer(client_config(bootstrap, overrides, **defaults))


def consumer(bootstrap: str | None = None, overrides: Mapping[str, object] | None = None,
             *, librdkafka_defaults: bool = False, **defaults: object) -> Consumer:
    """A consumer for assign()-style reads unless the caller names a group.

    librdkafka insists on a group.id even when no group is joined; a per-process name keeps
    tools from sharing (and committing into) anybody's group. Auto commit is off by default
    for the same reason. The fetch settings are the shipped ones (client.consumer_settings).
    """
    defaults.setdefault("group_id", f"odradek-cli-{os.getpid()}")
    defaults.setdefault("enable_auto_commit", False)
    defaults.setdefault("enable_auto_offset_store", False)
    return Consumer(consumer_settings(bootstrap, overrides,
                                      librdkafka_defaults=librdkafka_defaults, **defaults))
