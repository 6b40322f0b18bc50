"""Generic (non hot path) request/response codec over kio.

kio's native reader sizes its arrays from the count on the wire before it
checks that the elements are there: a 5-byte array count of 2**31 makes it
allocate tens of GB and the process aborts (not an exception). So before any
bytes reach kio, a schema-driven scanner written here walks the message and
checks every length and count against the bytes left, allocating nothing.
Only bytes that pass go to kio, and every kio exception becomes ProtocolError.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable, Mapping
from dataclasses import fields, replace
from functools import cache
from typing import Any

from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

from odradek.protocol.errors import ProtocolError, UnsupportedVersion
from odradek.protocol.primitives import decode_uvarint_within as _uvarint
from odradek.protocol.primitives import encode_uvarint

__all__ = [
    "decode_request",
    "decode_response",
    "encode_api_versions_response",
    "encode_request",
    "encode_response",
    "encode_response_with_items",
    "request_class",
    "response_class",
    "scan_entity",
]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ENTRY = struct.Struct(">hhh")

_FIXED_SIZES = {
    "int8": 1, "int16": 2, "int32": 4, "int64": 8,
    "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8,
    "float64": 8, "uuid": 16, "bool": 1, "error_code": 2,
    "timedelta_i32": 4, "timedelta_i64": 8, "datetime_i64": 8,
}

# scan(buf, pos, end) -> new pos; raises ProtocolError.
Scan = Callable[[Any, int, int], int]


def _fixed(size: int) -> Scan:
    def scan(buf: Any, pos: int, end: int) -> int:
        if end - pos < size:
            raise ProtocolError(f"truncated: need {size} bytes at {pos}")
        return pos + size

    return scan


def _check_len(n: int, pos: int, end: int) -> int:
    if n > end - pos:
        raise ProtocolError(f"length {n} exceeds the {end - pos} bytes left")
    return pos + n


def _compact_blob(buf: Any, pos: int, end: int) -> int:
    n, pos = _uvarint(buf, pos, end)
    return pos if n == 0 else _check_len(n - 1, pos, end)


def _legacy_string(buf: Any, pos: int, end: int) -> int:
    if end - pos < 2:
        raise ProtocolError("truncated string length")
    (n,) = _I16.unpack_from(buf, pos)
    pos += 2
    if n < -1:
        raise ProtocolError(f"bad string length {n}")
    return pos if n == -1 else _check_len(n, pos, end)


def _legacy_bytes(buf: Any, pos: int, end: int) -> int:
    if end - pos < 4:
        raise ProtocolError("truncated bytes length")
    (n,) = _I32.unpack_from(buf, pos)
    pos += 4
    if n < -1:
        raise ProtocolError(f"bad bytes length {n}")
    return pos if n == -1 else _check_len(n, pos, end)


def _primitive(kafka_type: str, flexible: bool) -> Scan:
    size = _FIXED_SIZES.get(kafka_type)
    if size is not None:
        return _fixed(size)
    if kafka_type == "string":
        return _compact_blob if flexible else _legacy_string
    if kafka_type in ("bytes", "records"):
        return _compact_blob if flexible else _legacy_bytes
    raise ProtocolError(f"no scanner for kafka type {kafka_type!r}")


def _array(item: Scan, flexible: bool) -> Scan:
    def scan(buf: Any, pos: int, end: int) -> int:
        if flexible:
            n, pos = _uvarint(buf, pos, end)
            if n == 0:
                return pos
            n -= 1
        else:
            if end - pos < 4:
                raise ProtocolError("truncated array length")
            (n,) = _I32.unpack_from(buf, pos)
            pos += 4
            if n == -1:
                return pos
            if n < 0:
                raise ProtocolError(f"bad array length {n}")
        # Every element takes at least one byte: a count above the bytes left is a lie.
        if n > end - pos:
            raise ProtocolError(f"array count {n} exceeds the {end - pos} bytes left")
        for _ in range(n):
            pos = item(buf, pos, end)
        return pos

    return scan


def _nullable_entity(inner: Scan) -> Scan:
    def scan(buf: Any, pos: int, end: int) -> int:
        if pos >= end:
            raise ProtocolError("truncated nullable struct marker")
        if buf[pos] == 0xFF:  # int8 -1: null
            return pos + 1
        return inner(buf, pos + 1, end)

    return scan


def _field_scanner(field: Any, flexible: bool, is_tag: bool) -> Scan:
    cls = classify_field(field)
    optional = False if is_tag else is_optional(field)
    if isinstance(cls, PrimitiveField | PrimitiveTupleField):
        item = _primitive(get_schema_field_type(field), flexible)
    elif isinstance(cls, EntityField):
        item = scan_entity(cls.type_)
        if optional:
            item = _nullable_entity(item)
    elif isinstance(cls, EntityTupleField):
        item = scan_entity(cls.type_)
    else:  # pragma: no cover - kio has no other field classes
        raise ProtocolError(f"unknown field class {cls!r}")
    return _array(item, flexible) if cls.is_array else item


@cache
def scan_entity(entity_type: type) -> Scan:
    """A validating walk over one kio entity's wire form (no allocation)."""
    flexible = bool(entity_type.__flexible__)
    steps: list[Scan] = []
    tagged: dict[int, Scan] = {}
    for f in fields(entity_type):
        tag = get_field_tag(f)
        if tag is None:
            steps.append(_field_scanner(f, flexible, False))
        else:
            tagged[int(tag)] = _field_scanner(f, flexible, True)

    def scan(buf: Any, pos: int, end: int) -> int:
        for step in steps:
            pos = step(buf, pos, end)
        if not flexible:
            return pos
        count, pos = _uvarint(buf, pos, end)
        if count > end - pos:
            raise ProtocolError(f"tagged field count {count} exceeds the bytes left")
        for _ in range(count):
            tag, pos = _uvarint(buf, pos, end)
            size, pos = _uvarint(buf, pos, end)
            field_end = _check_len(size, pos, end)
            known = tagged.get(tag)
            if known is not None and known(buf, pos, field_end) != field_end:
                raise ProtocolError(f"tagged field {tag} does not fill its {size} bytes")
            pos = field_end
        return pos

    return scan


# --------------------------------------------------------------------------- #


@cache
def request_class(api_key: int, version: int) -> type:
    try:
        return load_request_schema(api_key, version)
    except (KioIndexError, ImportError, ValueError) as exc:
        raise UnsupportedVersion(api_key, version, str(exc)) from None


@cache
def response_class(api_key: int, version: int) -> type:
    try:
        return load_response_schema(api_key, version)
    except (KioIndexError, ImportError, ValueError) as exc:
        raise UnsupportedVersion(api_key, version, str(exc)) from None


@cache
def _reader(cls: type) -> Callable[[Any, int], tuple[Any, int]]:
    return entity_reader(cls)


def _decode(cls: type, frame: memoryview | bytes, offset: int) -> Any:
    end = len(frame)
    if offset < 0 or offset > end:
        raise ProtocolError(f"body offset {offset} outside the {end}-byte frame")
    scan_entity(cls)(frame, offset, end)
    try:
        entity, _size = _reader(cls)(frame, offset)
    except ProtocolError:
        raise
    except Exception as exc:  # kio raises DecodeError, ValueError, OverflowError, ...
        raise ProtocolError(f"cannot decode {cls.__name__}: {type(exc).__name__}: {exc}") from None
    return entity


def decode_request(api_key: int, version: int, frame: memoryview | bytes, offset: int) -> Any:
    """Decode a request body (after the header) into kio's entity."""
    return _decode(request_class(api_key, version), frame, offset)


def decode_response(api_key: int, version: int, buf: memoryview | bytes, offset: int = 0) -> Any:
    """Decode a response body (after the header); for tools, clients and tests."""
    return _decode(response_class(api_key, version), buf, offset)


@cache
def _writer(cls: type) -> Callable[[Any, Any], None]:
    return entity_writer(cls)


def _encode(entity: Any) -> bytes:
    buf = io.BytesIO()
    try:
        _writer(type(entity))(buf, entity)
    except Exception as exc:  # our own bug or a value out of range: say which
        raise ValueError(f"cannot encode {type(entity).__name__}: {exc}") from exc
    return buf.getvalue()


def encode_response(entity: Any) -> bytes:
    """A response body (no header)."""
    return _encode(entity)


def encode_request(entity: Any) -> bytes:
    """A request body (no header)."""
    return _encode(entity)


@cache
def _tail_size(cls: type, name: str) -> int | None:
    """Bytes after array field `name` in an encoded `cls`, when only fixed-size fields follow
    it and the class has no tagged fields (so its tag section is one empty byte); else None."""
    all_fields = fields(cls)
    names = [f.name for f in all_fields]
    if name not in names or any(get_field_tag(f) is not None for f in all_fields):
        return None
    size = 0
    for f in all_fields[names.index(name) + 1:]:
        kafka_type = f.metadata.get("kafka_type")
        if not isinstance(classify_field(f), PrimitiveField) or kafka_type not in _FIXED_SIZES:
            return None
        size += _FIXED_SIZES[kafka_type]
    return size + (1 if cls.__flexible__ else 0)  # type: ignore[attr-defined]


def encode_response_with_items(entity: Any, name: str, items: list[bytes]) -> bytes:
    """A response body whose array field `name` holds `items`, each an element already encoded
    on its own (encode_response of the element's entity; `entity`'s own value of the field is
    ignored). Lets a handler keep the encoded form of elements that do not change between
    requests (Metadata's topics: 20,000 partitions re-encoded per request otherwise). Raises
    ValueError for a class where the field is not followed only by fixed-size fields."""
    cls = type(entity)
    tail = _tail_size(cls, name)
    if tail is None:
        raise ValueError(f"{cls.__name__}.{name} cannot take encoded items")
    empty = _encode(replace(entity, **{name: ()}))
    flexible = bool(cls.__flexible__)  # type: ignore[attr-defined]
    # the empty array as written: compact (uvarint length + 1) or int32 length
    cut = len(empty) - tail - (1 if flexible else 4)
    count = encode_uvarint(len(items) + 1) if flexible else _I32.pack(len(items))
    return b"".join((empty[:cut], count, *items, empty[len(empty) - tail:]))


def encode_api_versions_response(
    version: int,
    error_code: int,
    supported: Mapping[int, tuple[int, int]],
    throttle_time_ms: int = 0,
) -> bytes:
    """An ApiVersions response body for any version, by hand.

    A request at a version we do not know (above our max) is answered at v0
    with UNSUPPORTED_VERSION and our list, as Kafka does since 2.4; callers
    pass such a version straight through and get v0.
    """
    if not 0 <= version <= 4:
        version = 0
    items = sorted(supported.items())
    out = bytearray(_I16.pack(error_code))
    if version >= 3:
        out += encode_uvarint(len(items) + 1)
        for key, (lo, hi) in items:
            out += _ENTRY.pack(key, lo, hi)
            out += b"\x00"
        out += _I32.pack(throttle_time_ms)
        out += b"\x00"  # no tagged fields (features are optional)
        return bytes(out)
    out += _I32.pack(len(items))
    for key, (lo, hi) in items:
        out += _ENTRY.pack(key, lo, hi)
    if version >= 1:
        out += _I32.pack(throttle_time_ms)
    return bytes(out)
