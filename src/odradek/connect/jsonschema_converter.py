"""io.confluent.connect.json.JsonSchemaConverter: Connect data as JSON in Confluent's wire
format (magic byte 0, the schema's 4-byte registry id, the JSON text) with a JSON Schema in
the registry (`schemaType: JSON`), as Confluent's JsonSchemaData translates:

- INT8..INT64 are `{"type": "integer", "connect.type": "int32"}` (and so on), FLOAT32/64
  `number`, BYTES a base64 `string` with `connect.type: bytes`, Decimal a `number` with
  `connect.type: bytes` (its value base64 by default, `decimal.format=NUMERIC` a number);
- a STRUCT an `object` whose properties carry `connect.index` (their order), its name the
  `title`; a MAP with required STRING keys an object with `additionalProperties` (else an
  array of `{key, value}` objects), `connect.type: map`; an ARRAY `items`;
- an optional schema `{"oneOf": [{"type": "null"}, <schema>]}`; `connect.version`,
  `connect.parameters`, `description` (doc) and `default` ride along.

Reading takes the writer's schema by id and gives back that Connect schema; a JSON Schema
from elsewhere reads too where it maps (`integer` INT64, `number` FLOAT64, `enum` STRING,
an object without `connect.type` a STRUCT in property order); `allOf`, `$ref` and other
unions are refused with a DataError, never guessed.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from odradek.connect import data
from odradek.connect.avro_converter import RegistryClient
from odradek.connect.data import DataError, Schema
from odradek.connect.registry_wire import Cache, frame, split_wire

_INT_TYPES = {"INT8": "int8", "INT16": "int16", "INT32": "int32", "INT64": "int64"}
_FROM_CONNECT_TYPE = {"int8": "INT8", "int16": "INT16", "int32": "INT32", "int64": "INT64",
                      "float32": "FLOAT32", "float64": "FLOAT64"}
_LOGICAL = (data.DATE, data.TIME, data.TIMESTAMP)


# ---- Connect schema -> JSON Schema ------------------------------------------------------------
def to_json_schema(schema: Schema, index: int | None = None) -> dict[str, Any]:
    props: dict[str, Any] = {}
    out: dict[str, Any]
    if schema.type in _INT_TYPES:
        out = {"type": "integer"}
        props["connect.type"] = _INT_TYPES[schema.type]
    elif schema.type in ("FLOAT32", "FLOAT64"):
        out = {"type": "number"}
        props["connect.type"] = schema.type.lower()
    elif schema.type == "BOOLEAN":
        out = {"type": "boolean"}
    elif schema.type == "STRING":
        out = {"type": "string"}
    elif schema.type == "BYTES":
        out = {"type": "number" if schema.name == data.DECIMAL else "string"}
        props["connect.type"] = "bytes"
    elif schema.type == "ARRAY":
        assert schema.value_schema is not None
        out = {"type": "array", "items": to_json_schema(schema.value_schema)}
    elif schema.type == "MAP":
        assert schema.key_schema is not None and schema.value_schema is not None
        if schema.key_schema.type == "STRING" and not schema.key_schema.optional:
            out = {"type": "object",
                   "additionalProperties": to_json_schema(schema.value_schema)}
        else:
            out = {"type": "array", "items": {"type": "object", "properties": {
                "key": to_json_schema(schema.key_schema, 0),
                "value": to_json_schema(schema.value_schema, 1)}}}
        props["connect.type"] = "map"
    else:
        out = {"type": "object", "properties": {
            f.name: to_json_schema(f.schema, f.index) for f in schema.fields}}
    if schema.name is not None:
        out["title"] = schema.name
    if schema.version is not None:
        props["connect.version"] = schema.version
    if schema.doc is not None:
        out["description"] = schema.doc
    if schema.parameters:
        props["connect.parameters"] = dict(schema.parameters)
    if schema.default is not None:
        out["default"] = value_to_json(schema, schema.default, "BASE64")
    if schema.optional:
        wrapped: dict[str, Any] = {"oneOf": [{"type": "null"}, {**out, **props}]}
        if index is not None:
            wrapped["connect.index"] = index
        return wrapped
    if index is not None:
        props["connect.index"] = index
    return {**out, **props}


# ---- JSON Schema -> Connect schema ------------------------------------------------------------
def from_json_schema(js: Any, optional: bool = False) -> Schema:
    if js is True or js == {}:
        raise DataError("JsonSchemaConverter: a schema that allows anything has no Connect "
                        "schema")
    if not isinstance(js, dict):
        raise DataError(f"JsonSchemaConverter: not a JSON Schema: {js!r}")
    for unsupported in ("$ref", "allOf", "anyOf", "not", "if"):
        if unsupported in js:
            raise DataError(f"JsonSchemaConverter: '{unsupported}' is not read here")
    if "oneOf" in js:
        members = js["oneOf"]
        rest = [m for m in members if not (isinstance(m, dict) and m.get("type") == "null")]
        if len(rest) != 1:
            raise DataError("JsonSchemaConverter: only oneOf [null, T] is read here")
        return from_json_schema(rest[0], optional=optional or len(rest) < len(members))
    kind = js.get("type")
    if isinstance(kind, list):
        others = [k for k in kind if k != "null"]
        if len(others) != 1:
            raise DataError(f"JsonSchemaConverter: type {kind} is not read here")
        return from_json_schema({**js, "type": others[0]}, optional or "null" in kind)
    connect_type = js.get("connect.type")
    common: dict[str, Any] = {
        "optional": optional, "name": js.get("title"), "doc": js.get("description"),
        "version": js.get("connect.version"),
        "parameters": tuple(sorted((str(k), str(v)) for k, v in
                                   (js.get("connect.parameters") or {}).items()))}
    schema: Schema
    if "enum" in js:
        schema = Schema("STRING", **common)
    elif kind == "boolean":
        schema = Schema("BOOLEAN", **common)
    elif kind in ("integer", "number"):
        if connect_type == "bytes":
            schema = Schema("BYTES", **common)
        elif connect_type is not None:
            if connect_type not in _FROM_CONNECT_TYPE:
                raise DataError(f"Unsupported type {connect_type}")
            schema = Schema(_FROM_CONNECT_TYPE[connect_type], **common)
        else:
            schema = Schema("INT64" if kind == "integer" else "FLOAT64", **common)
    elif kind == "string":
        schema = Schema("BYTES" if connect_type == "bytes" else "STRING", **common)
    elif kind == "array":
        items = js.get("items")
        if items is None:
            raise DataError("Array schema did not specify the items type")
        if connect_type == "map" and isinstance(items, dict) and "properties" in items:
            schema = Schema("MAP", key_schema=from_json_schema(items["properties"]["key"]),
                            value_schema=from_json_schema(items["properties"]["value"]),
                            **common)
        else:
            schema = Schema("ARRAY", value_schema=from_json_schema(items), **common)
    elif kind == "object":
        if connect_type == "map":
            schema = Schema("MAP", key_schema=Schema("STRING"),
                            value_schema=from_json_schema(js.get("additionalProperties")),
                            **common)
        else:
            props = js.get("properties") or {}
            ordered = sorted(enumerate(props.items()), key=lambda item: (
                _index(item[1][1], item[0]), item[0]))
            fields = tuple(data.Field(name, i, from_json_schema(sub))
                           for i, (_, (name, sub)) in enumerate(ordered))
            schema = Schema("STRUCT", fields=fields, **common)
    else:
        raise DataError(f"JsonSchemaConverter: JSON Schema type {kind!r} is not read here")
    if js.get("default") is not None:
        return Schema(**{**schema.__dict__,
                         "default": value_from_json(schema, js["default"])})
    return schema


def _index(sub: Any, fallback: int) -> int:
    if isinstance(sub, dict) and isinstance(sub.get("connect.index"), int):
        return int(sub["connect.index"])
    return fallback


# ---- values -----------------------------------------------------------------------------------
def _unscaled(value: decimal.Decimal, scale: int) -> bytes:
    number = int(value.scaleb(scale).to_integral_value())
    size = max(1, (number.bit_length() + 8) // 8)
    return number.to_bytes(size, "big", signed=True)


def value_to_json(schema: Schema, value: Any, decimal_format: str) -> Any:
    if value is None:
        if schema.default is not None:
            return value_to_json(schema, schema.default, decimal_format)
        if schema.optional:
            return None
        raise DataError("Conversion error: null value for field that is required and has no "
                        "default value")
    if schema.name == data.DECIMAL:
        if decimal_format == "NUMERIC":
            return value  # json.dumps gets a Decimal: written by _dumps as a number
        scale = int(schema.params.get("scale", "0"))
        return base64.b64encode(_unscaled(value, scale)).decode()
    if schema.name == data.DATE:
        return (value - dt.date(1970, 1, 1)).days
    if schema.name == data.TIME:
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + \
            value.microsecond // 1000
    if schema.name == data.TIMESTAMP:
        aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
        return (aware - data.EPOCH) // dt.timedelta(milliseconds=1)
    if schema.type == "BYTES":
        return base64.b64encode(bytes(value)).decode()
    if schema.type == "ARRAY":
        assert schema.value_schema is not None
        return [value_to_json(schema.value_schema, v, decimal_format) for v in value]
    if schema.type == "MAP":
        assert schema.key_schema is not None and schema.value_schema is not None
        if schema.key_schema.type == "STRING" and not schema.key_schema.optional:
            return {k: value_to_json(schema.value_schema, v, decimal_format)
                    for k, v in value.items()}
        return [{"key": value_to_json(schema.key_schema, k, decimal_format),
                 "value": value_to_json(schema.value_schema, v, decimal_format)}
                for k, v in value.items()]
    if schema.type == "STRUCT":
        return {f.name: value_to_json(f.schema, value.get(f.name), decimal_format)
                for f in schema.fields}
    return value


def value_from_json(schema: Schema, obj: Any) -> Any:
    if obj is None:
        return schema.default if schema.default is not None else None
    try:
        if schema.name == data.DECIMAL:
            if isinstance(obj, str):
                scale = int(schema.params.get("scale", "0"))
                unscaled = int.from_bytes(base64.b64decode(obj), "big", signed=True)
                return decimal.Decimal(unscaled).scaleb(-scale)
            if isinstance(obj, int | float | decimal.Decimal) and not isinstance(obj, bool):
                return decimal.Decimal(str(obj))
            raise DataError("Invalid type for Decimal, underlying representation should be "
                            "numeric or bytes")
        if schema.name in _LOGICAL:
            if not isinstance(obj, int) or isinstance(obj, bool):
                raise DataError(f"Invalid type for {schema.name.rsplit('.', 1)[-1]}, "
                                "underlying representation should be integer")
            if schema.name == data.DATE:
                return dt.date(1970, 1, 1) + dt.timedelta(days=obj)
            if schema.name == data.TIME:
                return (dt.datetime.min + dt.timedelta(milliseconds=obj)).time()
            return data.EPOCH + dt.timedelta(milliseconds=obj)
        kind = schema.type
        if kind in data.INTEGER_BITS:
            if not isinstance(obj, int) or isinstance(obj, bool):
                raise DataError(f"Invalid type for {kind}: {type(obj).__name__}")
            return obj
        if kind in ("FLOAT32", "FLOAT64"):
            if not isinstance(obj, int | float | decimal.Decimal) or isinstance(obj, bool):
                raise DataError(f"Invalid type for {kind}: {type(obj).__name__}")
            return float(obj)
        if kind == "BOOLEAN":
            if not isinstance(obj, bool):
                raise DataError("Invalid type for BOOLEAN")
            return obj
        if kind == "STRING":
            if not isinstance(obj, str):
                raise DataError(f"Invalid type for STRING: {type(obj).__name__}")
            return obj
        if kind == "BYTES":
            return base64.b64decode(obj, validate=True)
        if kind == "ARRAY":
            assert schema.value_schema is not None
            return [value_from_json(schema.value_schema, v) for v in obj]
        if kind == "MAP":
            assert schema.key_schema is not None and schema.value_schema is not None
            if isinstance(obj, dict):
                return {k: value_from_json(schema.value_schema, v) for k, v in obj.items()}
            return {value_from_json(schema.key_schema, e["key"]):
                    value_from_json(schema.value_schema, e["value"]) for e in obj}
        if not isinstance(obj, dict):
            raise DataError("Structs should be encoded as JSON objects")
        return {f.name: value_from_json(f.schema, obj.get(f.name)) for f in schema.fields}
    except DataError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise DataError(f"Invalid value for {schema.type}: {exc}") from None


def _dumps(obj: Any) -> bytes:
    """JSON text; a Decimal (decimal.format=NUMERIC) is written as its exact number."""
    raws: list[str] = []

    def default(o: Any) -> Any:
        if isinstance(o, decimal.Decimal):
            raws.append(format(o, "f"))
            return f"\0{len(raws) - 1}\0"
        raise TypeError(f"{type(o).__name__} is not JSON")

    text = json.dumps(obj, separators=(",", ":"), default=default)
    for i, raw in enumerate(raws):
        text = text.replace(json.dumps(f"\0{i}\0"), raw, 1)
    return text.encode()


# ---- the converter ----------------------------------------------------------------------------
@dataclass
class JsonSchemaConverter:
    registry: RegistryClient
    is_key: bool = False
    auto_register: bool = True
    decimal_format: str = "BASE64"
    kind: str = "jsonschema"
    schemas: bool = True
    _ids: Cache[tuple[str, str], int] = field(default_factory=Cache)
    _readers: Cache[int, Schema] = field(default_factory=Cache)

    @classmethod
    def configure(cls, own: Mapping[str, str], is_key: bool) -> JsonSchemaConverter:
        urls, auto = RegistryClient.settings(own)
        fmt = own.get("decimal.format", "BASE64").strip().upper()
        if fmt not in ("BASE64", "NUMERIC"):
            raise ValueError(f"Invalid value {fmt} for configuration decimal.format: String "
                             "must be one of: BASE64, NUMERIC")
        return cls(RegistryClient(urls), is_key=is_key, auto_register=auto, decimal_format=fmt)

    def subject(self, topic: str) -> str:
        return f"{topic}-{'key' if self.is_key else 'value'}"

    def from_connect(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None and (schema is None or schema.optional):
            return None
        if schema is None:
            raise DataError("JsonSchemaConverter needs a schema: the value has none")
        data.validate(schema, value)
        text = json.dumps(to_json_schema(schema), separators=(",", ":"))
        subject = self.subject(topic)
        schema_id = self._ids.get((subject, text), lambda: self.registry.id_for(
            subject, text, "JSON", self.auto_register))
        return frame(schema_id, _dumps(value_to_json(schema, value, self.decimal_format)))

    def _reader(self, schema_id: int) -> Schema:
        info = self.registry.schema_info(schema_id)
        if info.get("schemaType", "AVRO") != "JSON":
            raise DataError(f"Schema {schema_id} is not a JSON Schema "
                            f"({info.get('schemaType', 'AVRO')})")
        try:
            return from_json_schema(json.loads(info["schema"]))
        except ValueError as exc:
            if isinstance(exc, DataError):
                raise
            raise DataError(f"Error retrieving JSON schema for id {schema_id}: {exc}") \
                from None

    def to_connect(self, topic: str, raw: bytes | None) -> tuple[Schema | None, Any]:
        if raw is None:
            return None, None
        schema_id, body = split_wire(raw)
        schema = self._readers.get(schema_id, lambda: self._reader(schema_id))
        try:
            obj = json.loads(body, parse_float=decimal.Decimal)
        except ValueError as exc:
            raise DataError(f"Converting byte[] to Kafka Connect data failed due to "
                            f"serialization error: {exc}") from None
        return schema, value_from_json(schema, obj)
