"""Config types and validation: what a config is, how its string is parsed and checked.

`ConfigDef` describes one key (type, default, validator, doc, synonyms); `parse_value` reads a
string the way Kafka's ConfigDef.parseType does and `to_config_string` prints a value back the
way Kafka shows it. The validators raise `ConfigError` (INVALID_CONFIG naming the key) with
Kafka's messages. The tables themselves are in `topic_configs` and `broker_configs`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from odradek.protocol.errors import ErrorCode, KafkaError

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


class ConfigType(IntEnum):
    """DescribeConfigs' config_type ids (KIP-569)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """DescribeConfigs' config_source ids."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class ConfigError(KafkaError, ValueError):
    """A config name or value Kafka refuses: INVALID_CONFIG naming the key.

    Also a ValueError, as any bad value is in Python, so callers outside the request path
    (the node's start checks, storage-side callers) can catch it without knowing Kafka errors.
    """

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.invalid_config, message)


Validator = Callable[[str, Any], None]


@dataclass(frozen=True, slots=True)
class Synonym:
    """A broker config standing in for a topic config; its value times `multiplier`."""

    name: str
    multiplier: int = 1


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    type: ConfigType
    default: Any  # the parsed default, None when Kafka has none
    validator: Validator | None
    doc: str
    synonyms: tuple[Synonym, ...] = ()  # topic configs only: broker synonyms in Kafka's order
    dynamic: bool = False  # broker configs only: alterable at runtime

    @property
    def sensitive(self) -> bool:
        return self.type is ConfigType.PASSWORD


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    read_only: bool
    source: ConfigSource
    sensitive: bool
    synonyms: list[ConfigSynonym] = field(default_factory=list)
    type: ConfigType = ConfigType.UNKNOWN
    documentation: str | None = None


# --- validators (messages follow Kafka's ConfigDef validators) ---------------------------------


def at_least(minimum: float) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is not None and value < minimum:
            raise ConfigError(
                f"Invalid value {to_config_string(value)} for configuration {name}: "
                f"Value must be at least {minimum}"
            )

    return check


def between(low: float, high: float) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is not None and not (low <= value <= high):
            raise ConfigError(
                f"Invalid value {to_config_string(value)} for configuration {name}: "
                f"Value must be no less than {low} and no more than {high}"
            )

    return check


def one_of(*allowed: str) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is not None and value not in allowed:
            raise ConfigError(
                f"Invalid value {value} for configuration {name}: "
                f"String must be one of: {', '.join(allowed)}"
            )

    return check


def list_of(*allowed: str) -> Validator:
    def check(name: str, value: Any) -> None:
        for item in value or ():
            if item not in allowed:
                raise ConfigError(
                    f"Invalid value {item} for configuration {name}: "
                    f"String must be one of: {', '.join(allowed)}"
                )

    return check


def compression_level(low: int, high: int, extra: int | None = None) -> Validator:
    def check(name: str, value: Any) -> None:
        if value is None or value == extra or low <= value <= high:
            return
        allowed = f"[{extra}, {low},...,{high}]" if extra is not None else f"[{low},...,{high}]"
        raise ConfigError(
            f"Invalid value {value} for configuration {name}: Value must be one of {allowed}"
        )

    return check


# --- parsing and printing values ---------------------------------------------------------------

_INT_RANGES = {
    ConfigType.SHORT: (-(2**15), 2**15 - 1),
    ConfigType.INT: (-(2**31), 2**31 - 1),
    ConfigType.LONG: (-(2**63), 2**63 - 1),
}


def parse_value(name: str, ctype: ConfigType, raw: str | None) -> Any:
    """Parse a config string as Kafka's ConfigDef.parseType does; ConfigError names the key."""
    if raw is None:
        return None
    if ctype is ConfigType.PASSWORD:
        return raw
    text = raw.strip()
    if ctype is ConfigType.BOOLEAN:
        low = text.lower()
        if low in ("true", "false"):
            return low == "true"
        raise ConfigError(
            f"Invalid value {raw} for configuration {name}: Expected value to be either true or false"
        )
    if ctype in _INT_RANGES:
        lo, hi = _INT_RANGES[ctype]
        try:
            number = int(text, 10)
        except ValueError:
            number = None
        if number is None or not lo <= number <= hi or not _is_java_integer(text):
            raise ConfigError(
                f"Invalid value {raw} for configuration {name}: "
                f"Not a number of type {ctype.name}"
            )
        return number
    if ctype is ConfigType.DOUBLE:
        try:
            number = float(text)
        except ValueError:
            number = math.nan
        if math.isnan(number) or "_" in text:
            raise ConfigError(
                f"Invalid value {raw} for configuration {name}: Not a number of type DOUBLE"
            )
        return number
    if ctype is ConfigType.LIST:
        if not text:
            return []
        return [item.strip() for item in text.split(",")]
    return text


def _is_java_integer(text: str) -> bool:
    # Python's int() accepts "1_000" and surrounding whitespace; Java's parseLong does not.
    body = text[1:] if text[:1] in "+-" else text
    return body.isdigit() and body.isascii()


def to_config_string(value: Any) -> str | None:
    """Print a parsed value the way Kafka's ConfigDef.convertToString does."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


def check_value(defn: ConfigDef, name: str, raw: str | None) -> Any:
    """Parse `raw` as `defn`'s type and run its validator: the typed value, or ConfigError."""
    value = parse_value(name, defn.type, raw)
    if defn.validator is not None:
        defn.validator(name, value)
    return value
