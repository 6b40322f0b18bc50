"""Compatibility levels: which earlier versions a new schema is checked against, which way."""

from __future__ import annotations

import json
from typing import Any

from odradek.registry.avro_compat import can_read
from odradek.registry.json_compat import can_read as json_can_read
from odradek.registry.protobuf_compat import can_read as proto_can_read
from odradek.registry.schemas import AVRO, JSON, PROTOBUF, ParsedSchema

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE",
          "FULL", "FULL_TRANSITIVE")
DEFAULT_LEVEL = "BACKWARD"


def check_pair(level: str, new: ParsedSchema, old: ParsedSchema) -> list[str]:
    """Reasons `new` is not compatible with `old` under `level` (empty: compatible)."""
    if level == "NONE":
        return []
    if new.schema_type != old.schema_type:
        return [f"the schema type changed from {old.schema_type} to {new.schema_type}"]
    reader_of: Any
    if new.schema_type == AVRO:
        reader_of = can_read
        new_form, old_form = new.parsed, old.parsed
    elif new.schema_type == JSON:
        reader_of = json_can_read
        new_form, old_form = json.loads(new.text), json.loads(old.text)
    elif new.schema_type == PROTOBUF and new.parsed is not None and old.parsed is not None:
        reader_of = proto_can_read
        new_form, old_form = new.parsed, old.parsed
    else:
        # A stored record this registry could not parse (kept as text): nothing to compare.
        return []
    reasons: list[str] = []
    if level.startswith(("BACKWARD", "FULL")):  # the new schema reads the old data
        reasons += [f"BACKWARD {r}" for r in reader_of(new_form, old_form)]
    if level.startswith(("FORWARD", "FULL")):  # the old schema reads the new data
        reasons += [f"FORWARD {r}" for r in reader_of(old_form, new_form)]
    return reasons


def check(level: str, new: ParsedSchema, previous: list[ParsedSchema]) -> list[str]:
    """Check `new` against the live versions `previous` (oldest first) under `level`."""
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    reasons: list[str] = []
    for old in against:
        reasons += check_pair(level, new, old)
    return reasons
