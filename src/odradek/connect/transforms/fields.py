"""The transforms that add, drop, rename, mask, move and wrap fields, as Kafka's do:
InsertField, ReplaceField, MaskField, ValueToKey, ExtractField, HoistField.

With a schema they build the new STRUCT schema (kept once per input schema) and its value;
without one they work on the value as a map. A tombstone (null value) passes unchanged,
except where Kafka's transform says otherwise.
"""

from __future__ import annotations

import datetime as dt
import decimal
from dataclasses import replace
from typing import Any

from odradek.connect import data
from odradek.connect.data import ConnectRecord, DataError, Schema, SchemaCache
from odradek.connect.transforms.base import (
    ConfigError,
    Setting,
    Transformation,
    as_list,
    require_map,
    require_struct,
)


def _copy_basics(schema: Schema, fields: list[tuple[str, Schema]]) -> Schema:
    """SchemaUtil.copySchemaBasics plus new fields: name, version, doc, optional kept."""
    return data.struct(fields, name=schema.name, optional=schema.optional,
                       version=schema.version, doc=schema.doc)


class InsertField(Transformation):
    """Fields from the record's metadata or a static value; a trailing `!` makes a field
    required, `?` (the default) optional."""

    PURPOSE = "field insertion"
    settings = (Setting("topic.field", ""), Setting("partition.field", ""),
                Setting("offset.field", ""), Setting("timestamp.field", ""),
                Setting("static.field", ""), Setting("static.value", ""))

    def configure(self) -> None:
        def spec(raw: str) -> tuple[str, bool] | None:
            raw = raw.strip()
            if not raw:
                return None
            if raw.endswith("!"):
                return raw[:-1], False
            if raw.endswith("?"):
                return raw[:-1], True
            return raw, True

        self.topic = spec(self.config["topic.field"])
        self.partition = spec(self.config["partition.field"])
        self.offset = spec(self.config["offset.field"])
        self.timestamp = spec(self.config["timestamp.field"])
        self.static = spec(self.config["static.field"])
        self.static_value = self.config["static.value"]
        if self.static is not None and not self.static_value:
            raise ConfigError("Invalid value for configuration static.value: "
                              "static.value must be set along with static.field")
        self.cache = SchemaCache()

    def _values(self, record: ConnectRecord) -> list[tuple[tuple[str, bool], Schema, Any]]:
        out: list[tuple[tuple[str, bool], Schema, Any]] = []
        if self.topic:
            out.append((self.topic, Schema("STRING"), record.topic))
        if self.partition:
            out.append((self.partition, Schema("INT32"), record.partition))
        if self.offset:
            if record.offset is None and not self.offset[1]:
                raise DataError(f"Only SinkRecord supported for [{self.PURPOSE}] with a "
                                f"required offset field, found: SourceRecord")
            if record.offset is not None:
                out.append((self.offset, Schema("INT64"), record.offset))
        if self.timestamp:
            ts = record.timestamp
            out.append((self.timestamp, Schema("INT64", name=data.TIMESTAMP, version=1),
                        None if ts is None else data.EPOCH + dt.timedelta(milliseconds=ts)))
        if self.static:
            out.append((self.static, Schema("STRING"), self.static_value))
        return out

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating_value(record)
        if value is None:
            return record  # a tombstone passes
        schema = self.operating_schema(record)
        inserts = self._values(record)
        if schema is None:
            out = dict(require_map(value, self.PURPOSE))
            for (name, _), _, v in inserts:
                if v is not None:  # schemaless: a timestamp is its epoch millis
                    out[name] = data_millis(v) if isinstance(v, dt.datetime) else v
            return self.with_operating(record, None, out)
        struct = require_struct(schema, value, self.PURPOSE)

        def build(base: Schema) -> Schema:
            fields = [(f.name, f.schema) for f in base.fields]
            fields += [(name, replace(s, optional=optional))
                       for (name, optional), s, _ in inserts]
            return _copy_basics(base, fields)

        new_schema = self.cache.get(schema, build)
        out = dict(struct)
        for (name, _), _, v in inserts:
            out[name] = v
        data.validate(new_schema, out)
        return self.with_operating(record, new_schema, out)


def data_millis(value: dt.datetime) -> int:
    return (value - data.EPOCH) // dt.timedelta(milliseconds=1)


class ReplaceField(Transformation):
    """`exclude`, `include` (the older `blacklist`/`whitelist` too) and `renames`
    (from:to,...)."""

    PURPOSE = "field replacement"
    settings = (Setting("exclude", ""), Setting("include", ""), Setting("renames", ""),
                Setting("blacklist", ""), Setting("whitelist", ""))

    def configure(self) -> None:
        self.exclude = set(as_list(self.config["exclude"]) or as_list(self.config["blacklist"]))
        self.include = set(as_list(self.config["include"]) or as_list(self.config["whitelist"]))
        self.renames: dict[str, str] = {}
        for pair in as_list(self.config["renames"]):
            old, sep, new = pair.partition(":")
            if not sep or not old or not new:
                raise ConfigError(f"Invalid value {self.config['renames']} for configuration "
                                  f"renames: Invalid rename mapping: {pair}")
            self.renames[old] = new
        self.reverse = {v: k for k, v in self.renames.items()}
        self.cache = SchemaCache()

    def keep(self, name: str) -> bool:
        return name not in self.exclude and (not self.include or name in self.include)

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating_value(record)
        if value is None:
            return record
        schema = self.operating_schema(record)
        if schema is None:
            source = require_map(value, self.PURPOSE)
            out = {self.renames.get(k, k): v for k, v in source.items() if self.keep(k)}
            return self.with_operating(record, None, out)
        struct = require_struct(schema, value, self.PURPOSE)
        new_schema = self.cache.get(schema, lambda base: _copy_basics(
            base, [(self.renames.get(f.name, f.name), f.schema) for f in base.fields
                   if self.keep(f.name)]))
        out = {f.name: struct.get(self.reverse.get(f.name, f.name)) for f in new_schema.fields}
        return self.with_operating(record, new_schema, out)


_ZERO: dict[str, Any] = {"INT8": 0, "INT16": 0, "INT32": 0, "INT64": 0, "FLOAT32": 0.0,
                         "FLOAT64": 0.0, "BOOLEAN": False, "STRING": "", "BYTES": b""}


class MaskField(Transformation):
    """`fields` replaced with their type's empty value (0, false, "", empty bytes, list or
    map, the epoch), or with `replacement` for numbers and strings."""

    PURPOSE = "mask fields"
    settings = (Setting("fields", None, lambda raw: None if as_list(raw) else
                        "Empty list"),
                Setting("replacement", ""))

    def configure(self) -> None:
        self.fields = as_list(self.config["fields"])
        self.replacement = self.config["replacement"] or None

    def masked(self, value: Any, schema: Schema | None, field: str) -> Any:
        if value is None:
            return None
        if self.replacement is not None:
            return self._replaced(value, field)
        if (schema is not None and schema.name == data.DECIMAL) or \
                isinstance(value, decimal.Decimal):
            return decimal.Decimal(0)
        if isinstance(value, dt.datetime):
            return data.EPOCH
        if isinstance(value, dt.date):
            return dt.date(1970, 1, 1)
        if isinstance(value, dt.time):
            return dt.time(0)
        if isinstance(value, bool):
            return False
        if isinstance(value, int):
            return 0
        if isinstance(value, float):
            return 0.0
        if isinstance(value, str):
            return ""
        if isinstance(value, bytes):
            return b""
        if isinstance(value, list):
            return []
        if isinstance(value, dict):
            return {}
        raise DataError(f"Cannot mask value of type: {type(value).__name__}")

    def _replaced(self, value: Any, field: str) -> Any:
        assert self.replacement is not None
        text = self.replacement
        if isinstance(value, bool):
            raise DataError(f"Cannot mask value of type {type(value).__name__} with custom "
                            f"replacement.")
        try:
            if isinstance(value, int):
                return int(text)
            if isinstance(value, float):
                return float(text)
            if isinstance(value, decimal.Decimal):
                return decimal.Decimal(text)
            if isinstance(value, str):
                return text
        except (ValueError, decimal.InvalidOperation):
            raise DataError(f"Unable to convert {text} ({type(value).__name__}) for field "
                            f"{field}") from None
        raise DataError(f"Cannot mask value of type {type(value).__name__} with custom "
                        f"replacement.")

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating_value(record)
        if value is None:
            return record
        schema = self.operating_schema(record)
        if schema is None:
            out = dict(require_map(value, self.PURPOSE))
            for name in self.fields:
                if name in out:
                    out[name] = self.masked(out[name], None, name)
            return self.with_operating(record, None, out)
        struct = dict(require_struct(schema, value, self.PURPOSE))
        for name in self.fields:
            f = schema.field(name)
            if f is None:
                raise DataError(f"{name} is not a valid field name")
            struct[name] = self.masked(struct.get(name), f.schema, name)
        return self.with_operating(record, schema, struct)


class ValueToKey(Transformation):
    """The key becomes the value's `fields` (a map, or a STRUCT with their schemas)."""

    PURPOSE = "copying fields from value to key"
    settings = (Setting("fields", None, lambda raw: None if as_list(raw) else "Empty list"),
                Setting("replace.null.with.default", "true"))

    def configure(self) -> None:
        self.fields = as_list(self.config["fields"])
        self.cache = SchemaCache()

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        if record.value_schema is None:
            value = require_map(record.value, self.PURPOSE)
            return record.new(key_schema=None, key={f: value.get(f) for f in self.fields})
        struct = require_struct(record.value_schema, record.value, self.PURPOSE)

        def build(base: Schema) -> Schema:
            out = []
            for name in self.fields:
                f = base.field(name)
                if f is None:
                    raise DataError(f"Field does not exist: {name}")
                out.append((name, f.schema))
            return data.struct(out)

        key_schema = self.cache.get(record.value_schema, build)
        return record.new(key_schema=key_schema, key={f: struct.get(f) for f in self.fields})


class ExtractField(Transformation):
    """The key or value becomes one of its fields (`field`)."""

    PURPOSE = "field extraction"
    settings = (Setting("field", None, lambda raw: None if raw.strip() else
                        "String must be non-empty"),
                Setting("field.syntax.version", "V1",
                        lambda raw: None if raw.upper() == "V1" else
                        "only V1 (a top-level field name) is supported here"))

    def configure(self) -> None:
        self.field = self.config["field"]

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        schema = self.operating_schema(record)
        value = self.operating_value(record)
        if schema is None:
            if value is None:
                return self.with_operating(record, None, None)
            return self.with_operating(record, None,
                                       require_map(value, self.PURPOSE).get(self.field))
        f = schema.field(self.field) if schema.type == "STRUCT" else None
        if f is None:
            raise DataError(f"Unknown field: {self.field}")
        if value is None:
            return self.with_operating(record, f.schema, None)
        struct = require_struct(schema, value, self.PURPOSE)
        return self.with_operating(record, f.schema, struct.get(self.field))


class HoistField(Transformation):
    """The key or value is wrapped into a STRUCT (or map) under `field`."""

    settings = (Setting("field", None, lambda raw: None if raw.strip() else
                        "String must be non-empty"),)

    def configure(self) -> None:
        self.field = self.config["field"]
        self.cache = SchemaCache()

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        schema = self.operating_schema(record)
        value = self.operating_value(record)
        if schema is None:
            return self.with_operating(record, None, {self.field: value})
        new_schema = self.cache.get(schema, lambda base: data.struct([(self.field, base)]))
        return self.with_operating(record, new_schema, {self.field: value})
