"""JSON and Protobuf values in the Confluent wire format, read against a Schema Registry.

    magic byte 0 | 4-byte big-endian schema id | JSON text
    magic byte 0 | 4-byte big-endian schema id | message indexes | Protobuf message

Pure codecs, no Spark session needed: `decode(bytes) -> dict` raises only `DecodeError`;
`spark_type` is the column type the records are shaped to. A codec pickles (caches and parsed
descriptors are rebuilt on the worker).

- JsonCodec: the writer's JSON Schema is fetched by id; the document is validated against it
  (as confluent-kafka's JSONDeserializer does) unless `validate=False`. The Spark type is the
  one given, or derived from the subject's latest JSON Schema (object -> struct, string, integer
  -> long, number -> double, boolean, array -> array; anything else -> a JSON string).
- ProtobufCodec: the writer's descriptor is fetched by id (`format=serialized`, references
  followed), the message picked by the message indexes; fields are read into the reader shape:
  the subject's latest schema (or `message`, a full name in it).
"""

from __future__ import annotations

import base64
import importlib
import json
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from odradek.protocol.errors import ProtocolError
from odradek.protocol.primitives import decode_varint, encode_varint
from odradek.spark.avro import DecodeError, frame, unframe
from odradek.spark.registry_client import RegistryClient, RegistryRefused, RegistryUnavailable

_JSON_TYPES: dict[str, DataType] = {"string": StringType(), "integer": LongType(),
                                    "number": DoubleType(), "boolean": BooleanType()}


def _json_spark_type(schema: Any, depth: int = 0) -> DataType:
    if depth > 50 or not isinstance(schema, dict):
        return StringType()
    kind = schema.get("type")
    if isinstance(kind, list):  # ["string", "null"]: the one non-null type, else JSON text
        rest = [k for k in kind if k != "null"]
        kind = rest[0] if len(rest) == 1 else None
    if kind == "object" or (kind is None and "properties" in schema):
        return StructType([StructField(name, _json_spark_type(sub, depth + 1), True)
                           for name, sub in (schema.get("properties") or {}).items()])
    if kind == "array":
        return ArrayType(_json_spark_type(schema.get("items", {}), depth + 1), True)
    return _JSON_TYPES.get(str(kind), StringType())


def _fetch(registry: RegistryClient, call: Any, *args: Any) -> Any:
    try:
        return call(*args)
    except RegistryRefused as exc:
        raise DecodeError(f"schema registry: {exc}") from None
    except RegistryUnavailable:
        raise  # not the record's fault: the query fails, the record is not dead-lettered


class JsonCodec:
    """Read (and write) one subject's JSON. `json_schema` is the schema records are written
    with (Confluent's serializer settings `auto_register`, `use_latest_version` decide its id);
    the Spark type is `schema`, else derived from `json_schema`, else from the latest version."""

    def __init__(self, registry: RegistryClient, schema: StructType | None = None, *,
                 subject: str | None = None, validate: bool = True,
                 json_schema: dict[str, Any] | None = None, auto_register: bool = True,
                 use_latest_version: bool = False) -> None:
        self.registry = registry
        self.subject = subject
        self.validate = validate
        self.json_schema = json_schema
        self.auto_register = auto_register
        self.use_latest_version = use_latest_version
        self._write_id: int | None = None
        if schema is None:
            if json_schema is None:
                if not subject:
                    raise ValueError("JsonCodec needs a Spark schema, a JSON Schema or a "
                                     "subject to derive it from")
                latest = registry.latest(subject)
                if latest.schema_type != "JSON":
                    raise ValueError(f"the latest schema of {subject} is {latest.schema_type}")
                json_schema_doc = json.loads(latest.schema)
            else:
                json_schema_doc = json_schema
            schema_type = _json_spark_type(json_schema_doc)
            if not isinstance(schema_type, StructType):
                raise ValueError("the JSON Schema is not an object schema")
            schema = schema_type
        self.spark_type = schema
        self._validators: dict[int, Any] = {}

    def schema_id(self) -> int:
        """The id records are written with, asked once (on the driver)."""
        if self._write_id is None:
            if not self.subject:
                raise ValueError("writing needs a subject")
            if self.use_latest_version:
                self._write_id = self.registry.latest(self.subject).schema_id
            elif self.json_schema is None:
                raise ValueError("writing needs json_schema unless use_latest_version")
            elif self.auto_register:
                self._write_id = self.registry.register(self.subject, json.dumps(
                    self.json_schema), "JSON")
            else:
                self._write_id = self.registry.lookup(self.subject, json.dumps(
                    self.json_schema), "JSON").schema_id
        return self._write_id

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_validators": {}}

    def _validator(self, schema_id: int) -> Any:
        hit = self._validators.get(schema_id)
        if hit is None:
            found = _fetch(self.registry, self.registry.by_id, schema_id)
            if found.schema_type != "JSON":
                raise DecodeError(f"schema id {schema_id} is {found.schema_type}, not JSON")
            from jsonschema.validators import validator_for

            doc = json.loads(found.schema)
            hit = validator_for(doc)(doc)
            self._validators[schema_id] = hit
        return hit

    def decode(self, data: bytes) -> dict[str, Any]:
        schema_id, body = unframe(data)
        validator = self._validator(schema_id)
        try:
            doc = json.loads(bytes(body))
        except (ValueError, UnicodeDecodeError) as exc:
            raise DecodeError(f"not JSON (schema id {schema_id}): {exc}") from None
        if not isinstance(doc, dict):
            raise DecodeError(f"a JSON {type(doc).__name__}, not an object (schema id "
                              f"{schema_id})")
        if self.validate:
            error = next(iter(validator.iter_errors(doc)), None)
            if error is not None:
                where = "/".join(str(p) for p in error.absolute_path) or "/"
                raise DecodeError(f"does not match schema id {schema_id} at {where}: "
                                  f"{error.message}")
        return _shape_json(doc, self.spark_type)


def _shape_json(value: Any, dt: DataType) -> Any:
    """A document value in the shape Arrow takes for `dt` (nested JSON kept as text)."""
    if value is None:
        return None
    if isinstance(dt, StructType):
        if not isinstance(value, dict):
            raise DecodeError(f"expected an object, got {json.dumps(value)[:50]}")
        return {f.name: _shape_json(value.get(f.name), f.dataType) for f in dt.fields}
    if isinstance(dt, ArrayType):
        if not isinstance(value, list):
            raise DecodeError(f"expected an array, got {json.dumps(value)[:50]}")
        return [_shape_json(v, dt.elementType) for v in value]
    if isinstance(dt, StringType) and not isinstance(value, str):
        return json.dumps(value)
    return value


# ---- Protobuf -------------------------------------------------------------------------------
def _message_index(data: memoryview, pos: int) -> tuple[int, int]:
    try:
        return decode_varint(data, pos)
    except ProtocolError as exc:
        raise DecodeError(f"message indexes: {exc}") from None


def message_indexes(body: memoryview) -> tuple[list[int], memoryview]:
    """The message indexes after the schema id ([0] for the first message), and the rest."""
    count, pos = _message_index(body, 0)
    if count == 0:
        return [0], body[pos:]
    if not 0 < count <= 100:
        raise DecodeError(f"{count} message indexes")
    out = []
    for _ in range(count):
        index, pos = _message_index(body, pos)
        out.append(index)
    return out, body[pos:]


_SCALARS: dict[int, DataType] = {}


def _scalar_types() -> dict[int, DataType]:
    if not _SCALARS:
        from google.protobuf.descriptor import FieldDescriptor as FD

        _SCALARS.update({
            FD.TYPE_INT32: IntegerType(), FD.TYPE_SINT32: IntegerType(),
            FD.TYPE_SFIXED32: IntegerType(), FD.TYPE_UINT32: LongType(),
            FD.TYPE_FIXED32: LongType(), FD.TYPE_INT64: LongType(), FD.TYPE_SINT64: LongType(),
            FD.TYPE_SFIXED64: LongType(), FD.TYPE_UINT64: LongType(), FD.TYPE_FIXED64: LongType(),
            FD.TYPE_FLOAT: FloatType(), FD.TYPE_DOUBLE: DoubleType(), FD.TYPE_BOOL: BooleanType(),
            FD.TYPE_STRING: StringType(), FD.TYPE_BYTES: BinaryType(), FD.TYPE_ENUM: StringType(),
        })
    return _SCALARS


TIMESTAMP = "google.protobuf.Timestamp"


def proto_spark_type(desc: Any, stack: tuple[str, ...] = ()) -> StructType:
    """The struct a message reads into (Spark's from_protobuf mapping: enums as names, maps as
    maps, google.protobuf.Timestamp as a timestamp); a recursive message is refused."""
    if desc.full_name in stack:
        raise ValueError(f"recursive message {desc.full_name} has no Spark column type")
    return StructType([StructField(f.name, _field_type(f, (*stack, desc.full_name)), True)
                       for f in desc.fields])


def _field_type(f: Any, stack: tuple[str, ...]) -> DataType:
    if f.message_type is not None and f.message_type.GetOptions().map_entry:
        key, value = f.message_type.fields_by_name["key"], f.message_type.fields_by_name["value"]
        return MapType(_single_type(key, stack), _single_type(value, stack), True)
    single = _single_type(f, stack)
    return ArrayType(single, True) if _repeated(f) else single


def _repeated(f: Any) -> bool:
    is_repeated = getattr(f, "is_repeated", None)
    if is_repeated is not None:
        return bool(is_repeated)
    return bool(f.label == f.LABEL_REPEATED)


def _single_type(f: Any, stack: tuple[str, ...]) -> DataType:
    if f.message_type is not None:
        if f.message_type.full_name == TIMESTAMP:
            return TimestampType()
        return proto_spark_type(f.message_type, stack)
    return _scalar_types()[f.type]


def _to_python(msg: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in msg.DESCRIPTOR.fields:
        value = getattr(msg, f.name)
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            vf = f.message_type.fields_by_name["value"]
            out[f.name] = {k: _single(vf, v) for k, v in value.items()}
        elif _repeated(f):
            out[f.name] = [_single(f, v) for v in value]
        elif f.message_type is not None and not msg.HasField(f.name):
            out[f.name] = None
        else:
            out[f.name] = _single(f, value)
    return out


def _single(f: Any, value: Any) -> Any:
    if f.message_type is not None:
        if f.message_type.full_name == TIMESTAMP:
            import datetime

            return datetime.datetime.fromtimestamp(value.seconds + value.nanos / 1e9,
                                                   tz=datetime.UTC)
        return _to_python(value)
    if f.enum_type is not None:
        known = f.enum_type.values_by_number.get(value)
        return known.name if known is not None else str(value)
    return value


class ProtobufCodec:
    def __init__(self, registry: RegistryClient, *, subject: str,
                 message: str | None = None) -> None:
        self.registry = registry
        self.subject = subject
        latest = registry.latest(subject, fmt="serialized")
        if latest.schema_type != "PROTOBUF":
            raise ValueError(f"the latest schema of {subject} is {latest.schema_type}")
        pool, fdp = self._pool(latest)
        self.message = message or (f"{fdp.package}." if fdp.package else "") + \
            fdp.message_type[0].name
        self.spark_type = proto_spark_type(pool.FindMessageTypeByName(self.message))
        # Writing uses the latest schema (use.latest.version): its id and the message's path.
        self.write_id = latest.schema_id
        self.write_indexes = _index_path(fdp, self.message)
        self._writers: dict[tuple[int, tuple[int, ...]], Any] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_writers": {}}

    def _pool(self, found: Any) -> tuple[Any, Any]:
        from google.protobuf import descriptor_pb2, descriptor_pool

        pool = descriptor_pool.DescriptorPool()
        added: set[str] = set()

        def add(name: str, registered: Any) -> Any:
            fdp = descriptor_pb2.FileDescriptorProto.FromString(
                base64.b64decode(registered.schema))
            fdp.name = name
            refs = {n: (s, v) for n, s, v in registered.references}
            for dep in fdp.dependency:
                if dep in added:
                    continue
                if dep in refs:
                    add(dep, _fetch(self.registry, self.registry.version, refs[dep][0],
                                    refs[dep][1], "serialized"))
                else:  # a well-known type: protobuf ships its descriptor
                    known = descriptor_pb2.FileDescriptorProto()
                    try:
                        module = importlib.import_module(
                            dep[: -len(".proto")].replace("/", ".") + "_pb2")
                    except ImportError:
                        raise DecodeError(f"import {dep} has no reference") from None
                    module.DESCRIPTOR.CopyToProto(known)
                    added.add(dep)
                    pool.Add(known)
            added.add(name)
            pool.Add(fdp)
            return fdp

        try:
            return pool, add(f"schema-{found.schema_id}.proto", found)
        except DecodeError:
            raise
        except Exception as exc:  # a descriptor protobuf will not build
            raise DecodeError(f"schema id {found.schema_id}: {exc}") from None

    def _writer(self, schema_id: int, indexes: list[int]) -> Any:
        key = (schema_id, tuple(indexes))
        hit = self._writers.get(key)
        if hit is None:
            from google.protobuf import message_factory

            found = _fetch(self.registry, self.registry.by_id, schema_id, "serialized")
            if found.schema_type != "PROTOBUF":
                raise DecodeError(f"schema id {schema_id} is {found.schema_type}, not PROTOBUF")
            pool, fdp = self._pool(found)
            scope, container = fdp.package, fdp.message_type
            for index in indexes:
                if not 0 <= index < len(container):
                    raise DecodeError(f"message index {indexes} not in schema id {schema_id}")
                scope = f"{scope}.{container[index].name}" if scope else container[index].name
                container = container[index].nested_type
            hit = message_factory.GetMessageClass(pool.FindMessageTypeByName(scope))
            self._writers[key] = hit
        return hit

    def encode(self, record: dict[str, Any]) -> bytes:
        """`record` (a row as a dict, the shape decode gives) as a Confluent-framed message."""
        msg = self._writer(self.write_id, self.write_indexes)()
        _from_python(msg, record)
        indexes = b"\x00" if self.write_indexes == [0] else b"".join(
            encode_varint(n) for n in [len(self.write_indexes), *self.write_indexes])
        return frame(self.write_id, indexes + msg.SerializeToString())

    def decode(self, data: bytes) -> dict[str, Any]:
        schema_id, body = unframe(data)
        indexes, payload = message_indexes(body)
        cls = self._writer(schema_id, indexes)
        msg = cls()
        try:
            msg.ParseFromString(bytes(payload))
        except Exception as exc:  # google.protobuf.message.DecodeError and friends
            raise DecodeError(f"invalid Protobuf body for schema id {schema_id}: {exc}") from None
        return _to_python(msg)


def _index_path(fdp: Any, full_name: str) -> list[int]:
    """The message indexes of `full_name` in the file (Confluent's framing: [0] is the first)."""
    prefix = f"{fdp.package}." if fdp.package else ""
    if not full_name.startswith(prefix):
        raise ValueError(f"{full_name} is not in package {fdp.package}")
    path, container = [], fdp.message_type
    for part in full_name[len(prefix):].split("."):
        names = [m.name for m in container]
        if part not in names:
            raise ValueError(f"message {full_name} not found in the schema")
        path.append(names.index(part))
        container = container[names.index(part)].nested_type
    return path


def _from_python(msg: Any, record: dict[str, Any]) -> None:
    """Set `msg`'s fields from a dict shaped as decode returns (enums by name, timestamps as
    datetimes, maps as dicts or Arrow's key/value pairs)."""
    for f in msg.DESCRIPTOR.fields:
        value = record.get(f.name)
        if value is None:
            continue
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            target = getattr(msg, f.name)
            vf = f.message_type.fields_by_name["value"]
            pairs = value.items() if isinstance(value, dict) else value
            for k, v in pairs:
                if vf.message_type is not None:
                    _set_message(target[k], vf, v)
                else:
                    target[k] = _scalar(vf, v)
        elif _repeated(f):
            target = getattr(msg, f.name)
            for v in value:
                if f.message_type is not None:
                    _set_message(target.add(), f, v)
                else:
                    target.append(_scalar(f, v))
        elif f.message_type is not None:
            _set_message(getattr(msg, f.name), f, value)
        else:
            setattr(msg, f.name, _scalar(f, value))


def _set_message(target: Any, f: Any, value: Any) -> None:
    if f.message_type.full_name == TIMESTAMP:
        target.FromDatetime(value)
    else:
        _from_python(target, value)


def _scalar(f: Any, value: Any) -> Any:
    if f.enum_type is not None and isinstance(value, str):
        return f.enum_type.values_by_name[value].number
    return value
