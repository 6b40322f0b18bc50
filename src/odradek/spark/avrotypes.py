"""The Spark type of an Avro reader schema, and a fix-up for the few values fastavro returns
in a shape Arrow does not take (uuid.UUID for logicalType uuid).

The mapping follows Spark's own `from_avro`: records are structs, enums strings, fixed and
bytes binary, maps map<string, V>, ["null", T] a nullable T; timestamp-millis/micros are
timestamps, local-timestamp-* timestamp_ntz, date dates, decimal decimals. Unions of several
non-null types and time-* logical types are refused when the codec is built, not per record.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from odradek.spark.avro import Schema, SchemaError, _named

_PRIMITIVE: dict[str, DataType] = {
    "boolean": BooleanType(), "int": IntegerType(), "long": LongType(), "float": FloatType(),
    "double": DoubleType(), "bytes": BinaryType(), "string": StringType(),
}
_LOGICAL: dict[str, DataType] = {
    "timestamp-millis": TimestampType(), "timestamp-micros": TimestampType(),
    "local-timestamp-millis": TimestampNTZType(), "local-timestamp-micros": TimestampNTZType(),
    "date": DateType(), "uuid": StringType(),
}

Fix = Callable[[Any], Any] | None


def spark_type(schema: Schema) -> StructType:
    """The StructType a record schema decodes to (every field nullable: a union may make it so,
    and a bad record's whole struct is null)."""
    names: dict[str, Any] = {}
    _named(schema, names)
    dt, _ = _convert(schema, names, ())
    if not isinstance(dt, StructType):
        raise SchemaError("the Avro schema must be a record")
    return dt


def value_fixer(schema: Schema) -> Fix:
    """A function applied to each decoded record, or None when none is needed."""
    names: dict[str, Any] = {}
    _named(schema, names)
    return _convert(schema, names, ())[1]


def _convert(s: Any, names: dict[str, Any], stack: tuple[str, ...]) -> tuple[DataType, Fix]:
    if isinstance(s, str):
        if s in _PRIMITIVE:
            return _PRIMITIVE[s], None
        if s == "null":
            raise SchemaError("a bare 'null' type has no Spark column type")
        if s not in names:
            raise SchemaError(f"unknown Avro type name {s!r}")
        return _convert(names[s], names, stack)
    if isinstance(s, list):
        branches = [b for b in s if b != "null"]
        if len(branches) != 1:
            raise SchemaError(f"union {s!r}: only [\"null\", T] unions map to a Spark column")
        return _convert(branches[0], names, stack)
    kind = s.get("type")
    logical = s.get("logicalType")
    if logical in ("time-millis", "time-micros"):
        raise SchemaError(f"logicalType {logical!r} has no Spark column type here")
    if logical == "decimal" and kind in ("bytes", "fixed"):
        return DecimalType(int(s["precision"]), int(s.get("scale", 0))), None
    if logical in _LOGICAL:
        return _LOGICAL[logical], (str if logical == "uuid" else None)
    if isinstance(kind, (dict, list)):
        return _convert(kind, names, stack)
    if kind in _PRIMITIVE:
        return _PRIMITIVE[kind], None
    if kind == "enum":
        return StringType(), None
    if kind == "fixed":
        return BinaryType(), None
    if kind == "array":
        item, fix = _convert(s["items"], names, stack)
        return ArrayType(item, True), (None if fix is None else _each(fix))
    if kind == "map":
        value, fix = _convert(s["values"], names, stack)
        return MapType(StringType(), value, True), (None if fix is None else _values(fix))
    if kind in ("record", "error"):
        name = s["name"]
        if name in stack:
            raise SchemaError(f"recursive record {name!r} has no Spark column type")
        fields: list[StructField] = []
        fixes: dict[str, Callable[[Any], Any]] = {}
        for f in s["fields"]:
            dt, fix = _convert(f["type"], names, (*stack, name))
            fields.append(StructField(f["name"], dt, True))
            if fix is not None:
                fixes[f["name"]] = fix
        return StructType(fields), (_fields(fixes) if fixes else None)
    raise SchemaError(f"unsupported Avro type {s!r}")


def _each(fix: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda v: None if v is None else [None if x is None else fix(x) for x in v]


def _values(fix: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda v: None if v is None else {k: None if x is None else fix(x) for k, x in v.items()}


def _fields(fixes: dict[str, Callable[[Any], Any]]) -> Callable[[Any], Any]:
    def apply(rec: Any) -> Any:
        if rec is None:
            return None
        for name, fix in fixes.items():
            if rec.get(name) is not None:
                rec[name] = fix(rec[name])
        return rec
    return apply
