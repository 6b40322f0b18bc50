"""A node's broker config as given: Kafka defaults < `--config` file < `--set key=value`.

The file is read in Java .properties syntax, as Kafka reads server.properties
(`odradek.metadata.config.java_properties`); every value then goes through the broker config
table (`BrokerConfig.from_properties`), which refuses a bad one naming its key.
"""

from __future__ import annotations

from pathlib import Path

from odradek.broker.config import ConfigError
from odradek.metadata.config.broker_configs import BrokerConfig
from odradek.metadata.config.java_properties import parse_properties

DEFAULT_LISTENER = "PLAINTEXT://localhost:9092"


def parse_overrides(overrides: list[str]) -> dict[str, str]:
    values: dict[str, str] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects key=value, got {item!r}")
        values[key.strip()] = value.strip()
    return values


def load_config(config_file: Path | None, overrides: list[str]) -> BrokerConfig:
    values: dict[str, str] = {}
    if config_file is not None:
        try:
            text = Path(config_file).read_text()
        except OSError as exc:
            raise ConfigError(f"cannot read config file {config_file}: {exc}") from exc
        except UnicodeDecodeError as exc:
            raise ConfigError(f"config file {config_file} is not text: {exc}") from exc
        values.update(parse_properties(text))
    values.update(parse_overrides(overrides))
    values.setdefault("listeners", DEFAULT_LISTENER)
    try:
        return BrokerConfig.from_properties(values)
    except Exception as exc:  # a KafkaError/ValueError naming the bad key
        raise ConfigError(str(exc)) from exc
