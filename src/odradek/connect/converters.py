"""`key.converter` / `value.converter`: Kafka's class names, resolved from the connector's
config over the worker's (`value.converter.schemas.enable`,
`value.converter.schema.registry.url` and the like ride along under the converter's prefix).

Each converter turns a record's bytes into Connect data, `(schema, value)`, and back
(`to_connect`, `from_connect`), as Kafka's Converter interface does:

- StringConverter: an optional STRING; writes any value's text.
- ByteArrayConverter: an optional BYTES; writes bytes only.
- JsonConverter: with `schemas.enable` (true by default) the `{"schema", "payload"}`
  envelope in Kafka's JSON schema format, with Connect's logical types (Decimal as base64,
  Date, Time, Timestamp as numbers); without it plain JSON and no schema.
- io.confluent.connect.avro.AvroConverter (`avro_converter`), JsonSchemaConverter
  (`jsonschema_converter`) and ProtobufConverter (`protobuf_converter`): Confluent's wire
  formats against a Schema Registry.

A converter we do not implement is refused by validation, never replaced with another.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from odradek.connect import data
from odradek.connect.data import DataError, Schema

STRING = "org.apache.kafka.connect.storage.StringConverter"
BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"
JSON = "org.apache.kafka.connect.json.JsonConverter"
AVRO = "io.confluent.connect.avro.AvroConverter"
JSON_SCHEMA = "io.confluent.connect.json.JsonSchemaConverter"
PROTOBUF = "io.confluent.connect.protobuf.ProtobufConverter"
REGISTRY_BASED = (AVRO, JSON_SCHEMA, PROTOBUF)
KNOWN = (STRING, BYTES, JSON, *REGISTRY_BASED)
# What connect-distributed.properties ships with.
WORKER_DEFAULTS = {"key.converter": JSON, "value.converter": JSON,
                   "key.converter.schemas.enable": "true",
                   "value.converter.schemas.enable": "true"}
ENVELOPE_ERROR = ("JsonConverter with schemas.enable requires \"schema\" and \"payload\" fields "
                  "and may not contain additional fields. If you are trying to deserialize "
                  "plain JSON data, set schemas.enable=false in your converter configuration.")


class Converter(Protocol):
    kind: str  # string | bytes | json | avro: the Spark fast paths look at it

    def to_connect(self, topic: str, raw: bytes | None) -> tuple[Schema | None, Any]: ...

    def from_connect(self, topic: str, schema: Schema | None, value: Any) -> bytes | None: ...


@dataclass(frozen=True)
class StringConverter:
    kind: str = "string"
    schemas: bool = False

    def to_connect(self, topic: str, raw: bytes | None) -> tuple[Schema | None, Any]:
        if raw is None:
            return data.OPTIONAL_STRING, None
        return data.OPTIONAL_STRING, raw.decode()

    def from_connect(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        return None if value is None else text_of(value).encode()


@dataclass(frozen=True)
class ByteArrayConverter:
    kind: str = "bytes"
    schemas: bool = False

    def to_connect(self, topic: str, raw: bytes | None) -> tuple[Schema | None, Any]:
        return data.OPTIONAL_BYTES, raw

    def from_connect(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if schema is not None and schema.type != "BYTES":
            raise DataError(f"Invalid schema type for ByteArrayConverter: {schema.type}")
        if value is not None and not isinstance(value, bytes | bytearray):
            raise DataError(f"ByteArrayConverter is not compatible with objects of type "
                            f"{type(value).__name__}")
        return None if value is None else bytes(value)


@dataclass(frozen=True)
class JsonConverter:
    schemas: bool = True
    kind: str = "json"

    def to_connect(self, topic: str, raw: bytes | None) -> tuple[Schema | None, Any]:
        if raw is None:
            return None, None
        try:
            obj = json.loads(raw)
        except ValueError as exc:
            raise DataError(f"Converting byte[] to Kafka Connect data failed due to "
                            f"serialization error: {exc}") from None
        if not self.schemas:
            return None, obj
        if not (isinstance(obj, dict) and set(obj) == {"schema", "payload"}):
            raise DataError(ENVELOPE_ERROR)
        if obj["schema"] is None:
            return None, obj["payload"]
        schema = schema_from_json(obj["schema"])
        return schema, value_from_json(schema, obj["payload"])

    def from_connect(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None and schema is None:
            return None  # a tombstone stays one
        payload = value_to_json(schema, value)
        if not self.schemas:
            out: Any = payload
        else:
            out = {"schema": None if schema is None else schema_to_json(schema),
                   "payload": payload}
        return json.dumps(out, separators=(",", ":")).encode()

    # The quickstart's fast path (FileStreamSource): a STRING value's bytes.
    def from_text(self, text: str | None) -> bytes | None:
        return self.from_connect("", Schema("STRING"), text) if text is not None else None


# ---- Kafka's JSON schema format ---------------------------------------------------------
_JSON_TYPES = {"int8": "INT8", "int16": "INT16", "int32": "INT32", "int64": "INT64",
               "float": "FLOAT32", "double": "FLOAT64", "boolean": "BOOLEAN",
               "string": "STRING", "bytes": "BYTES", "array": "ARRAY", "map": "MAP",
               "struct": "STRUCT"}
_TYPE_NAMES = {v: k for k, v in _JSON_TYPES.items()}


def schema_from_json(obj: Any) -> Schema:
    if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
        raise DataError("Schema must contain 'type' field")
    kind = _JSON_TYPES.get(obj["type"])
    if kind is None:
        raise DataError(f"Unknown schema type: {obj['type']}")
    params = obj.get("parameters") or {}
    if not isinstance(params, dict):
        raise DataError("Schema parameters must be a JSON object")
    for key in ("name", "doc"):
        if obj.get(key) is not None and not isinstance(obj[key], str):
            raise DataError(f"Schema {key} must be a string")
    version = obj.get("version")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        raise DataError("Schema version must be an integer")
    common: dict[str, Any] = {
        "optional": bool(obj.get("optional", False)), "name": obj.get("name"),
        "version": obj.get("version"), "doc": obj.get("doc"),
        "parameters": tuple(sorted((str(k), str(v)) for k, v in params.items()))}
    if kind == "STRUCT":
        fields = obj.get("fields")
        if not isinstance(fields, list):
            raise DataError("Struct schema's \"fields\" argument is not an array.")
        built = []
        for i, f in enumerate(fields):
            if not isinstance(f, dict) or not isinstance(f.get("field"), str):
                raise DataError("Struct schema's field name not specified properly")
            built.append(data.Field(f["field"], i, schema_from_json(f)))
        schema = Schema("STRUCT", fields=tuple(built), **common)
    elif kind == "ARRAY":
        if "items" not in obj:
            raise DataError("Array schema did not specify the element type")
        schema = Schema("ARRAY", value_schema=schema_from_json(obj["items"]), **common)
    elif kind == "MAP":
        if "keys" not in obj or "values" not in obj:
            raise DataError("Map schema did not specify the key and value types")
        schema = Schema("MAP", key_schema=schema_from_json(obj["keys"]),
                        value_schema=schema_from_json(obj["values"]), **common)
    else:
        schema = Schema(kind, **common)
    if "default" in obj and obj["default"] is not None:
        return Schema(**{**schema.__dict__, "default": value_from_json(schema, obj["default"])})
    return schema


def schema_to_json(schema: Schema) -> dict[str, Any]:
    out: dict[str, Any] = {"type": _TYPE_NAMES[schema.type]}
    if schema.type == "STRUCT":
        out["fields"] = [{**schema_to_json(f.schema), "field": f.name} for f in schema.fields]
    elif schema.type == "ARRAY":
        assert schema.value_schema is not None
        out["items"] = schema_to_json(schema.value_schema)
    elif schema.type == "MAP":
        assert schema.key_schema is not None and schema.value_schema is not None
        out["keys"] = schema_to_json(schema.key_schema)
        out["values"] = schema_to_json(schema.value_schema)
    out["optional"] = schema.optional
    if schema.name is not None:
        out["name"] = schema.name
    if schema.version is not None:
        out["version"] = schema.version
    if schema.doc is not None:
        out["doc"] = schema.doc
    if schema.parameters:
        out["parameters"] = dict(schema.parameters)
    if schema.default is not None:
        out["default"] = value_to_json(schema, schema.default)
    return out


def _unscaled(value: decimal.Decimal, scale: int) -> bytes:
    number = int(value.scaleb(scale).to_integral_value())
    size = max(1, (number.bit_length() + 8) // 8)
    return number.to_bytes(size, "big", signed=True)


def value_from_json(schema: Schema | None, obj: Any) -> Any:
    if schema is None or obj is None:
        if obj is None and schema is not None and not schema.optional:
            if schema.default is not None:
                return schema.default
            raise DataError(f"Invalid null value for required {schema.type} field")
        return obj
    name, kind = schema.name, schema.type
    try:
        if name == data.DECIMAL:
            scale = int(schema.params.get("scale", "0"))
            if isinstance(obj, str):
                unscaled = int.from_bytes(base64.b64decode(obj), "big", signed=True)
                return decimal.Decimal(unscaled).scaleb(-scale)
            return decimal.Decimal(str(obj))
        if name == data.DATE:
            return dt.date(1970, 1, 1) + dt.timedelta(days=int(obj))
        if name == data.TIME:
            return (dt.datetime.min + dt.timedelta(milliseconds=int(obj))).time()
        if name == data.TIMESTAMP:
            return data.EPOCH + dt.timedelta(milliseconds=int(obj))
        if kind in data.INTEGER_BITS:
            if not isinstance(obj, int | float) or isinstance(obj, bool):
                raise DataError(f"Invalid type for {kind}: {type(obj).__name__}")
            # Jackson's numberValue().byteValue()/shortValue()/...: Java's narrowing
            bits = data.INTEGER_BITS[kind]
            number = int(obj) & ((1 << bits) - 1)
            return number - (1 << bits) if number >= 1 << (bits - 1) else number
        if kind in ("FLOAT32", "FLOAT64"):
            if not isinstance(obj, int | float) or isinstance(obj, bool):
                raise DataError(f"Invalid type for {kind}: {type(obj).__name__}")
            return float(obj)
        if kind == "BOOLEAN":
            if not isinstance(obj, bool):
                raise DataError(f"Invalid type for BOOLEAN: {type(obj).__name__}")
            return obj
        if kind == "STRING":
            if not isinstance(obj, str):
                raise DataError(f"Invalid type for STRING: {type(obj).__name__}")
            return obj
        if kind == "BYTES":
            return base64.b64decode(obj)
        if kind == "ARRAY":
            return [value_from_json(schema.value_schema, item) for item in obj]
        if kind == "MAP":
            assert schema.key_schema is not None
            if schema.key_schema.type == "STRING":
                return {k: value_from_json(schema.value_schema, v) for k, v in obj.items()}
            return {value_from_json(schema.key_schema, k): value_from_json(
                schema.value_schema, v) for k, v in obj}
        if not isinstance(obj, dict):
            raise DataError(f"Invalid type for STRUCT: {type(obj).__name__}")
        return {f.name: value_from_json(f.schema, obj.get(f.name)) for f in schema.fields}
    except (TypeError, ValueError, AttributeError, decimal.InvalidOperation) as exc:
        if isinstance(exc, DataError):
            raise
        raise DataError(f"Invalid value for {kind}: {exc}") from None


def value_to_json(schema: Schema | None, value: Any) -> Any:
    if value is None:
        return None
    if schema is None:
        return _schemaless_json(value)
    data.validate(schema, value)
    name, kind = schema.name, schema.type
    if name == data.DECIMAL:
        return base64.b64encode(_unscaled(value, int(schema.params.get("scale", "0")))).decode()
    if name == data.DATE:
        return (value - dt.date(1970, 1, 1)).days
    if name == data.TIME:
        return (value.hour * 3600 + value.minute * 60 + value.second) * 1000 + \
            value.microsecond // 1000
    if name == data.TIMESTAMP:
        return epoch_millis(value)
    if kind == "BYTES":
        return base64.b64encode(value).decode()
    if kind == "ARRAY":
        return [value_to_json(schema.value_schema, item) for item in value]
    if kind == "MAP":
        assert schema.key_schema is not None
        if schema.key_schema.type == "STRING":
            return {k: value_to_json(schema.value_schema, v) for k, v in value.items()}
        return [[value_to_json(schema.key_schema, k), value_to_json(schema.value_schema, v)]
                for k, v in value.items()]
    if kind == "STRUCT":
        return {f.name: value_to_json(f.schema, value.get(f.name)) for f in schema.fields}
    return value


def _schemaless_json(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, dt.datetime):
        return epoch_millis(value)
    if isinstance(value, dict):
        return {str(k): _schemaless_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_schemaless_json(v) for v in value]
    return value


def epoch_millis(value: dt.datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return (value - data.EPOCH) // dt.timedelta(milliseconds=1)


# ---- resolving a converter from configs -------------------------------------------------
def settings_of(which: str, connector: Mapping[str, str],
                worker: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """The converter's class and its own settings (the `<which>.` prefix dropped)."""
    source = connector if which in connector else worker
    name = source.get(which, JSON).strip()
    prefix = which + "."
    own = {k[len(prefix):]: v for k, v in source.items() if k.startswith(prefix)}
    return name, own


def class_errors(which: str, connector: Mapping[str, str],
                 worker: Mapping[str, str] = WORKER_DEFAULTS) -> list[str]:
    """What validation says of a converter setting (Kafka's words for a missing class)."""
    name, own = settings_of(which, connector, worker)
    if name not in KNOWN:
        return [f"Invalid value {name} for configuration {which}: Class {name} could not be "
                f"found."]
    if name in REGISTRY_BASED and not own.get("schema.registry.url", "").strip():
        return [f'{which}: Missing required configuration "schema.registry.url" which has no '
                f"default value."]
    return []


def resolve(which: str, connector: Mapping[str, str],
            worker: Mapping[str, str] = WORKER_DEFAULTS) -> Any:
    """`which` is "key.converter" or "value.converter"; ValueError for a class not here."""
    errors = class_errors(which, connector, worker)
    if errors:
        raise ValueError(errors[0])
    name, own = settings_of(which, connector, worker)
    if name == STRING:
        return StringConverter()
    if name == BYTES:
        return ByteArrayConverter()
    if name == AVRO:
        from odradek.connect.avro_converter import AvroConverter

        return AvroConverter.configure(own, is_key=which == "key.converter")
    if name == JSON_SCHEMA:
        from odradek.connect.jsonschema_converter import JsonSchemaConverter

        return JsonSchemaConverter.configure(own, is_key=which == "key.converter")
    if name == PROTOBUF:
        from odradek.connect.protobuf_converter import ProtobufConverter

        return ProtobufConverter.configure(own, is_key=which == "key.converter")
    return JsonConverter(own.get("schemas.enable", "true").strip().lower() == "true")


def text_of(value: Any) -> str:
    """How a sink that writes text (FileStreamSink) prints a value: Kafka prints the value's
    toString; a JSON value other than a string is printed as its JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return json.dumps(_schemaless_json(value), separators=(",", ":"), default=str)
