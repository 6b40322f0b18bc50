"""Cast: fields (`spec=f:int32,g:string`), or the whole key or value (`spec=int64`), to
another primitive type, as Kafka's Cast does.

Numbers narrow as Java's casts do (an int64 cast to int8 wraps; a float truncates toward
zero); a boolean is 1 or 0, a number is true when not 0; a string parses to a number or to
a boolean (`true`, any case, else false); anything primitive, a Decimal, a Date, Time or
Timestamp, and bytes (base64) cast to string. The fields' optionality is kept.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import math
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

TARGETS = {"int8": "INT8", "int16": "INT16", "int32": "INT32", "int64": "INT64",
           "float32": "FLOAT32", "float64": "FLOAT64", "boolean": "BOOLEAN",
           "string": "STRING"}
WHOLE = ""  # the spec's key for a cast of the whole key or value


def _wrap(number: int, bits: int) -> int:
    number &= (1 << bits) - 1
    return number - (1 << bits) if number >= 1 << (bits - 1) else number


def _truncate(value: float, bits: int) -> int:
    """Java's (long)/(int) of a double: toward zero, saturating, NaN is 0; narrower types
    go through int first and then wrap."""
    if math.isnan(value):
        return 0
    wide = 64 if bits == 64 else 32
    low, high = -(1 << (wide - 1)), (1 << (wide - 1)) - 1
    number = high if value >= high else low if value <= low else int(value)
    return number if bits >= 32 else _wrap(number, bits)


def java_double(value: float) -> str:
    """Double.toString: plain between 10^-3 and 10^7, else d.dddE<n>."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1, value) < 0 else "0.0"
    if 1e-3 <= abs(value) < 1e7:
        text = repr(value)
        return text if "." in text else text + ".0"
    # Shortest round-trip digits (repr's), laid out as d.dddE<n>.
    sign, digits, exponent = decimal.Decimal(repr(value)).normalize().as_tuple()
    text = "".join(map(str, digits))
    power = int(exponent) + len(text) - 1
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{power}"


def cast_value(value: Any, target: str) -> Any:
    if value is None:
        return None
    if target == "STRING":
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, float):
            return java_double(value)
        if isinstance(value, bytes | bytearray):
            return base64.b64encode(bytes(value)).decode()
        if isinstance(value, dt.datetime):
            return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.") + \
                f"{value.microsecond // 1000:03d}Z"
        if isinstance(value, dt.date | dt.time):
            return value.isoformat()
        if isinstance(value, int | str | decimal.Decimal):
            return str(value)
        raise DataError(f"Unexpected type in Cast transformation: {type(value).__name__}")
    if isinstance(value, str):
        text = value.strip()
        if target == "BOOLEAN":
            return text.lower() == "true"
        try:
            if target in ("FLOAT32", "FLOAT64"):
                return float(text)
            return _wrap_check(int(text), target)
        except ValueError:
            raise DataError(f"Value ({value}) was out of range for requested data type or "
                            f"not a number: {target}") from None
    if isinstance(value, bool):
        if target == "BOOLEAN":
            return value
        number: Any = int(value)
        return float(number) if target.startswith("FLOAT") else number
    if isinstance(value, int | float | decimal.Decimal):
        if target == "BOOLEAN":
            return value != 0
        if target in ("FLOAT32", "FLOAT64"):
            return float(value)
        bits = data.INTEGER_BITS[target]
        if isinstance(value, int):
            return _wrap(value, bits)
        return _truncate(float(value), bits)
    raise DataError(f"Unexpected type in Cast transformation: {type(value).__name__}")


def _wrap_check(number: int, target: str) -> int:
    bits = data.INTEGER_BITS[target]
    if not -(1 << (bits - 1)) <= number < (1 << (bits - 1)):
        raise ValueError(number)
    return number


class Cast(Transformation):
    PURPOSE = "cast types"
    settings = (Setting("spec", None, lambda raw: None if as_list(raw) else
                        "Must specify at least one field to cast."),
                Setting("replace.null.with.default", "true"))

    def configure(self) -> None:
        self.casts: dict[str, str] = {}
        for item in as_list(self.config["spec"]):
            name, sep, kind = item.rpartition(":")
            target = TARGETS.get(kind.strip().lower())
            if target is None:
                raise ConfigError(f"Invalid value {self.config['spec']} for configuration "
                                  f"spec: Invalid type found in casting spec: {kind.strip()}")
            if not sep and len(as_list(self.config["spec"])) > 1:
                raise ConfigError(f"Invalid value {self.config['spec']} for configuration "
                                  "spec: Cast transformations that specify a type to cast the "
                                  "entire value to may only specify a single cast in their "
                                  "spec")
            self.casts[name.strip() if sep else WHOLE] = target
        self.cache = SchemaCache()

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        schema = self.operating_schema(record)
        value = self.operating_value(record)
        if WHOLE in self.casts:
            target = self.casts[WHOLE]
            if schema is not None and schema.type not in data.PRIMITIVES:
                raise DataError(f"Cast transformation does not support casting to/from "
                                f"{schema.type}")
            new_schema = None if schema is None else Schema(target, optional=schema.optional)
            return self.with_operating(record, new_schema, cast_value(value, target))
        if value is None:
            return record
        if schema is None:
            out = dict(require_map(value, self.PURPOSE))
            for name, target in self.casts.items():
                if name in out:
                    out[name] = cast_value(out[name], target)
            return self.with_operating(record, None, out)
        struct = require_struct(schema, value, self.PURPOSE)

        def build(base: Schema) -> Schema:
            fields = []
            for f in base.fields:
                target = self.casts.get(f.name)
                if target is None:
                    fields.append((f.name, f.schema))
                    continue
                if f.schema.type not in data.PRIMITIVES:
                    raise DataError(f"Cast transformation does not support casting to/from "
                                    f"{f.schema.type}")
                fields.append((f.name, Schema(target, optional=f.schema.optional)))
            return data.struct(fields, name=base.name, optional=base.optional,
                               version=base.version, doc=base.doc)

        new_schema = self.cache.get(schema, build)
        out = {f.name: (cast_value(struct.get(f.name), self.casts[f.name])
                        if f.name in self.casts else struct.get(f.name))
               for f in new_schema.fields}
        return self.with_operating(record, replace(new_schema), out)
