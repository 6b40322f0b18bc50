"""Compatibility levels: which earlier versions a new schema is checked against, which way."""

from __future__ import annotations

from odradek.registry.avro_compat import can_read
from odradek.registry.schemas import AVRO, ParsedSchema

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE",
          "FULL", "FULL_TRANSITIVE")
DEFAULT_LEVEL = "BACKWARD"


def check_pair(level: str, new: ParsedSchema, old: ParsedSchema) -> list[str]:
    """Reasons `new` is not compatible with `old` under `level` (empty: compatible)."""
    if level == "NONE":
        return []
    if new.schema_type != old.schema_type:
        return [f"the schema type changed from {old.schema_type} to {new.schema_type}"]
    if new.schema_type != AVRO:
        # JSON Schema and Protobuf rules are not implemented yet: same type passes.
        return []
    reasons: list[str] = []
    if level.startswith(("BACKWARD", "FULL")):  # the new schema reads the old data
        reasons += [f"BACKWARD {r}" for r in can_read(new.parsed, old.parsed)]
    if level.startswith(("FORWARD", "FULL")):  # the old schema reads the new data
        reasons += [f"FORWARD {r}" for r in can_read(old.parsed, new.parsed)]
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
