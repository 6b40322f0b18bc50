"""TimestampConverter$Key / $Value: a timestamp (the whole key or value, or its `field`)
between Unix time, a string in a SimpleDateFormat `format`, and Connect's Date, Time and
Timestamp, as Kafka's transform does.

Every conversion goes through milliseconds since the epoch in UTC, as Kafka's goes through a
java.util.Date: `unix.precision` microseconds or nanoseconds lose what is below a
millisecond (Kafka says so too), seconds drop the milliseconds; Date keeps the UTC day, Time
the time of day. The input's kind comes from its schema (Timestamp, Date, Time, STRING as
the format, INT64 as Unix time) or, schemaless, from the value (a datetime is a Timestamp,
an int Unix time, a str the format). Python's values stand for Java's: a Timestamp is an
aware datetime, a Date a date, a Time a time.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from odradek.connect import data
from odradek.connect.data import ConnectRecord, DataError, Schema, SchemaCache
from odradek.connect.transforms.base import (
    ConfigError,
    Setting,
    Transformation,
    require_map,
)
from odradek.connect.transforms.simple_date_format import PatternError, SimpleDateFormat

STRING, UNIX, DATE, TIME, TIMESTAMP = "string", "unix", "Date", "Time", "Timestamp"
TYPES = (STRING, UNIX, DATE, TIME, TIMESTAMP)
PRECISIONS = ("nanoseconds", "microseconds", "milliseconds", "seconds")
PURPOSE = "converting timestamp formats"
_DAY_MS = 86_400_000


def _one_of(options: tuple[str, ...]) -> Any:
    return lambda raw: None if raw in options else f"String must be one of: {', '.join(options)}"


def _java_div(a: int, b: int) -> int:
    """Java's long division (TimeUnit's conversions): toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def type_schema(kind: str, optional: bool) -> Schema:
    if kind == STRING:
        return Schema("STRING", optional=optional)
    if kind == UNIX:
        return Schema("INT64", optional=optional)
    name = {DATE: data.DATE, TIME: data.TIME, TIMESTAMP: data.TIMESTAMP}[kind]
    return Schema("INT32" if kind != TIMESTAMP else "INT64", optional=optional, name=name,
                  version=1)


def kind_of_schema(schema: Schema) -> str:
    if schema.name == data.TIMESTAMP:
        return TIMESTAMP
    if schema.name == data.DATE:
        return DATE
    if schema.name == data.TIME:
        return TIME
    if schema.type == "STRING":
        return STRING
    if schema.type == "INT64":
        return UNIX
    raise DataError(f"Schema {schema.type}{' ' + schema.name if schema.name else ''} does not "
                    "correspond to a known timestamp type format")


def kind_of_value(value: Any) -> str:
    if isinstance(value, dt.date | dt.time):
        return TIMESTAMP  # Java's Date, Time and Timestamp are one java.util.Date
    if isinstance(value, int) and not isinstance(value, bool):
        return UNIX
    if isinstance(value, str):
        return STRING
    raise DataError(f"TimestampConverter does not support {type(value).__name__} objects as "
                    "timestamps")


class TimestampConverter(Transformation):
    settings = (
        Setting("field", ""),
        Setting("target.type", None, _one_of(TYPES)),
        Setting("format", ""),
        Setting("unix.precision", "milliseconds", _one_of(PRECISIONS)),
    )

    def configure(self) -> None:
        self.field = self.config["field"]
        self.target = self.config["target.type"]
        self.precision = self.config["unix.precision"]
        pattern = self.config["format"]
        if self.target == STRING and not pattern.strip():
            raise ConfigError("TimestampConverter requires format option to be specified when "
                              "using string timestamps")
        self.format: SimpleDateFormat | None = None
        if pattern.strip():
            try:
                self.format = SimpleDateFormat(pattern)
            except PatternError as exc:
                raise ConfigError(f"Invalid value {pattern} for configuration format: "
                                  f"TimestampConverter requires a SimpleDateFormat-compatible "
                                  f"pattern for string timestamps: {exc}") from None
        self.cache = SchemaCache()

    # ---- the universal form: milliseconds since the epoch ----------------------------------
    def to_raw(self, kind: str, value: Any) -> int:
        if kind == STRING:
            if not isinstance(value, str):
                raise DataError(f"Expected string timestamp to be a String, but found "
                                f"{type(value).__name__}")
            if self.format is None:
                raise DataError("TimestampConverter requires format option to be specified "
                                "when reading string timestamps")
            millis = self.format.parse(value)
            if millis is None:
                raise DataError(f"Could not parse timestamp: value ({value}) does not match "
                                f"pattern ({self.format.pattern})")
            return millis
        if kind == UNIX:
            if not isinstance(value, int) or isinstance(value, bool):
                raise DataError(f"Expected Unix timestamp to be a Long, but found "
                                f"{type(value).__name__}")
            if self.precision == "seconds":
                return value * 1000
            if self.precision == "microseconds":
                return _java_div(value, 1000)
            if self.precision == "nanoseconds":
                return _java_div(value, 1_000_000)
            return value
        if isinstance(value, dt.datetime):
            aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
            return (aware - data.EPOCH) // dt.timedelta(milliseconds=1)
        if isinstance(value, dt.date):
            return (value - dt.date(1970, 1, 1)).days * _DAY_MS
        if isinstance(value, dt.time):
            return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + \
                value.microsecond // 1000
        raise DataError(f"Expected {kind} to be a java.util.Date, but found "
                        f"{type(value).__name__}")

    def to_type(self, millis: int) -> Any:
        if self.target == STRING:
            assert self.format is not None
            return self.format.format(millis)
        if self.target == UNIX:
            if self.precision == "seconds":
                return _java_div(millis, 1000)
            if self.precision == "microseconds":
                return millis * 1000
            if self.precision == "nanoseconds":
                return millis * 1_000_000
            return millis
        if self.target == DATE:
            return dt.date(1970, 1, 1) + dt.timedelta(days=millis // _DAY_MS)
        if self.target == TIME:
            return (dt.datetime.min + dt.timedelta(milliseconds=millis % _DAY_MS)).time()
        return data.EPOCH + dt.timedelta(milliseconds=millis)

    def convert(self, value: Any, kind: str | None) -> Any:
        if value is None:
            return None
        return self.to_type(self.to_raw(kind or kind_of_value(value), value))

    # ---- records ---------------------------------------------------------------------------
    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        schema = self.operating_schema(record)
        value = self.operating_value(record)
        if schema is None:
            if value is None or not self.field:
                return self.with_operating(record, None, self.convert(value, None))
            out = dict(require_map(value, PURPOSE))
            out[self.field] = self.convert(out.get(self.field), None)
            return self.with_operating(record, None, out)
        if not self.field:
            return self.with_operating(record, type_schema(self.target, schema.optional),
                                       self.convert(value, kind_of_schema(schema)))
        if value is not None and (schema.type != "STRUCT" or not isinstance(value, dict)):
            raise DataError(f"Only Struct objects supported for [{PURPOSE}], found: "
                            f"{type(value).__name__}")
        if schema.type != "STRUCT":
            raise DataError(f"Only Struct objects supported for [{PURPOSE}], found: null")

        def build(base: Schema) -> Schema:
            fields = [(f.name, type_schema(self.target, f.schema.optional)
                       if f.name == self.field else f.schema) for f in base.fields]
            return data.struct(fields, name=base.name, optional=base.optional,
                               version=base.version, doc=base.doc)

        new_schema = self.cache.get(schema, build)
        if value is None:
            return self.with_operating(record, new_schema, None)
        out = {}
        for f in schema.fields:
            item = value.get(f.name)
            if item is None and f.schema.default is not None:
                item = f.schema.default  # Struct.get gives the field's default for a null
            out[f.name] = self.convert(item, kind_of_schema(f.schema)) \
                if f.name == self.field else value.get(f.name)
        return self.with_operating(record, new_schema, out)
