"""A topic's effective configs, and the storage `LogConfig` its partitions' logs open with.

Each topic config's value is its override, else its broker synonym's (`BrokerConfig.
topic_default`), parsed once by the config table. `log_config` hands those typed values to
storage's `LogConfig` as they are: storage never parses a config string (it may not import
this package, so the mapping from Kafka's names to `LogConfig` fields lives here).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from odradek.metadata.config.broker_configs import BrokerConfig
from odradek.metadata.config.config_def import LONG_MAX, parse_value
from odradek.metadata.config.topic_configs import TOPIC_CONFIGS
from odradek.storage.config import LogConfig

__all__ = ["LOG_CONFIG_FIELDS", "effective_topic_configs", "log_config"]

# Kafka's topic config name -> LogConfig field: the field is the name with dots as underscores.
LOG_CONFIG_FIELDS: dict[str, str] = {
    f.name.replace("_", "."): f.name for f in dataclasses.fields(LogConfig)
}


def effective_topic_configs(
    topic_overrides: Mapping[str, str], broker_config: BrokerConfig
) -> dict[str, Any]:
    """Every topic config's typed effective value: override > broker synonyms > default."""
    result: dict[str, Any] = {}
    for name, defn in TOPIC_CONFIGS.items():
        if name in topic_overrides:
            result[name] = parse_value(name, defn.type, topic_overrides[name])
        else:
            result[name] = broker_config.topic_default(name)[0]
    return result


def log_config(topic_overrides: Mapping[str, str], broker_config: BrokerConfig) -> LogConfig:
    """The storage LogConfig of a topic: its overrides over the broker's defaults, typed."""
    effective = effective_topic_configs(topic_overrides, broker_config)
    fields: dict[str, Any] = {}
    for name, field_name in LOG_CONFIG_FIELDS.items():
        value = effective.get(name)
        if value is not None:  # no value anywhere: LogConfig keeps Kafka's default
            fields[field_name] = _for_storage(name, value)
    return LogConfig(**fields)


def _for_storage(name: str, value: Any) -> Any:
    if name in ("flush.messages", "flush.ms"):
        # Kafka's "never" is Long.MAX_VALUE; storage spells it None (no fsync on append)
        return None if value >= LONG_MAX else value
    if name == "cleanup.policy":
        # storage tests membership in a comma-separated string ("compact" in policy.split(","))
        return ",".join(item for item in value if item)
    return value
