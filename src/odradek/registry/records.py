"""The `_schemas` records, keyed and shaped as Confluent's registry writes them (JSON)."""

from __future__ import annotations

import json
from typing import Any

TOPIC = "_schemas"


def encode(obj: dict[str, Any] | None) -> bytes | None:
    return None if obj is None else json.dumps(obj, separators=(",", ":")).encode()


def decode(raw: bytes | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    obj = json.loads(raw)
    return obj if isinstance(obj, dict) else None


def schema_key(subject: str, version: int) -> dict[str, Any]:
    return {"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}


def schema_value(subject: str, version: int, schema_id: int, schema: str, schema_type: str,
                 references: list[dict[str, Any]], deleted: bool, metadata: Any = None,
                 rule_set: Any = None) -> dict[str, Any]:
    value: dict[str, Any] = {"subject": subject, "version": version, "id": schema_id,
                             "schema": schema, "deleted": deleted}
    # Confluent leaves schemaType out for Avro (the default) and writes it for the others.
    if schema_type != "AVRO":
        value["schemaType"] = schema_type
    if references:
        value["references"] = references
    if metadata is not None:
        value["metadata"] = metadata
    if rule_set is not None:
        value["ruleSet"] = rule_set
    return value


def config_key(subject: str | None) -> dict[str, Any]:
    key: dict[str, Any] = {"keytype": "CONFIG"}
    if subject is not None:
        key["subject"] = subject
    key["magic"] = 0
    return key


def mode_key(subject: str | None) -> dict[str, Any]:
    key: dict[str, Any] = {"keytype": "MODE"}
    if subject is not None:
        key["subject"] = subject
    key["magic"] = 0
    return key


def delete_subject_key(subject: str) -> dict[str, Any]:
    return {"keytype": "DELETE_SUBJECT", "subject": subject, "magic": 0}


def noop_key() -> dict[str, Any]:
    return {"keytype": "NOOP", "magic": 0}
