"""Schema types: parse a schema text, check it, and give the form used for equality.

Avro is parsed by fastavro; equality is on a key-sorted, whitespace-free JSON rendering of the
schema (it keeps defaults and docs, which Avro's Parsing Canonical Form drops: two schemas that
differ only in a default must get different ids, as in Confluent's registry). JSON Schema is
checked against its metaschema (jsonschema). Protobuf (`protobuf`) is `.proto` text or a base64
FileDescriptorProto, compared as its rendering (`protobuf_text`).

`normalize=True` (Confluent's `normalize` query parameter) stores the normal form instead of
the text given: for Avro and JSON the key-sorted compact JSON, for Protobuf the rendering with
fields by number and types and imports by name. `ParsedSchema.normal` is that form, computed
for every schema, so a normalized register or lookup finds a schema registered either way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from odradek.registry.errors import invalid_schema

AVRO = "AVRO"
JSON = "JSON"
PROTOBUF = "PROTOBUF"
SCHEMA_TYPES = (JSON, PROTOBUF, AVRO)


@dataclass(frozen=True)
class ParsedSchema:
    schema_type: str
    text: str
    canonical: str
    references: tuple[tuple[str, str, int], ...] = ()
    # fastavro's parsed form (AVRO only), used by the compatibility checker.
    parsed: Any = field(default=None, compare=False, hash=False)
    # Confluent's metadata and ruleSet objects, stored and returned as given; `extras` is their
    # canonical JSON, part of the identity (a schema with other rules is another schema).
    metadata: Any = field(default=None, compare=False, hash=False)
    rule_set: Any = field(default=None, compare=False, hash=False)
    extras: str = ""
    normal: str = ""

    def identity(self, normalized: bool = False) -> tuple[str, str, tuple[tuple[str, str, int], ...],
                                                        str]:
        """What makes two registrations the same schema (and so the same id)."""
        return (self.schema_type, self.normal if normalized else self.canonical, self.references,
                self.extras)


def with_extras(schema: ParsedSchema, metadata: Any, rule_set: Any) -> ParsedSchema:
    for name, value in (("metadata", metadata), ("ruleSet", rule_set)):
        if value is not None and not isinstance(value, dict):
            raise invalid_schema(f"{name} must be an object")
    if metadata is None and rule_set is None:
        return schema
    extras = _compact({"metadata": metadata, "ruleSet": rule_set})
    return replace(schema, metadata=metadata, rule_set=rule_set, extras=extras)


def _references(refs: Any) -> tuple[tuple[str, str, int], ...]:
    if refs in (None, []):
        return ()
    if not isinstance(refs, list):
        raise invalid_schema("references must be a list")
    out = []
    for ref in refs:
        if not isinstance(ref, dict) or not isinstance(ref.get("name"), str) \
                or not isinstance(ref.get("subject"), str) or not isinstance(ref.get("version"), int):
            raise invalid_schema(f"bad reference {ref!r}")
        out.append((ref["name"], ref["subject"], ref["version"]))
    return tuple(out)


def parse(schema_type: str | None, text: Any, refs: Any = None,
          referenced: list[ParsedSchema] | None = None, normalize: bool = False) -> ParsedSchema:
    """Parse `text` as `schema_type` (AVRO when absent); raise 42201 when it is not one.

    `referenced` are the already parsed schemas that `refs` name, in order (Avro named types,
    Protobuf imports by the reference's name).
    """
    parsed = _parse(schema_type, text, refs, referenced)
    if normalize:
        parsed = replace(parsed, text=parsed.normal, canonical=parsed.normal)
    return parsed


def _parse(schema_type: str | None, text: Any, refs: Any,
           referenced: list[ParsedSchema] | None) -> ParsedSchema:
    kind = (schema_type or AVRO).upper()
    if kind not in SCHEMA_TYPES:
        raise invalid_schema(f"unknown schema type {schema_type!r}")
    if not isinstance(text, str) or not text.strip():
        raise invalid_schema("the schema must be a non-empty string")
    references = _references(refs)
    if kind == AVRO:
        return _parse_avro(text, references, referenced or [])
    if kind == JSON:
        try:
            obj = json.loads(text)
        except ValueError as exc:
            raise invalid_schema(f"not JSON: {exc}") from None
        if not isinstance(obj, (dict, bool)):
            raise invalid_schema("a JSON Schema is an object or a boolean")
        _check_json_schema(obj)
        return ParsedSchema(JSON, text, _compact(obj), references, normal=_compact(obj))
    return _parse_protobuf(text, references, referenced or [])


def _parse_protobuf(text: str, references: tuple[tuple[str, str, int], ...],
                    referenced: list[ParsedSchema]) -> ParsedSchema:
    from odradek.registry import protobuf
    from odradek.registry.protobuf_text import render

    imports = {name: ref.parsed for (name, _, _), ref in zip(references, referenced, strict=False)
               if isinstance(ref.parsed, protobuf.ProtoSchema)}
    proto = protobuf.parse(text, imports)
    canonical = render(proto.file)
    # A descriptor sent in base64 is stored as text, as Confluent's registry does.
    stored = canonical if protobuf.is_serialized(text) else text
    return ParsedSchema(PROTOBUF, stored, canonical, references, proto,
                        normal=render(proto.file, normalize=True))


def _check_json_schema(obj: Any) -> None:
    """Validate against the metaschema the schema names ($schema; the latest draft if none)."""
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    try:
        validator_for(obj).check_schema(obj)
    except SchemaError as exc:
        raise invalid_schema(f"not a JSON Schema: {exc.message}") from None


def _compact(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _parse_avro(text: str, references: tuple[tuple[str, str, int], ...],
                referenced: list[ParsedSchema]) -> ParsedSchema:
    from fastavro.schema import parse_schema

    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise invalid_schema(f"not JSON: {exc}") from None
    _require_fields(obj)
    named: dict[str, Any] = {}
    try:
        for ref in referenced:
            parse_schema(json.loads(ref.text), named_schemas=named)
        parsed = parse_schema(obj, named_schemas=named)
    except Exception as exc:  # fastavro raises several types for a bad schema
        raise invalid_schema(str(exc)) from None
    return ParsedSchema(AVRO, text, _compact(obj), references, (parsed, named),
                        normal=_compact(obj))


def _require_fields(obj: Any) -> None:
    """fastavro takes a record without `fields` as an empty record; the Avro spec requires it."""
    if isinstance(obj, list):
        for branch in obj:
            _require_fields(branch)
    elif isinstance(obj, dict):
        kind = obj.get("type")
        if kind in ("record", "error"):
            if not isinstance(obj.get("fields"), list):
                raise invalid_schema(f"record {obj.get('name')!r} has no fields list")
            for f in obj["fields"]:
                if isinstance(f, dict):
                    _require_fields(f.get("type"))
        elif kind == "array":
            _require_fields(obj.get("items"))
        elif kind == "map":
            _require_fields(obj.get("values"))
        elif isinstance(kind, (dict, list)):
            _require_fields(kind)
