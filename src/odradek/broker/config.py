"""The node's configuration: Kafka defaults < --config file < --set overrides."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from odradek.metadata.configs import BrokerConfig, parse_properties

DEFAULT_LISTENER = "PLAINTEXT://localhost:9092"


class ConfigError(ValueError):
    """A config the node cannot start with (the message names the key)."""


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    host: str
    port: int


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
        values.update(parse_properties(text))
    values.update(parse_overrides(overrides))
    values.setdefault("listeners", DEFAULT_LISTENER)
    try:
        return BrokerConfig.from_properties(values)
    except Exception as exc:  # a KafkaError/ValueError naming the bad key
        raise ConfigError(str(exc)) from exc


def parse_listeners(spec: str) -> list[Listener]:
    """`PLAINTEXT://host:port,NAME://[::1]:port` -> listeners (empty host = all interfaces)."""
    result: list[Listener] = []
    for raw in spec.split(","):
        raw = raw.strip()
        if not raw:
            continue
        name, sep, rest = raw.partition("://")
        if not sep:
            raise ConfigError(f"listener {raw!r} is not NAME://host:port")
        if rest.startswith("["):
            host, _, port_s = rest[1:].partition("]:")
        else:
            host, _, port_s = rest.rpartition(":")
        try:
            port = int(port_s)
        except ValueError as exc:
            raise ConfigError(f"listener {raw!r} has no valid port") from exc
        if not 0 <= port <= 65535:
            raise ConfigError(f"listener {raw!r} port out of range")
        result.append(Listener(name.upper(), host, port))
    if not result:
        raise ConfigError("no listeners configured")
    return result
