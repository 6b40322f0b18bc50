"""Kafka Connect's data model, sans I/O: schemas, records, and the checks Connect makes.

A `Schema` is Connect's (org.apache.kafka.connect.data.Schema): a type (INT8 .. FLOAT64,
BOOLEAN, STRING, BYTES, ARRAY, MAP, STRUCT), optional, name, version, doc, default,
parameters, and fields (STRUCT), key and value schemas (MAP), value schema (ARRAY). Values are
Python's: int, float, bool, str, bytes, list, dict; a STRUCT's value is a dict in field order.
The logical types keep Kafka's names: Decimal (decimal.Decimal, `scale` parameter), Date
(datetime.date), Time (datetime.time) and Timestamp (datetime.datetime, UTC).

A record with no schema (`value_schema` None) is schemaless, as JsonConverter with
schemas.enable=false gives: transforms treat its dict value as Kafka treats a Map.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

PRIMITIVES = ("INT8", "INT16", "INT32", "INT64", "FLOAT32", "FLOAT64", "BOOLEAN", "STRING",
              "BYTES")
TYPES = (*PRIMITIVES, "ARRAY", "MAP", "STRUCT")
INTEGER_BITS = {"INT8": 8, "INT16": 16, "INT32": 32, "INT64": 64}

DECIMAL = "org.apache.kafka.connect.data.Decimal"
DATE = "org.apache.kafka.connect.data.Date"
TIME = "org.apache.kafka.connect.data.Time"
TIMESTAMP = "org.apache.kafka.connect.data.Timestamp"
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class DataError(ValueError):
    """Connect's DataException: a value that does not fit, a converter that cannot read."""


@dataclass(frozen=True)
class Field:
    name: str
    index: int
    schema: Schema


@dataclass(frozen=True)
class Schema:
    type: str
    optional: bool = False
    name: str | None = None
    version: int | None = None
    doc: str | None = None
    default: Any = field(default=None, hash=False)
    parameters: tuple[tuple[str, str], ...] = ()
    fields: tuple[Field, ...] = ()
    key_schema: Schema | None = None  # MAP
    value_schema: Schema | None = None  # MAP values, ARRAY items

    def __post_init__(self) -> None:
        if self.type not in TYPES:
            raise DataError(f"Unknown schema type: {self.type}")

    def field(self, name: str) -> Field | None:
        return next((f for f in self.fields if f.name == name), None)

    @property
    def params(self) -> dict[str, str]:
        return dict(self.parameters)

    def as_optional(self) -> Schema:
        return replace(self, optional=True)


def struct(fields: list[tuple[str, Schema]], *, name: str | None = None,
           optional: bool = False, version: int | None = None, doc: str | None = None) -> Schema:
    return Schema("STRUCT", optional=optional, name=name, version=version, doc=doc,
                  fields=tuple(Field(n, i, s) for i, (n, s) in enumerate(fields)))


def primitive(kind: str, optional: bool = False) -> Schema:
    return Schema(kind, optional=optional)


def decimal_schema(scale: int, optional: bool = False) -> Schema:
    return Schema("BYTES", optional=optional, name=DECIMAL, version=1,
                  parameters=(("scale", str(scale)),))


OPTIONAL_STRING = Schema("STRING", optional=True)
OPTIONAL_BYTES = Schema("BYTES", optional=True)


@dataclass(frozen=True)
class ConnectRecord:
    """A SourceRecord or SinkRecord: the same fields, `offset` set on a sink's."""

    topic: str
    partition: int | None
    key_schema: Schema | None
    key: Any
    value_schema: Schema | None
    value: Any
    timestamp: int | None = None  # ms since the epoch
    headers: tuple[tuple[str, bytes | None], ...] = ()
    offset: int | None = None

    def new(self, **changes: Any) -> ConnectRecord:
        """ConnectRecord.newRecord: a copy with some fields replaced."""
        return replace(self, **changes)

    def header(self, key: str) -> bool:
        return any(k == key for k, _ in self.headers)


def validate(schema: Schema, value: Any, where: str = "value") -> None:
    """ConnectSchema.validateValue: raise DataError when `value` does not fit `schema`."""
    if value is None:
        if not schema.optional and schema.default is None:
            raise DataError(f"Invalid value: null used for required field: \"{where}\", "
                            f"schema type: {schema.type}")
        return
    if schema.name == DECIMAL:
        ok = isinstance(value, decimal.Decimal)
    elif schema.name == DATE:
        ok = isinstance(value, dt.date) and not isinstance(value, dt.datetime)
    elif schema.name == TIME:
        ok = isinstance(value, dt.time)
    elif schema.name == TIMESTAMP:
        ok = isinstance(value, dt.datetime)
    elif schema.type in INTEGER_BITS:
        bits = INTEGER_BITS[schema.type]
        ok = (isinstance(value, int) and not isinstance(value, bool)
              and -(1 << (bits - 1)) <= value < (1 << (bits - 1)))
    elif schema.type in ("FLOAT32", "FLOAT64"):
        ok = isinstance(value, float)
    elif schema.type == "BOOLEAN":
        ok = isinstance(value, bool)
    elif schema.type == "STRING":
        ok = isinstance(value, str)
    elif schema.type == "BYTES":
        ok = isinstance(value, bytes | bytearray)
    elif schema.type == "ARRAY":
        ok = isinstance(value, list)
        if ok:
            assert schema.value_schema is not None
            for item in value:
                validate(schema.value_schema, item, where)
    elif schema.type == "MAP":
        ok = isinstance(value, Mapping)
        if ok:
            assert schema.key_schema is not None and schema.value_schema is not None
            for k, v in value.items():
                validate(schema.key_schema, k, where)
                validate(schema.value_schema, v, where)
    else:  # STRUCT
        ok = isinstance(value, Mapping)
        if ok:
            extra = set(value) - {f.name for f in schema.fields}
            if extra:
                raise DataError(f"{sorted(extra)[0]} is not a valid field name")
            for f in schema.fields:
                validate(f.schema, value.get(f.name), f.name)
    if not ok:
        raise DataError(f"Invalid Java object for schema with type {schema.type}: "
                        f"{type(value).__name__} for field: \"{where}\"")


def infer(value: Any) -> Schema | None:
    """A schema for a schemaless value where Connect can infer one (Values.inferSchema):
    None for null, a map or an empty list."""
    if value is None:
        return None
    if isinstance(value, bool):
        return Schema("BOOLEAN")
    if isinstance(value, int):
        return Schema("INT64") if not -(1 << 31) <= value < (1 << 31) else Schema("INT32")
    if isinstance(value, float):
        return Schema("FLOAT64")
    if isinstance(value, str):
        return Schema("STRING")
    if isinstance(value, bytes):
        return Schema("BYTES")
    return None


@dataclass
class SchemaCache:
    """Transforms that rebuild a schema (ReplaceField, Cast...) build it once per input."""

    entries: dict[Schema, Schema] = field(default_factory=dict)

    def get(self, schema: Schema, build: Any) -> Schema:
        found = self.entries.get(schema)
        if found is None:
            found = build(schema)
            if len(self.entries) > 256:
                self.entries.clear()
            self.entries[schema] = found
        return found
