"""Record keys and values as a person reads them: Confluent's wire format (magic byte 0, a
4-byte schema id, the payload) decoded through the registry (Avro with fastavro, JSON as it
is, Protobuf field by field), else UTF-8 text (pretty JSON when it parses), else hex.

Protobuf fields are named from the registry's .proto text (`protobuf_view`); fields it does
not know, or a schema it cannot read, are shown by number and wire type.
"""

from __future__ import annotations

import io
import json
import re
import struct
import threading
from typing import Any

from odradek.console.http_json import HttpFailure, call
from odradek.console.protobuf_view import protobuf_fields
from odradek.protocol.primitives import decode_uvarint, zigzag_decode

MAX_SHOWN = 64 * 1024
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # bytes of one value shown; the rest is cut with a note


def plain(raw: bytes) -> dict[str, Any]:
    cut = len(raw) > MAX_SHOWN
    shown = raw[:MAX_SHOWN]
    try:
        text = shown.decode()
        if _CONTROL.search(text):  # valid UTF-8 but not text a person reads (NULs, escapes)
            raise UnicodeDecodeError("utf-8", shown, 0, 1, "control characters")
    except UnicodeDecodeError:
        return {"format": "binary", "value": shown.hex(), "size": len(raw), "cut": cut}
    if not cut:
        try:
            return {"format": "json", "value": json.loads(text), "size": len(raw)}
        except ValueError:
            pass
    return {"format": "text", "value": text, "size": len(raw), "cut": cut}


class Decoder:
    """Decodes with the registry at `registry_url` (None: no registry, plain decoding only);
    schemas are cached by id (an id's schema never changes)."""

    def __init__(self, registry_url: str | None) -> None:
        self.registry_url = registry_url
        self._schemas: dict[int, dict[str, Any]] = {}
        self._parsed: dict[int, Any] = {}
        self._lock = threading.Lock()

    def _schema(self, schema_id: int) -> dict[str, Any]:
        with self._lock:
            found = self._schemas.get(schema_id)
        if found is None:
            assert self.registry_url is not None
            found = call(self.registry_url, "GET", f"/schemas/ids/{schema_id}")
            with self._lock:
                self._schemas[schema_id] = found
        return found

    def _avro(self, schema_id: int, schema: dict[str, Any]) -> Any:
        import fastavro

        with self._lock:
            parsed = self._parsed.get(schema_id)
        if parsed is None:
            named: dict[str, Any] = {}
            for ref in schema.get("references") or []:
                got = call(self.registry_url or "", "GET",
                           f"/subjects/{ref['subject']}/versions/{ref['version']}")
                fastavro.parse_schema(json.loads(got["schema"]), named_schemas=named)
            parsed = fastavro.parse_schema(json.loads(schema["schema"]), named_schemas=named)
            with self._lock:
                self._parsed[schema_id] = parsed
        return parsed

    def _proto_imports(self, schema_id: int, schema: dict[str, Any]) -> list[Any]:
        """The top-level types of the files a Protobuf schema imports: its references'
        (fetched from the registry, theirs in turn) and the well-known types."""
        from odradek.console.protobuf_view import imports, top_types, well_known

        with self._lock:
            found = self._parsed.get(schema_id)
        if found is not None:
            return found  # type: ignore[no-any-return]
        out: list[Any] = []
        todo = list(schema.get("references") or [])
        seen: set[tuple[str, int]] = set()
        while todo and len(seen) < 64:
            ref = todo.pop()
            at = (ref["subject"], ref["version"])
            if at in seen:
                continue
            seen.add(at)
            got = call(self.registry_url or "", "GET",
                       f"/subjects/{ref['subject']}/versions/{ref['version']}")
            out += top_types(got["schema"])
            todo += got.get("references") or []
        if any(name.startswith("google/protobuf/") for name in imports(schema["schema"])):
            out += well_known()
        with self._lock:
            self._parsed[schema_id] = out
        return out

    def decode(self, raw: bytes | None) -> dict[str, Any]:
        if raw is None:
            return {"format": "null", "value": None, "size": 0}
        if self.registry_url is None or len(raw) < 5 or raw[0] != 0:
            return plain(raw)
        schema_id = struct.unpack_from(">i", raw, 1)[0]
        try:
            schema = self._schema(schema_id)
        except HttpFailure as exc:
            if exc.status == 404:
                return plain(raw)  # not the wire format after all
            return {**plain(raw), "error": f"schema {schema_id}: {exc.message}"}
        kind = schema.get("schemaType", "AVRO")
        payload = raw[5:]
        try:
            if kind == "AVRO":
                import fastavro

                value = fastavro.schemaless_reader(io.BytesIO(payload),
                                                   self._avro(schema_id, schema), None)
                return {"format": "avro", "schema_id": schema_id,
                        "value": json.loads(json.dumps(value, default=str)),
                        "size": len(raw)}
            if kind == "JSON":
                return {"format": "json-schema", "schema_id": schema_id,
                        "value": json.loads(payload), "size": len(raw)}
            count, pos = decode_uvarint(payload, 0)
            count = zigzag_decode(count)
            path = []
            for _ in range(max(count, 0)):
                index, pos = decode_uvarint(payload, pos)
                path.append(zigzag_decode(index))
            body = payload[pos:]
            try:
                from odradek.console.protobuf_view import decode_message, pick, top_messages

                top = top_messages(schema["schema"])
                message = pick(top, path)
                return {"format": "protobuf", "schema_id": schema_id, "message": message.name,
                        "value": decode_message(body, message,
                                                [*top, *self._proto_imports(schema_id, schema)]),
                        "size": len(raw)}
            except Exception:  # a schema this view cannot read: the fields by number
                return {"format": "protobuf", "schema_id": schema_id,
                        "message_index": path or [0], "value": protobuf_fields(body),
                        "size": len(raw)}
        except (ValueError, EOFError, IndexError, TypeError, KeyError) as exc:
            return {**plain(raw), "error": f"not decodable as {kind} schema {schema_id}: {exc}"}
