"""What every Single Message Transform shares: its config (Kafka's names, checked as a
ConfigDef checks them), and the $Key/$Value split: one class body works on the record's key
or value (`operating_*`, `with_operating`), as Kafka's Key and Value inner classes do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from odradek.connect.data import ConnectRecord, DataError, Schema


class ConfigError(ValueError):
    """A transform's config that Kafka's ConfigDef would refuse; the message is Kafka's."""


Check = Callable[[str], str | None]


class Setting:
    def __init__(self, name: str, default: str | None = None, check: Check | None = None,
                 doc: str = "") -> None:
        self.name = name
        self.default = default  # None: required
        self.check = check
        self.doc = doc


class Transformation:
    """A configured transform: `apply` returns the new record, or None to drop it."""

    settings: tuple[Setting, ...] = ()

    def __init__(self, config: Mapping[str, str], key: bool = False) -> None:
        self.key = key
        self.config: dict[str, str] = {}
        for s in self.settings:
            raw = config.get(s.name, s.default)
            if raw is None:
                raise ConfigError(f'Missing required configuration "{s.name}" which has no '
                                  f"default value.")
            if s.check is not None:
                message = s.check(raw)
                if message:
                    raise ConfigError(f"Invalid value {raw} for configuration {s.name}: "
                                      f"{message}")
            self.config[s.name] = raw
        self.configure()

    def configure(self) -> None:
        """Parse `self.config` once (raise ConfigError as Kafka's configure would)."""

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        raise NotImplementedError

    # ---- $Key / $Value ----------------------------------------------------------------------
    def operating_schema(self, record: ConnectRecord) -> Schema | None:
        return record.key_schema if self.key else record.value_schema

    def operating_value(self, record: ConnectRecord) -> Any:
        return record.key if self.key else record.value

    def with_operating(self, record: ConnectRecord, schema: Schema | None,
                       value: Any) -> ConnectRecord:
        if self.key:
            return record.new(key_schema=schema, key=value)
        return record.new(value_schema=schema, value=value)


def require_map(value: Any, purpose: str) -> dict[str, Any]:
    """Requirements.requireMap: a schemaless value must be a map."""
    if not isinstance(value, dict):
        raise DataError(f"Only Map objects supported in absence of schema for [{purpose}], "
                        f"found: {_java_class(value)}")
    return value


def require_struct(schema: Schema, value: Any, purpose: str) -> dict[str, Any]:
    if schema.type != "STRUCT" or not isinstance(value, dict):
        raise DataError(f"Only Struct objects supported for [{purpose}], found: "
                        f"{_java_class(value)}")
    return value


def _java_class(value: Any) -> str:
    names = {str: "java.lang.String", int: "java.lang.Long", float: "java.lang.Double",
             bool: "java.lang.Boolean", bytes: "[B", list: "java.util.ArrayList"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def as_list(raw: str) -> list[str]:
    return [item.strip() for item in raw.split(",") if item.strip()]
