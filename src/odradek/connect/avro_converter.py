"""io.confluent.connect.avro.AvroConverter: Connect data to Avro in Confluent's wire format
(magic byte 0, the schema's 4-byte registry id, the Avro binary) and back, against a Schema
Registry (`schema.registry.url`: the node's own, or any Confluent-compatible one).

Writing registers the record's schema under the topic's subject (TopicNameStrategy:
`<topic>-value`, `<topic>-key`) when `auto.register.schemas` (default true), else looks its id
up; reading fetches the writer's schema by id. Schemas translate as Confluent's AvroData does:
a STRUCT is a record (named by the Connect schema, else `ConnectDefault` in namespace
`io.confluent.connect.avro`), an optional schema a union with null first (default null),
INT8/INT16 an int tagged `connect.type`, Decimal/Date/Time/Timestamp Avro's logical types;
on reading, an enum is a STRING, a fixed BYTES, and a union other than [null, T] is refused.
"""

from __future__ import annotations

import io
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from odradek.connect import data
from odradek.connect.data import DataError, Schema
from odradek.connect.registry_wire import Cache, frame, split_wire

NAMESPACE = "io.confluent.connect.avro"
_AVRO_PRIMITIVE = {"INT32": "int", "INT64": "long", "FLOAT32": "float", "FLOAT64": "double",
                   "BOOLEAN": "boolean", "STRING": "string", "BYTES": "bytes",
                   "INT8": "int", "INT16": "int"}
_FROM_AVRO = {"int": "INT32", "long": "INT64", "float": "FLOAT32", "double": "FLOAT64",
              "boolean": "BOOLEAN", "string": "STRING", "bytes": "BYTES"}


class RegistryClient:
    """The two calls the converter needs, over HTTP (Confluent's REST API)."""

    def __init__(self, urls: list[str], timeout: float = 30.0) -> None:
        self.urls = urls
        self.timeout = timeout

    @staticmethod
    def settings(own: Mapping[str, str]) -> tuple[list[str], bool]:
        """A converter's `schema.registry.url` (required) and `auto.register.schemas`."""
        urls = [u.strip() for u in own.get("schema.registry.url", "").split(",") if u.strip()]
        if not urls:
            raise ValueError('Missing required configuration "schema.registry.url" which has '
                             "no default value.")
        return urls, own.get("auto.register.schemas", "true").strip().lower() == "true"

    def id_for(self, subject: str, schema: str, schema_type: str, register: bool,
               references: list[dict[str, Any]] | None = None) -> int:
        """The schema's id under `subject`: registered (auto.register.schemas) or looked up."""
        if register:
            return self.register(subject, schema, schema_type, references)
        return self.lookup(subject, schema, schema_type, references)

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        last: Exception | None = None
        for url in self.urls:
            raw = None if body is None else json.dumps(body).encode()
            req = urllib.request.Request(url.rstrip("/") + path, data=raw, method=method,
                                         headers={"Content-Type":
                                                  "application/vnd.schemaregistry.v1+json"})
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    return json.loads(resp.read())
            except urllib.error.HTTPError as exc:
                text = exc.read().decode(errors="replace")
                raise DataError(f"Schema Registry {method} {path}: {exc.code} {text}") from None
            except OSError as exc:
                last = exc
        raise DataError(f"Schema Registry at {', '.join(self.urls)} not reachable: {last}")

    @staticmethod
    def _body(schema: str, schema_type: str,
              references: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        # Confluent's API: no schemaType means AVRO.
        out: dict[str, Any] = {"schema": schema}
        if schema_type != "AVRO":
            out["schemaType"] = schema_type
        if references:
            out["references"] = references
        return out

    def register(self, subject: str, schema: str, schema_type: str = "AVRO",
                 references: list[dict[str, Any]] | None = None) -> int:
        path = f"/subjects/{urllib.parse.quote(subject, safe='')}/versions"
        return int(self._call("POST", path, self._body(schema, schema_type, references))["id"])

    def lookup(self, subject: str, schema: str, schema_type: str = "AVRO",
               references: list[dict[str, Any]] | None = None) -> int:
        path = f"/subjects/{urllib.parse.quote(subject, safe='')}"
        return int(self._call("POST", path, self._body(schema, schema_type, references))["id"])

    def schema(self, schema_id: int) -> str:
        return str(self._call("GET", f"/schemas/ids/{schema_id}")["schema"])

    def schema_info(self, schema_id: int, fmt: str = "") -> dict[str, Any]:
        """The registry's whole answer for an id (schemaType, references), `?format=` given."""
        query = f"?format={urllib.parse.quote(fmt)}" if fmt else ""
        return dict(self._call("GET", f"/schemas/ids/{schema_id}{query}"))


@dataclass
class AvroConverter:
    registry: RegistryClient
    is_key: bool = False
    auto_register: bool = True
    kind: str = "avro"
    schemas: bool = True
    _ids: Cache[tuple[str, str], int] = field(default_factory=Cache)
    _readers: Cache[int, tuple[Any, Schema]] = field(default_factory=Cache)

    @classmethod
    def configure(cls, own: Mapping[str, str], is_key: bool) -> AvroConverter:
        urls, auto = RegistryClient.settings(own)
        return cls(RegistryClient(urls), is_key=is_key, auto_register=auto)

    def subject(self, topic: str) -> str:
        return f"{topic}-{'key' if self.is_key else 'value'}"

    def from_connect(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        import fastavro

        if value is None and (schema is None or schema.optional):
            return None
        if schema is None:
            raise DataError("AvroConverter needs a schema: the value has none (a schemaless "
                            "record, e.g. JsonConverter with schemas.enable=false)")
        avro = to_avro_schema(schema)
        text = json.dumps(avro, separators=(",", ":"))
        subject = self.subject(topic)
        schema_id = self._ids.get((subject, text), lambda: self.registry.id_for(
            subject, text, "AVRO", self.auto_register))
        out = io.BytesIO()
        fastavro.schemaless_writer(out, fastavro.parse_schema(avro),
                                   to_avro_value(schema, value))
        return frame(schema_id, out.getvalue())

    def to_connect(self, topic: str, raw: bytes | None) -> tuple[Schema | None, Any]:
        import fastavro

        if raw is None:
            return None, None
        schema_id, body = split_wire(raw)
        parsed, schema = self._readers.get(schema_id, lambda: self._reader(schema_id))
        try:
            value = fastavro.schemaless_reader(io.BytesIO(body), parsed, None)
        except Exception as exc:  # truncated or foreign bytes: any reader error is bad data
            raise DataError(f"Error deserializing Avro message for id {schema_id}: {exc}") \
                from None
        return schema, from_avro_value(schema, value)

    def _reader(self, schema_id: int) -> tuple[Any, Schema]:
        import fastavro

        text = self.registry.schema(schema_id)
        try:
            avro = json.loads(text)
            return fastavro.parse_schema(avro), from_avro_schema(avro)
        except DataError:
            raise
        except Exception as exc:  # a schema the registry holds but Avro cannot parse
            raise DataError(f"Error retrieving Avro schema for id {schema_id}: {exc}") \
                from None


# ---- schemas ---------------------------------------------------------------------------------
def to_avro_schema(schema: Schema, names: set[str] | None = None) -> Any:
    names = set() if names is None else names
    base: Any
    if schema.name == data.DECIMAL:
        scale = int(schema.params.get("scale", "0"))
        precision = int(schema.params.get("connect.decimal.precision", "64"))
        base = {"type": "bytes", "logicalType": "decimal", "precision": precision,
                "scale": scale}
    elif schema.name == data.DATE:
        base = {"type": "int", "logicalType": "date"}
    elif schema.name == data.TIME:
        base = {"type": "int", "logicalType": "time-millis"}
    elif schema.name == data.TIMESTAMP:
        base = {"type": "long", "logicalType": "timestamp-millis"}
    elif schema.type in _AVRO_PRIMITIVE:
        base = _AVRO_PRIMITIVE[schema.type]
        if schema.type in ("INT8", "INT16"):
            base = {"type": "int", "connect.type": schema.type.lower()}
    elif schema.type == "ARRAY":
        assert schema.value_schema is not None
        base = {"type": "array", "items": to_avro_schema(schema.value_schema, names)}
    elif schema.type == "MAP":
        assert schema.key_schema is not None and schema.value_schema is not None
        if schema.key_schema.type != "STRING" or schema.key_schema.optional:
            raise DataError("AvroConverter: only maps with required STRING keys are written")
        base = {"type": "map", "values": to_avro_schema(schema.value_schema, names)}
    else:
        full = schema.name or f"{NAMESPACE}.ConnectDefault"
        if full in names:  # Avro forbids a second definition of one name
            full = f"{full}{len(names)}"
        names.add(full)
        namespace, _, name = full.rpartition(".")
        base = {"type": "record", "name": name,
                "fields": [_avro_field(f, names) for f in schema.fields]}
        if namespace:
            base["namespace"] = namespace
        if schema.doc:
            base["doc"] = schema.doc
    if schema.name and schema.type != "STRUCT" and isinstance(base, dict) and \
            schema.name not in (data.DECIMAL, data.DATE, data.TIME, data.TIMESTAMP):
        base["connect.name"] = schema.name
    if schema.optional:
        return ["null", base]
    return base


def _avro_field(f: data.Field, names: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": f.name, "type": to_avro_schema(f.schema, names)}
    if f.schema.optional:
        out["default"] = None
    return out


def from_avro_schema(avro: Any, optional: bool = False) -> Schema:
    if isinstance(avro, list):
        members = [m for m in avro if m != "null"]
        if len(members) != 1:
            raise DataError(f"AvroConverter: a union of {avro} has no Connect schema here "
                            "(only [\"null\", T] unions are read)")
        return from_avro_schema(members[0], optional=optional or "null" in avro)
    if isinstance(avro, str):
        if avro not in _FROM_AVRO:
            raise DataError(f"AvroConverter: named type {avro!r} referenced; not read here")
        return Schema(_FROM_AVRO[avro], optional=optional)
    kind, logical = avro.get("type"), avro.get("logicalType")
    if logical == "decimal" and kind in ("bytes", "fixed"):
        return Schema("BYTES", optional=optional, name=data.DECIMAL, version=1, parameters=(
            ("connect.decimal.precision", str(avro.get("precision", 64))),
            ("scale", str(avro.get("scale", 0)))))
    if logical == "date" and kind == "int":
        return Schema("INT32", optional=optional, name=data.DATE, version=1)
    if logical == "time-millis" and kind == "int":
        return Schema("INT32", optional=optional, name=data.TIME, version=1)
    if logical == "timestamp-millis" and kind == "long":
        return Schema("INT64", optional=optional, name=data.TIMESTAMP, version=1)
    if kind == "record":
        name = avro["name"] if "." in avro["name"] or not avro.get("namespace") else \
            f"{avro['namespace']}.{avro['name']}"
        fields = [(f["name"], from_avro_schema(f["type"])) for f in avro["fields"]]
        return data.struct(fields, name=name, optional=optional)
    if kind == "array":
        return Schema("ARRAY", optional=optional, value_schema=from_avro_schema(avro["items"]))
    if kind == "map":
        return Schema("MAP", optional=optional, key_schema=Schema("STRING"),
                      value_schema=from_avro_schema(avro["values"]))
    if kind == "enum":
        return Schema("STRING", optional=optional)
    if kind == "fixed":
        return Schema("BYTES", optional=optional)
    if kind == "int" and avro.get("connect.type") in ("int8", "int16"):
        return Schema(str(avro["connect.type"]).upper(), optional=optional)
    if isinstance(kind, str | list | dict):
        return from_avro_schema(kind, optional)
    raise DataError(f"AvroConverter: Avro type {kind!r} not read")


# ---- values ---------------------------------------------------------------------------------
def to_avro_value(schema: Schema, value: Any) -> Any:
    """Connect value -> what fastavro writes (its logical types take Python's own)."""
    data.validate(schema, value)
    return _to_avro(schema, value)


def _to_avro(schema: Schema, value: Any) -> Any:
    if value is None:
        return None
    if schema.type == "STRUCT":
        return {f.name: _to_avro(f.schema, value.get(f.name)) for f in schema.fields}
    if schema.type == "ARRAY":
        assert schema.value_schema is not None
        return [_to_avro(schema.value_schema, v) for v in value]
    if schema.type == "MAP":
        assert schema.value_schema is not None
        return {k: _to_avro(schema.value_schema, v) for k, v in value.items()}
    return value


def from_avro_value(schema: Schema, value: Any) -> Any:
    """fastavro's value -> Connect's (timestamps come back as aware datetimes already)."""
    if value is None:
        return None
    if schema.type == "STRUCT":
        return {f.name: from_avro_value(f.schema, value.get(f.name)) for f in schema.fields}
    if schema.type == "ARRAY":
        assert schema.value_schema is not None
        return [from_avro_value(schema.value_schema, v) for v in value]
    if schema.type == "MAP":
        assert schema.value_schema is not None
        return {k: from_avro_value(schema.value_schema, v) for k, v in value.items()}
    return value
