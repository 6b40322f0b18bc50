"""Protobuf records named by their schema: the registry's .proto text parsed (proto-schema-
parser, the parser the registry uses too), the message picked by the wire format's index path,
and the bytes read field by field with the names and types it gives. Types from imported files
are looked up in the referenced schemas' text (the decoder fetches them from the registry) and
in Protobuf's well-known types (`google/protobuf/*.proto`, which the registry does not hold);
enums show their value's name. Fields the schema does not know are kept by number, as
`protobuf_fields` reads any message without its schema.
"""

from __future__ import annotations

import struct
from typing import Any

from proto_schema_parser import ast
from proto_schema_parser.parser import Parser

from odradek.protocol.primitives import zigzag_decode
from odradek.protocol.protobuf_wire import I32, I64, LEN, VARINT, packed_ints, wire_fields

_VARINT_TYPES = {"int32", "int64", "uint32", "uint64", "sint32", "sint64", "bool", "enum"}
_FIXED64 = {"fixed64": "<Q", "sfixed64": "<q", "double": "<d"}
_FIXED32 = {"fixed32": "<I", "sfixed32": "<i", "float": "<f"}


def protobuf_fields(buf: bytes, depth: int = 0) -> list[dict[str, Any]]:
    """A protobuf message's fields by number without its schema (nested messages guessed when
    the bytes parse as one). ValueError (ProtocolError is one) when the bytes are not one."""
    out: list[dict[str, Any]] = []
    for f in wire_fields(buf):
        if f.wire == VARINT:
            out.append({"field": f.number, "varint": f.value})
        elif f.wire == LEN:
            assert isinstance(f.value, bytes)
            out.append({"field": f.number, **_length_delimited(f.value, depth)})
        else:
            assert isinstance(f.value, bytes)
            kind, fmt = ("fixed64", "<q") if f.wire == I64 else ("fixed32", "<i")
            out.append({"field": f.number, kind: struct.unpack(fmt, f.value)[0]})
    return out


def _length_delimited(chunk: bytes, depth: int) -> dict[str, Any]:
    try:
        text = chunk.decode()
        if text.isprintable():
            return {"string": text}
    except UnicodeDecodeError:
        pass
    if depth < 8:
        try:
            return {"message": protobuf_fields(chunk, depth + 1)}
        except ValueError:
            pass
    return {"bytes": chunk.hex()}


# Protobuf's well-known types that records carry most, written out: a schema importing
# google/protobuf/*.proto references no registry subject for them (serializers leave them
# out), so the decoder knows them itself. Field numbers and types are Protobuf's.
_WRAPPERS = {"DoubleValue": "double", "FloatValue": "float", "Int64Value": "int64",
             "UInt64Value": "uint64", "Int32Value": "int32", "UInt32Value": "uint32",
             "BoolValue": "bool", "StringValue": "string", "BytesValue": "bytes"}
WELL_KNOWN = "\n".join([
    'syntax = "proto3";',
    "message Timestamp { int64 seconds = 1; int32 nanos = 2; }",
    "message Duration { int64 seconds = 1; int32 nanos = 2; }",
    "message Empty { }",
    "message FieldMask { repeated string paths = 1; }",
    "message Any { string type_url = 1; bytes value = 2; }",
    *(f"message {name} {{ {kind} value = 1; }}" for name, kind in _WRAPPERS.items())])


def top_messages(text: str) -> list[ast.Message]:
    return [e for e in Parser().parse(text).file_elements if isinstance(e, ast.Message)]


def top_types(text: str) -> list[ast.Message | ast.Enum]:
    """A file's top-level messages and enums: what a file importing it may name."""
    return [e for e in Parser().parse(text).file_elements
            if isinstance(e, ast.Message | ast.Enum)]


def imports(text: str) -> list[str]:
    return [e.name for e in Parser().parse(text).file_elements if isinstance(e, ast.Import)]


def well_known() -> list[ast.Message | ast.Enum]:
    return top_types(WELL_KNOWN)


def pick(messages: list[ast.Message], path: list[int]) -> ast.Message:
    """The message at the wire format's index path ([0]: the first top-level message)."""
    current = messages
    found: ast.Message | None = None
    for index in path or [0]:
        if not 0 <= index < len(current):
            raise ValueError(f"message index {path} not in the schema")
        found = current[index]
        current = [e for e in found.elements if isinstance(e, ast.Message)]
    assert found is not None
    return found


def _fields(message: ast.Message) -> dict[int, ast.Field]:
    out: dict[int, ast.Field] = {}
    for e in message.elements:
        if isinstance(e, ast.Field):
            out[e.number] = e
        elif isinstance(e, ast.OneOf):
            out.update({f.number: f for f in e.elements if isinstance(f, ast.Field)})
    return out


def _resolve(name: str, scope: list[ast.Message], top: list[Any]) -> Any:
    """A nested message or enum by its (last) name, looked up from the innermost scope out."""
    short = name.rsplit(".", 1)[-1]
    for message in reversed(scope):
        for e in message.elements:
            if isinstance(e, ast.Message | ast.Enum) and e.name == short:
                return e
    for e in top:
        if e.name == short:
            return e
    return None


def _scalar(kind: str, wire: int, raw: int | bytes) -> Any:
    if isinstance(raw, bytes):
        return raw.decode(errors="replace") if kind == "string" else raw.hex()
    if kind in ("sint32", "sint64"):
        return zigzag_decode(raw)
    if kind == "bool":
        return bool(raw)
    if kind in ("int32", "int64") and raw >= 1 << 63:
        return raw - (1 << 64)
    return raw


def decode_message(buf: bytes, message: ast.Message, top: list[Any],
                   scope: list[ast.Message] | None = None) -> dict[str, Any]:
    scope = [*(scope or []), message]
    known = _fields(message)
    out: dict[str, Any] = {}
    for number, wire, raw in wire_fields(buf):
        field = known.get(number)
        if field is None:
            out.setdefault(f"#{number}", []).append(raw if isinstance(raw, int) else raw.hex())
            continue
        value = _value(field, wire, raw, top, scope)
        repeated = field.cardinality == ast.FieldCardinality.REPEATED
        if repeated:
            out.setdefault(field.name, []).extend(value if isinstance(value, list) else [value])
        else:
            out[field.name] = value
    return out


def _value(field: ast.Field, wire: int, raw: int | bytes, top: list[Any],
           scope: list[ast.Message]) -> Any:
    kind = field.type
    if kind in _FIXED64 and isinstance(raw, bytes) and wire == I64:
        return struct.unpack(_FIXED64[kind], raw)[0]
    if kind in _FIXED32 and isinstance(raw, bytes) and wire == I32:
        return struct.unpack(_FIXED32[kind], raw)[0]
    target = None if kind in _VARINT_TYPES or kind in ("string", "bytes") else \
        _resolve(kind, scope, top)
    if isinstance(target, ast.Enum):
        if isinstance(raw, int):  # the value's name (an unknown number stays a number)
            names = {v.number: v.name for v in target.elements if isinstance(v, ast.EnumValue)}
            return names.get(_scalar("int32", wire, raw), _scalar("int32", wire, raw))
        kind = "enum"
    if isinstance(raw, bytes) and wire == LEN:
        if isinstance(target, ast.Message):
            return decode_message(raw, target, top, scope)
        if kind in _VARINT_TYPES:  # a packed repeated field
            return [_scalar(kind, VARINT, v) for v in packed_ints(raw)]
        if target is None and kind not in ("string", "bytes"):
            return protobuf_fields(raw)  # a type from an import: by number
    return _scalar(kind, wire, raw)
