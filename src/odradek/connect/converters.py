"""`key.converter` / `value.converter`: Kafka's class names, resolved from the connector's
config over the worker's (`value.converter.schemas.enable` and the like ride along).

Kept here: StringConverter, ByteArrayConverter and JsonConverter (with and without the
schema envelope). A converter we do not implement is refused by validation, never
replaced with another.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

STRING = "org.apache.kafka.connect.storage.StringConverter"
BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"
JSON = "org.apache.kafka.connect.json.JsonConverter"
KNOWN = (STRING, BYTES, JSON)
# What connect-distributed.properties ships with.
WORKER_DEFAULTS = {"key.converter": JSON, "value.converter": JSON,
                   "key.converter.schemas.enable": "true",
                   "value.converter.schemas.enable": "true"}


@dataclass(frozen=True)
class Converter:
    kind: str  # string | bytes | json
    schemas: bool = True

    def from_text(self, text: str | None) -> bytes | None:
        """A string value (a Connect STRING schema) to its serialised bytes."""
        if text is None:
            return None
        if self.kind == "json":
            if self.schemas:
                return json.dumps({"schema": {"type": "string", "optional": False},
                                   "payload": text}, separators=(",", ":")).encode()
            return json.dumps(text).encode()
        return text.encode()

    def to_value(self, raw: bytes | None) -> Any:
        """Serialised bytes to the Connect value (str, bytes, or a JSON value)."""
        if raw is None:
            return None
        if self.kind == "string":
            return raw.decode()
        if self.kind == "bytes":
            return raw
        obj = json.loads(raw)
        if self.schemas:
            if not (isinstance(obj, dict) and set(obj) == {"schema", "payload"}):
                raise ValueError(
                    "JsonConverter with schemas.enable requires \"schema\" and \"payload\" "
                    "fields and may not contain additional fields. If you are trying to "
                    "deserialize plain JSON data, set schemas.enable=false in your converter "
                    "configuration.")
            return obj["payload"]
        return obj


def resolve(which: str, connector: Mapping[str, str],
            worker: Mapping[str, str] = WORKER_DEFAULTS) -> Converter:
    """`which` is "key.converter" or "value.converter"."""
    source = connector if which in connector else worker
    name = source.get(which, JSON)
    if name not in KNOWN:
        raise ValueError(f"converter {name} is not available (known: {', '.join(KNOWN)})")
    if name == STRING:
        return Converter("string")
    if name == BYTES:
        return Converter("bytes")
    schemas = source.get(f"{which}.schemas.enable", "true").strip().lower() == "true"
    return Converter("json", schemas)


def text_of(value: Any) -> str:
    """How a sink that writes text (FileStreamSink) prints a value: Kafka prints the value's
    toString; a JSON value other than a string is printed as its JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return json.dumps(value, separators=(",", ":"))
