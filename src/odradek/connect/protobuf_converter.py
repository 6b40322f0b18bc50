"""io.confluent.connect.protobuf.ProtobufConverter: Connect data as Protobuf in Confluent's
wire format (magic byte 0, the schema's 4-byte registry id, the message-index list naming the
message in its file as zig-zag varints, `[0]` written as one 0 byte, then the message), with
the schema in the registry (`schemaType: PROTOBUF`, registered as a base64
FileDescriptorProto, as confluent-kafka's serializer sends it).

Writing translates the schema as Confluent's ProtobufData does: a proto3 file whose package
and message come from the STRUCT's name (`ConnectDefault1` without one), fields numbered in
order from 1, an ARRAY a repeated field, a MAP a protobuf map (`<Field>Entry`), a nested
STRUCT a nested message (named by its schema, `Message` added when that equals the field's
name), the logical types as protobuf_types says (Timestamp `google.protobuf.Timestamp`,
Date `google.type.Date`, Time `google.type.TimeOfDay`, Decimal `confluent.type.Decimal` with
its scale and precision in the field's `confluent.field_meta`). Optional primitives are proto3
scalars (a null reads back as the type's default, as in Confluent's default without wrappers).
The imports other than Google's well-known files are registered as subjects of their own
(named as the file) and referenced, so any Confluent-compatible registry takes the schema.

Not carried here, refused with a DataError rather than written differently: nested arrays,
maps with non-scalar keys. INT8 and INT16 are written as int32 without Confluent's
`connect.type` field meta, so they read back as INT32.

Reading takes the writer's descriptor by id (`format=serialized`, with its references and
Google's well-known and Confluent's built-in imports), finds the message the index list names, and gives a STRUCT of
optional fields (as Confluent's reader does): enums as their names, wrappers and the logical
messages as values, maps and repeated fields as MAP and ARRAY; a message with a real `oneof` is refused.
"""

from __future__ import annotations

import base64
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import descriptor_pb2

from odradek.connect import data
from odradek.connect import protobuf_types as types
from odradek.connect.avro_converter import RegistryClient
from odradek.connect.data import DataError, Schema
from odradek.connect.registry_wire import Cache, frame, split_wire
from odradek.protocol.errors import ProtocolError
from odradek.protocol.primitives import decode_uvarint, encode_varint, zigzag_decode

DEFAULT_NAME = "ConnectDefault1"
FDP = descriptor_pb2.FileDescriptorProto
F = descriptor_pb2.FieldDescriptorProto
WELL_KNOWN_PREFIX = "google/protobuf/"
_SCALARS = {"INT8": F.TYPE_INT32, "INT16": F.TYPE_INT32, "INT32": F.TYPE_INT32,
            "INT64": F.TYPE_INT64, "FLOAT32": F.TYPE_FLOAT, "FLOAT64": F.TYPE_DOUBLE,
            "BOOLEAN": F.TYPE_BOOL, "STRING": F.TYPE_STRING, "BYTES": F.TYPE_BYTES}
_FROM_SCALAR = {F.TYPE_INT32: "INT32", F.TYPE_SINT32: "INT32", F.TYPE_SFIXED32: "INT32",
                F.TYPE_UINT32: "INT64", F.TYPE_FIXED32: "INT64", F.TYPE_INT64: "INT64",
                F.TYPE_UINT64: "INT64", F.TYPE_SINT64: "INT64", F.TYPE_FIXED64: "INT64",
                F.TYPE_SFIXED64: "INT64", F.TYPE_FLOAT: "FLOAT32", F.TYPE_DOUBLE: "FLOAT64",
                F.TYPE_BOOL: "BOOLEAN", F.TYPE_STRING: "STRING", F.TYPE_BYTES: "BYTES"}
_WRAPPERS = {"google.protobuf.DoubleValue": "FLOAT64", "google.protobuf.FloatValue": "FLOAT32",
             "google.protobuf.Int64Value": "INT64", "google.protobuf.UInt64Value": "INT64",
             "google.protobuf.Int32Value": "INT32", "google.protobuf.UInt32Value": "INT64",
             "google.protobuf.BoolValue": "BOOLEAN", "google.protobuf.StringValue": "STRING",
             "google.protobuf.BytesValue": "BYTES"}


# ---- message indexes -------------------------------------------------------------------------
def encode_indexes(indexes: list[int]) -> bytes:
    if indexes == [0]:
        return b"\x00"  # Confluent's shortcut for the file's first message
    return encode_varint(len(indexes)) + b"".join(encode_varint(i) for i in indexes)


def decode_indexes(raw: bytes, pos: int) -> tuple[list[int], int]:
    def index() -> int:
        nonlocal pos
        try:
            value, pos = decode_uvarint(raw, pos)
        except ProtocolError as exc:
            raise DataError(f"Invalid message indexes: {exc}") from None
        return zigzag_decode(value)

    count = index()
    if count == 0:
        return [0], pos
    if count < 0 or count > 100:
        raise DataError(f"Invalid message indexes: count {count}")
    return [index() for _ in range(count)], pos


# ---- Connect schema -> descriptor ------------------------------------------------------------
def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_") if part)


def _unqualified(name: str | None) -> str | None:
    return None if not name else name.rsplit(".", 1)[-1]


def file_of(schema: Schema) -> tuple[Any, str]:
    """The FileDescriptorProto for a STRUCT, and its message's full name."""
    if schema.type != "STRUCT":
        raise DataError(f"Unsupported root schema of type {schema.type}")
    package, _, name = (schema.name or DEFAULT_NAME).rpartition(".")
    fdp = FDP(name=f"{name}.proto", syntax="proto3", package=package)
    prefix = f".{package}." if package else "."
    _message(fdp, fdp.message_type.add(), name, schema, prefix + name)
    return fdp, (f"{package}.{name}" if package else name)


def _message(fdp: Any, msg: Any, name: str, schema: Schema, full: str) -> None:
    msg.name = name
    for number, f in enumerate(schema.fields, 1):
        fd = msg.field.add(name=f.name, number=number, label=F.LABEL_OPTIONAL)
        _field_type(fdp, msg, fd, f.name, f.schema, full)


def _field_type(fdp: Any, msg: Any, fd: Any, name: str, schema: Schema, full: str,
                nested_ok: bool = True) -> None:
    if schema.type == "ARRAY":
        assert schema.value_schema is not None
        if not nested_ok or schema.value_schema.type in ("ARRAY", "MAP"):
            raise DataError(f"ProtobufConverter: field {name}: an array of arrays or maps has "
                            "no Protobuf form")
        fd.label = F.LABEL_REPEATED
        _field_type(fdp, msg, fd, name, schema.value_schema, full, nested_ok=False)
        return
    if schema.type == "MAP":
        assert schema.key_schema is not None and schema.value_schema is not None
        if not nested_ok:
            raise DataError(f"ProtobufConverter: field {name}: a map inside an array has no "
                            "Protobuf form")
        if schema.key_schema.type not in ("STRING", "INT32", "INT64", "BOOLEAN"):
            raise DataError(f"ProtobufConverter: field {name}: map keys of type "
                            f"{schema.key_schema.type} have no Protobuf form")
        entry = msg.nested_type.add(name=_camel(name) + "Entry")
        entry.options.map_entry = True
        _field_type(fdp, entry, entry.field.add(name="key", number=1, label=F.LABEL_OPTIONAL),
                    "key", schema.key_schema, f"{full}.{entry.name}", nested_ok=False)
        _field_type(fdp, entry, entry.field.add(name="value", number=2,
                                                label=F.LABEL_OPTIONAL),
                    "value", schema.value_schema, f"{full}.{entry.name}", nested_ok=False)
        fd.label, fd.type, fd.type_name = F.LABEL_REPEATED, F.TYPE_MESSAGE, \
            f"{full}.{entry.name}"
        return
    if schema.name in types.LOGICAL:
        imported, message = types.LOGICAL[schema.name]
        needs = [imported]
        if schema.name == data.DECIMAL:
            params = types.decimal_params(schema)
            if params:
                needs.append(types.META_FILE)
                fd.options.MergeFromString(types.meta_options(params))
        for dep in needs:
            if dep not in fdp.dependency:
                fdp.dependency.append(dep)
        fd.type, fd.type_name = F.TYPE_MESSAGE, "." + message
        return
    if schema.type == "STRUCT":
        nested = _unqualified(schema.name) or _camel(name)
        if nested == name:
            nested += "Message"  # a message type and a field may not share a name
        if not any(m.name == nested for m in msg.nested_type):
            _message(fdp, msg.nested_type.add(), nested, schema, f"{full}.{nested}")
        fd.type, fd.type_name = F.TYPE_MESSAGE, f"{full}.{nested}"
        return
    fd.type = _SCALARS[schema.type]


# ---- descriptors -> Connect schema -----------------------------------------------------------
def schema_of(desc: Any, optional: bool = False) -> Schema:
    """A message descriptor as Connect's STRUCT (every field optional, as Confluent reads)."""
    real_oneofs = [o for o in desc.oneofs if not _synthetic(o)]
    if real_oneofs:
        raise DataError(f"ProtobufConverter: message {desc.full_name} has a oneof "
                        f"({real_oneofs[0].name}); not read here")
    fields = [(f.name, _field_schema(f)) for f in desc.fields]
    return data.struct(fields, name=desc.name, optional=optional)


def _synthetic(oneof: Any) -> bool:
    fields = list(oneof.fields)
    return len(fields) == 1 and getattr(fields[0], "has_presence", False) and \
        oneof.name == "_" + fields[0].name


def _is_map(f: Any) -> bool:
    return (f.type == F.TYPE_MESSAGE and f.message_type.GetOptions().map_entry
            and _repeated(f))


def _repeated(f: Any) -> bool:
    is_repeated = getattr(f, "is_repeated", None)
    if is_repeated is not None:
        return bool(is_repeated)
    return bool(f.label == F.LABEL_REPEATED)


def _element_schema(f: Any) -> Schema:
    if f.type == F.TYPE_ENUM:
        values = tuple((f"io.confluent.connect.protobuf.Enum.{v.name}", str(v.number))
                       for v in f.enum_type.values)
        return Schema("STRING", optional=True, name=f.enum_type.name, parameters=(
            ("io.confluent.connect.protobuf.Enum", f.enum_type.name), *values))
    if f.type in (F.TYPE_MESSAGE, F.TYPE_GROUP):
        full = f.message_type.full_name
        logical = types.logical_schema(full, types.meta_params(
            f.GetOptions().SerializeToString()) if full == "confluent.type.Decimal" else {})
        if logical is not None:
            return logical
        if full in _WRAPPERS:
            return Schema(_WRAPPERS[full], optional=True)
        return schema_of(f.message_type, optional=True)
    return Schema(_FROM_SCALAR[f.type], optional=True)


def _field_schema(f: Any) -> Schema:
    if _is_map(f):
        key, value = f.message_type.fields_by_name["key"], f.message_type.fields_by_name["value"]
        return Schema("MAP", optional=True, key_schema=_element_schema(key),
                      value_schema=_element_schema(value))
    if _repeated(f):
        element = _element_schema(f)
        return Schema("ARRAY", optional=True, value_schema=Schema(**{
            **element.__dict__, "optional": False}))
    return _element_schema(f)


# ---- values ------------------------------------------------------------------------------------
def fill(msg: Any, schema: Schema, value: Mapping[str, Any]) -> None:
    for f in schema.fields:
        item = value.get(f.name)
        if item is None:
            continue
        s = f.schema
        if s.type == "ARRAY":
            assert s.value_schema is not None
            target = getattr(msg, f.name)
            for element in item:
                if s.value_schema.type == "STRUCT":
                    fill(target.add(), s.value_schema, element)
                elif s.value_schema.name in types.LOGICAL:
                    types.set_value(target.add(), s.value_schema.name, element)
                else:
                    target.append(_scalar(s.value_schema, element))
        elif s.type == "MAP":
            assert s.value_schema is not None
            target = getattr(msg, f.name)
            for k, v in item.items():
                if v is None:
                    continue
                if s.value_schema.type == "STRUCT":
                    fill(target[k], s.value_schema, v)
                elif s.value_schema.name in types.LOGICAL:
                    types.set_value(target[k], s.value_schema.name, v)
                else:
                    target[k] = _scalar(s.value_schema, v)
        elif s.type == "STRUCT":
            fill(getattr(msg, f.name), s, item)
            getattr(msg, f.name).SetInParent()
        elif s.name in types.LOGICAL:
            types.set_value(getattr(msg, f.name), s.name, item)
        else:
            setattr(msg, f.name, _scalar(s, item))


def _scalar(schema: Schema, value: Any) -> Any:
    return bytes(value) if schema.type == "BYTES" else value


def read(msg: Any, schema: Schema) -> dict[str, Any]:
    desc = msg.DESCRIPTOR
    out: dict[str, Any] = {}
    for f, fs in zip(desc.fields, schema.fields, strict=True):
        raw = getattr(msg, f.name)
        if _is_map(f):
            assert fs.schema.value_schema is not None
            out[f.name] = {k: _element(f.message_type.fields_by_name["value"],
                                       fs.schema.value_schema, v) for k, v in raw.items()}
        elif _repeated(f):
            assert fs.schema.value_schema is not None
            out[f.name] = [_element(f, fs.schema.value_schema, v) for v in raw]
        elif f.type == F.TYPE_MESSAGE and not msg.HasField(f.name):
            out[f.name] = None
        else:
            out[f.name] = _element(f, fs.schema, raw)
    return out


def _element(f: Any, schema: Schema, raw: Any) -> Any:
    if f.type == F.TYPE_ENUM:
        found = f.enum_type.values_by_number.get(raw)
        return found.name if found is not None else str(raw)
    if f.type == F.TYPE_MESSAGE:
        full = f.message_type.full_name
        if full in types.MESSAGES:
            return types.get_value(full, raw)
        if full in _WRAPPERS:
            return raw.value
        return read(raw, schema)
    return raw


# ---- the registry and descriptor pools ---------------------------------------------------------
class _Registry(RegistryClient):
    def version(self, subject: str, version: int, fmt: str) -> dict[str, Any]:
        path = (f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/{version}"
                f"?format={fmt}")
        return dict(self._call("GET", path))

    def reference(self, name: str, register: bool) -> dict[str, Any]:
        """A built-in import as Confluent's DefaultReferenceSubjectNameStrategy names it (the
        subject is the file's name), registered first when `register`."""
        text = base64.standard_b64encode(types.BUILT_IN[name].SerializeToString()).decode()
        deps = [d for d in types.BUILT_IN[name].dependency if d in types.BUILT_IN]
        refs = [self.reference(d, register) for d in deps]
        if register:
            self.register(name, text, "PROTOBUF", refs)
        path = f"/subjects/{urllib.parse.quote(name, safe='')}"
        found = self._call("POST", path, self._body(text, "PROTOBUF", refs))
        return {"name": name, "subject": name, "version": int(found["version"])}


def _well_known(name: str) -> Any:
    if name in types.BUILT_IN:
        return types.BUILT_IN[name]
    # Importing Google's modules puts their files in the default pool.
    from google.protobuf import (  # noqa: F401
        any_pb2,
        descriptor_pool,
        duration_pb2,
        empty_pb2,
        field_mask_pb2,
        struct_pb2,
        timestamp_pb2,
        wrappers_pb2,
    )

    try:
        found = descriptor_pool.Default().FindFileByName(name)
    except KeyError:
        raise DataError(f"ProtobufConverter: import {name} is not a well-known file and not "
                        "a reference") from None
    out = FDP()
    found.CopyToProto(out)
    return out


def _add_imports(pool: Any, fdp: Any, added: set[str]) -> None:
    """Add the well-known and built-in files `fdp` imports to `pool`, theirs first."""
    for dep in fdp.dependency:
        if dep not in added:
            added.add(dep)
            known = _well_known(dep)
            _add_imports(pool, known, added)
            pool.Add(known)


@dataclass
class ProtobufConverter:
    registry: _Registry
    is_key: bool = False
    auto_register: bool = True
    kind: str = "protobuf"
    schemas: bool = True
    _writers: Cache[tuple[str, Schema], tuple[int, Any]] = field(default_factory=Cache)
    _readers: Cache[tuple[int, tuple[int, ...]], tuple[Any, Schema]] = field(
        default_factory=Cache)

    @classmethod
    def configure(cls, own: Mapping[str, str], is_key: bool) -> ProtobufConverter:
        urls, auto = RegistryClient.settings(own)
        return cls(_Registry(urls), is_key=is_key, auto_register=auto)

    def subject(self, topic: str) -> str:
        return f"{topic}-{'key' if self.is_key else 'value'}"

    def message_class(self, schema: Schema) -> tuple[Any, Any]:
        """(the message class, the file) for a Connect STRUCT."""
        from google.protobuf import descriptor_pool, message_factory

        fdp, full = file_of(schema)
        pool = descriptor_pool.DescriptorPool()
        _add_imports(pool, fdp, set())
        pool.Add(fdp)
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(full)), fdp

    def from_connect(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None and (schema is None or schema.optional):
            return None
        if schema is None:
            raise DataError("ProtobufConverter needs a schema: the value has none")
        data.validate(schema, value)
        subject = self.subject(topic)
        schema_id, cls = self._writers.get((subject, schema),
                                           lambda: self._writer(subject, schema))
        msg = cls()
        try:
            fill(msg, schema, value)
        except (TypeError, ValueError) as exc:
            raise DataError(f"ProtobufConverter: {exc}") from None
        return frame(schema_id, encode_indexes([0]) + msg.SerializeToString())

    def _writer(self, subject: str, schema: Schema) -> tuple[int, Any]:
        try:
            cls, fdp = self.message_class(schema)
        except DataError:
            raise
        except Exception as exc:  # protobuf refused the file (a field name, say)
            what = schema.name or DEFAULT_NAME
            raise DataError(f"ProtobufConverter: no Protobuf schema for {what}: {exc}") \
                from None
        text = base64.standard_b64encode(fdp.SerializeToString()).decode()
        refs = [self.registry.reference(d, self.auto_register) for d in fdp.dependency
                if not d.startswith(WELL_KNOWN_PREFIX)]
        return self.registry.id_for(subject, text, "PROTOBUF", self.auto_register, refs), cls

    def to_connect(self, topic: str, raw: bytes | None) -> tuple[Schema | None, Any]:
        if raw is None:
            return None, None
        schema_id, body = split_wire(raw)
        indexes, pos = decode_indexes(body, 0)
        cls, schema = self._readers.get((schema_id, tuple(indexes)),
                                        lambda: self._reader(schema_id, indexes))
        msg = cls()
        try:
            msg.ParseFromString(body[pos:])
        except Exception as exc:  # protobuf's DecodeError and friends: the bytes are bad
            raise DataError(f"Error deserializing Protobuf message for id {schema_id}: "
                            f"{exc}") from None
        return schema, read(msg, schema)

    def _reader(self, schema_id: int, indexes: list[int]) -> tuple[Any, Schema]:
        from google.protobuf import descriptor_pool, message_factory

        info = self.registry.schema_info(schema_id, "serialized")
        if info.get("schemaType", "AVRO") != "PROTOBUF":
            raise DataError(f"Schema {schema_id} is not a Protobuf schema "
                            f"({info.get('schemaType', 'AVRO')})")
        pool = descriptor_pool.DescriptorPool()
        added: set[str] = set()

        def add(text: str, name: str, references: list[dict[str, Any]]) -> Any:
            fdp = FDP.FromString(base64.b64decode(text))
            fdp.name = name
            by_name = {r["name"]: r for r in references}
            for dep in fdp.dependency:
                if dep in added:
                    continue
                added.add(dep)
                ref = by_name.get(dep)
                if ref is None:
                    known = _well_known(dep)
                    _add_imports(pool, known, added)
                    pool.Add(known)
                else:
                    got = self.registry.version(ref["subject"], int(ref["version"]),
                                                "serialized")
                    add(got["schema"], dep, list(got.get("references") or []))
            pool.Add(fdp)
            return fdp

        try:
            root = add(info["schema"], f"odradek-schema-{schema_id}.proto",
                       list(info.get("references") or []))
            path, container = [], list(root.message_type)
            for i in indexes:
                if i >= len(container):
                    raise DataError(f"Invalid message indexes {indexes} for schema {schema_id}")
                path.append(container[i].name)
                container = list(container[i].nested_type)
            full = ".".join(([root.package] if root.package else []) + path)
            desc = pool.FindMessageTypeByName(full)
        except DataError:
            raise
        except Exception as exc:  # a descriptor protobuf refuses: the schema is unusable
            raise DataError(f"Error retrieving Protobuf schema for id {schema_id}: {exc}") \
                from None
        return message_factory.GetMessageClass(desc), schema_of(desc)
