"""Avro values in the Confluent wire format: magic byte 0, a 4-byte big-endian schema id, Avro binary.

Pure codec, no Spark: `AvroCodec.decode(bytes) -> dict` and `encode(dict) -> bytes`. Writer
schemas are found by id through a `SchemaRegistry`: `registry_client.RegistryClient`, the
Schema Registry's REST API (`AvroCodec.from_config({"schema.registry.url": ...})`), or
`LocalRegistry`, in memory, for tests. Either must be picklable: the codec travels to Spark's
Python workers.

Writing follows Confluent's serializer settings: `auto.register.schemas` (default true:
register the codec's schema under its subject; false: it must be registered already, and its
id is looked up) and `use.latest.version` (write with the subject's latest schema and its id).

Any bytes given to `decode` either give a record or raise `DecodeError`, never another
exception: fastavro's own errors (EOFError, IndexError, UnicodeDecodeError, ...) are wrapped,
and the one input fastavro would turn into an unbounded allocation (a huge block count of an
array whose items take no bytes, such as array<null>) is refused by a bounds walk first.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Mapping
from typing import Any, Protocol

import fastavro

MAGIC = 0
HEADER = struct.Struct(">bI")
# Items of zero-byte types that one record may hold in all its arrays: a guard, not a format limit.
MAX_EMPTY_ITEMS = 65_536

Schema = Any  # an Avro schema as fastavro takes it: dict, list (union) or str (primitive/name)


class DecodeError(ValueError):
    """A value that is not a valid record: the message says why."""


class SchemaError(ValueError):
    """A schema that cannot be used (invalid Avro, or a type the Spark mapping does not cover)."""


class SchemaRegistry(Protocol):
    """Where writer schemas live. The Schema Registry client will implement this too."""

    def schema_by_id(self, schema_id: int) -> Schema:
        """The schema registered under `schema_id`; KeyError when there is none."""
        ...

    def register(self, subject: str, schema: Schema) -> int:
        """The id of `schema` under `subject`, registering it when new."""
        ...


def _canonical(schema: Schema) -> str:
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


class LocalRegistry:
    """Schemas by id, in memory. Registering an equal schema again returns its id, as the
    Schema Registry does; ids are global across subjects."""

    def __init__(self, schemas: Mapping[int, Schema] | None = None) -> None:
        self._by_id: dict[int, Schema] = {}
        self._subjects: dict[str, list[int]] = {}
        for schema_id, schema in (schemas or {}).items():
            self._by_id[int(schema_id)] = _load(schema)

    def schema_by_id(self, schema_id: int) -> Schema:
        return self._by_id[schema_id]

    def register(self, subject: str, schema: Schema) -> int:
        schema = _load(schema)
        key = _canonical(schema)
        found = next((i for i, s in self._by_id.items() if _canonical(s) == key), None)
        if found is None:
            found = max(self._by_id, default=0) + 1
            self._by_id[found] = schema
        versions = self._subjects.setdefault(subject, [])
        if found not in versions:
            versions.append(found)
        return found


def _flag(config: Mapping[str, Any], key: str, default: bool) -> bool:
    value = config.get(key, default)
    if isinstance(value, str):
        if value.lower() not in ("true", "false"):
            raise ValueError(f"{key} must be true or false, not {value!r}")
        return value.lower() == "true"
    return bool(value)


def _load(schema: Schema) -> Schema:
    if isinstance(schema, str) and schema.lstrip().startswith(("{", "[", '"')):
        schema = json.loads(schema)
    try:
        fastavro.parse_schema(schema)
    except Exception as exc:  # fastavro raises several types for bad schemas
        raise SchemaError(f"invalid Avro schema: {exc}") from None
    return schema


def frame(schema_id: int, body: bytes) -> bytes:
    return HEADER.pack(MAGIC, schema_id) + body


def unframe(data: bytes) -> tuple[int, memoryview]:
    """(schema id, Avro body) of a Confluent-framed value."""
    if len(data) < HEADER.size:
        raise DecodeError(f"value of {len(data)} bytes is shorter than the 5-byte Confluent header")
    magic, schema_id = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise DecodeError(f"unknown magic byte {magic & 0xFF} (the Confluent wire format uses 0)")
    return schema_id, memoryview(data)[HEADER.size:]


class AvroCodec:
    """Decode/encode one record type. `schema` is the reader schema: the shape callers get
    (and the Spark type of the parsed column); writer schemas come from the registry by id
    and are resolved to it by Avro's schema-resolution rules."""

    def __init__(self, registry: SchemaRegistry, schema: Schema | None = None, *,
                 subject: str | None = None, auto_register: bool = True,
                 use_latest_version: bool = False) -> None:
        self.registry = registry
        self.subject = subject
        self.auto_register = auto_register
        self.use_latest_version = use_latest_version
        if schema is None:
            # use.latest.version without a schema of its own: the subject's latest is the shape.
            if not (use_latest_version and subject):
                raise SchemaError("a schema is needed unless use_latest_version and a subject "
                                  "are given")
            schema = self._latest()[1]
        self.schema = _load(schema)
        self._parsed: Any = None
        self._writers: dict[int, tuple[Any, bool, bool]] = {}
        self._write_id: int | None = None

    @classmethod
    def from_config(cls, config: Mapping[str, Any], schema: Schema | None = None, *,
                    subject: str) -> AvroCodec:
        """A codec over the registry at `schema.registry.url`, with Confluent's serializer
        settings `auto.register.schemas` and `use.latest.version` (strings or booleans)."""
        from odradek.spark.registry_client import RegistryClient

        return cls(RegistryClient.from_config(config), schema, subject=subject,
                   auto_register=_flag(config, "auto.register.schemas", True),
                   use_latest_version=_flag(config, "use.latest.version", False))

    def _latest(self) -> tuple[int, Schema]:
        latest = getattr(self.registry, "latest", None)
        if latest is None:
            raise SchemaError("use_latest_version needs a registry that knows subjects")
        found = latest(self.subject)
        if found.schema_type != "AVRO":
            raise SchemaError(f"the latest schema of {self.subject} is {found.schema_type}, "
                              "not AVRO")
        return found.schema_id, json.loads(found.schema)

    def __getstate__(self) -> dict[str, Any]:
        # Parsed schemas are rebuilt lazily where the codec lands (a Spark worker).
        state = dict(self.__dict__)
        state["_parsed"] = None
        state["_writers"] = {}
        return state

    @property
    def parsed(self) -> Any:
        if self._parsed is None:
            self._parsed = fastavro.parse_schema(self.schema)
        return self._parsed

    def _writer(self, schema_id: int) -> tuple[Any, bool, bool]:
        hit = self._writers.get(schema_id)
        if hit is None:
            try:
                raw = self.registry.schema_by_id(schema_id)
            except KeyError:
                raise DecodeError(f"unknown schema id {schema_id}") from None
            raw = _load(raw)
            # Same schema both sides: skip fastavro's resolution step, the commonest case.
            same = _canonical(raw) == _canonical(self.schema)
            hit = (fastavro.parse_schema(raw), needs_bounds_walk(raw), same)
            self._writers[schema_id] = hit
        return hit

    def decode(self, data: bytes) -> dict[str, Any]:
        schema_id, body = unframe(data)
        writer, walk, same = self._writer(schema_id)
        if walk:
            check_bounds(body, writer)
        buf = io.BytesIO(body)
        try:
            record = fastavro.schemaless_reader(buf, writer, None if same else self.parsed)
        except DecodeError:
            raise
        except Exception as exc:  # EOFError, IndexError, UnicodeDecodeError, SchemaResolutionError...
            raise DecodeError(f"invalid Avro body for schema id {schema_id}: "
                              f"{type(exc).__name__}: {exc}") from None
        if buf.tell() != len(body):
            raise DecodeError(f"{len(body) - buf.tell()} trailing bytes after the Avro record "
                              f"(schema id {schema_id})")
        if not isinstance(record, dict):
            raise DecodeError(f"schema id {schema_id} does not give a record")
        return record

    def schema_id(self) -> int:
        """The id records are written with (asked once; the codec keeps it)."""
        if self._write_id is None:
            subject = self.subject or "default-value"
            if self.use_latest_version:
                self._write_id = self._latest()[0]
            elif self.auto_register:
                self._write_id = self.registry.register(subject, self.schema)
            else:
                lookup = getattr(self.registry, "lookup", None)
                if lookup is None:
                    raise SchemaError("auto_register=False needs a registry with lookup")
                self._write_id = int(lookup(subject, self.schema).schema_id)
        return self._write_id

    def encode(self, record: Mapping[str, Any]) -> bytes:
        schema_id = self.schema_id()
        # use.latest.version writes with the latest schema itself (fetched by id, cached).
        writer = self._writer(schema_id)[0] if self.use_latest_version else self.parsed
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, writer, record)
        return frame(schema_id, buf.getvalue())


# --- bounds walk: only for schemas fastavro could be made to allocate without limit ---------

_MIN_SIZE = {"null": 0, "boolean": 1, "int": 1, "long": 1, "float": 4, "double": 8,
             "bytes": 1, "string": 1}


def _named(schema: Any, names: dict[str, Any], namespace: str = "") -> None:
    """Collect named types (records, enums, fixed) by their short and full names."""
    if isinstance(schema, list):
        for branch in schema:
            _named(branch, names, namespace)
    elif isinstance(schema, dict):
        kind = schema.get("type")
        if kind in ("record", "error", "enum", "fixed"):
            name = schema["name"]
            ns = schema.get("namespace", namespace)
            names[name] = schema
            names[name.rsplit(".", 1)[-1]] = schema
            if "." not in name and ns:
                names[f"{ns}.{name}"] = schema
            for f in schema.get("fields", []):
                _named(f["type"], names, ns)
        elif kind == "array":
            _named(schema["items"], names, namespace)
        elif kind == "map":
            _named(schema["values"], names, namespace)
        elif isinstance(kind, (dict, list)):
            _named(kind, names, namespace)


def _resolve(schema: Any, names: dict[str, Any]) -> Any:
    while True:
        if isinstance(schema, str) and schema not in _MIN_SIZE:
            schema = names[schema]
        elif isinstance(schema, dict) and isinstance(schema.get("type"), (str, dict, list)) \
                and schema["type"] not in ("record", "error", "enum", "fixed", "array", "map"):
            schema = schema["type"]
        else:
            return schema


def _min_size(schema: Any, names: dict[str, Any], seen: frozenset[str] = frozenset()) -> int:
    s = _resolve(schema, names)
    if isinstance(s, str):
        return _MIN_SIZE[s]
    if isinstance(s, list):
        return 1  # the branch index
    kind = s["type"]
    if kind in ("array", "map", "enum"):
        return 1
    if kind == "fixed":
        return int(s["size"])
    name = s["name"]
    if name in seen:
        return 1  # a recursive record must stop somewhere: through a union or array
    return sum(_min_size(f["type"], names, seen | {name}) for f in s["fields"])


def needs_bounds_walk(schema: Schema) -> bool:
    """True when an array's items can take zero bytes: the only unbounded-allocation input."""
    names: dict[str, Any] = {}
    _named(schema, names)
    found = False

    def visit(s: Any, seen: frozenset[str]) -> None:
        nonlocal found
        s = _resolve(s, names)
        if isinstance(s, list):
            for b in s:
                visit(b, seen)
        elif isinstance(s, dict):
            kind = s["type"]
            if kind == "array":
                if _min_size(s["items"], names) == 0:
                    found = True
                visit(s["items"], seen)
            elif kind == "map":
                visit(s["values"], seen)
            elif kind in ("record", "error") and s["name"] not in seen:
                for f in s["fields"]:
                    visit(f["type"], seen | {s["name"]})

    visit(schema, frozenset())
    return found


class _Reader:
    def __init__(self, data: memoryview) -> None:
        self.data = data
        self.pos = 0
        self.empty_items = 0

    def long(self) -> int:
        shift = 0
        acc = 0
        while True:
            if self.pos >= len(self.data):
                raise DecodeError("truncated varint")
            b = self.data[self.pos]
            self.pos += 1
            acc |= (b & 0x7F) << shift
            if not b & 0x80:
                return (acc >> 1) ^ -(acc & 1)
            shift += 7
            if shift > 63:
                raise DecodeError("varint longer than 10 bytes")

    def skip(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.data):
            raise DecodeError(f"length {n} runs past the end of the value")
        self.pos += n


def check_bounds(body: memoryview, schema: Schema) -> None:
    """Walk `body` as `schema` without building values; refuse block counts that claim more
    zero-byte items than MAX_EMPTY_ITEMS or more sized items than there are bytes left."""
    names: dict[str, Any] = {}
    _named(schema, names)
    r = _Reader(body)

    def walk(s: Any, depth: int) -> None:
        if depth > 200:
            raise DecodeError("value nests deeper than 200 levels")
        s = _resolve(s, names)
        if isinstance(s, str):
            if s in ("int", "long"):
                r.long()
            elif s == "boolean":
                r.skip(1)
            elif s in ("float", "double"):
                r.skip(_MIN_SIZE[s])
            elif s in ("bytes", "string"):
                r.skip(r.long())
            return
        if isinstance(s, list):
            idx = r.long()
            if not 0 <= idx < len(s):
                raise DecodeError(f"union branch {idx} out of range")
            walk(s[idx], depth + 1)
            return
        kind = s["type"]
        if kind in ("record", "error"):
            for f in s["fields"]:
                walk(f["type"], depth + 1)
        elif kind == "enum":
            r.long()
        elif kind == "fixed":
            r.skip(int(s["size"]))
        elif kind in ("array", "map"):
            item = s["items"] if kind == "array" else s["values"]
            per_item = 1 if kind == "map" else _min_size(item, names)
            while True:
                count = r.long()
                if count == 0:
                    return
                if count < 0:
                    count = -count
                    r.long()  # the block's size in bytes; its items follow as usual
                if per_item == 0:
                    r.empty_items += count
                    if r.empty_items > MAX_EMPTY_ITEMS:
                        raise DecodeError(f"array claims more than {MAX_EMPTY_ITEMS} empty items")
                elif count * per_item > len(r.data) - r.pos:
                    raise DecodeError(f"block of {count} items is longer than the value")
                for _ in range(count):
                    if kind == "map":
                        r.skip(r.long())
                    walk(item, depth + 1)

    walk(schema, 0)
