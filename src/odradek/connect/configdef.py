"""Connector config definitions and Connect's validation answer (ConfigDef, ConfigInfos).

A definition is one field: name, type, default (None: required), importance, documentation,
group, and an optional check that returns error messages. `validate` answers in the shape of
`PUT /connector-plugins/{plugin}/config/validate`: `name`, `error_count`, `groups`, and per
field its `definition` and its `value` (`value`, `recommended_values`, `errors`, `visible`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Check = Callable[[str, Mapping[str, str]], list[str]]
TYPES = ("BOOLEAN", "STRING", "INT", "SHORT", "LONG", "DOUBLE", "LIST", "CLASS", "PASSWORD")


@dataclass(frozen=True)
class Field:
    name: str
    type: str
    default: str | None  # None: required
    importance: str
    documentation: str
    group: str = "Common"
    display_name: str = ""
    check: Check | None = None
    recommended: Sequence[str] = ()
    at_least: int | None = None

    @property
    def required(self) -> bool:
        return self.default is None

    def definition(self, order: int) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "required": self.required,
                "default_value": self.default, "importance": self.importance,
                "documentation": self.documentation, "group": self.group, "width": "NONE",
                "display_name": self.display_name or self.name, "dependents": [],
                "order": order}

    def errors(self, config: Mapping[str, str]) -> list[str]:
        raw = config.get(self.name)
        if raw is None:
            if self.required:
                return [f'Missing required configuration "{self.name}" which has no default '
                        f"value."]
            raw = self.default
        assert raw is not None
        out = _type_errors(self, raw)
        if not out and self.check is not None:
            out = self.check(raw, config)
        return out


def _type_errors(f: Field, raw: str) -> list[str]:
    text = raw.strip()
    if f.type in ("INT", "SHORT", "LONG"):
        if not re.fullmatch(r"[+-]?\d+", text):
            return [f'Invalid value {raw} for configuration {f.name}: Not a number of type '
                    f'{f.type}']
        if f.at_least is not None and int(text) < f.at_least:
            return [f"Invalid value {raw} for configuration {f.name}: Value must be at least "
                    f"{f.at_least}"]
    if f.type == "BOOLEAN" and text.lower() not in ("true", "false"):
        return [f"Invalid value {raw} for configuration {f.name}: Expected value to be either "
                f"true or false"]
    if f.type == "DOUBLE":
        try:
            float(text)
        except ValueError:
            return [f"Invalid value {raw} for configuration {f.name}: Not a number of type "
                    f"DOUBLE"]
    if f.recommended and text not in f.recommended:
        return [f"Invalid value {raw} for configuration {f.name}: String must be one of: "
                f"{', '.join(f.recommended)}"]
    return []


def as_list(raw: str | None) -> list[str]:
    return [item.strip() for item in (raw or "").split(",") if item.strip()]


@dataclass
class Validation:
    """Per-field errors plus the answer's body."""

    name: str
    fields: list[Field]
    config: Mapping[str, str]
    extra: dict[str, list[str]] = field(default_factory=dict)

    def errors(self) -> dict[str, list[str]]:
        out = {f.name: f.errors(self.config) for f in self.fields}
        for key, messages in self.extra.items():
            out.setdefault(key, []).extend(messages)
        return out

    def error_count(self) -> int:
        return sum(len(v) for v in self.errors().values())

    def body(self) -> dict[str, Any]:
        errs = self.errors()
        groups: list[str] = []
        configs = []
        for order, f in enumerate(self.fields, start=1):
            if f.group not in groups:
                groups.append(f.group)
            configs.append({
                "definition": f.definition(order),
                "value": {"name": f.name, "value": self.config.get(f.name, f.default),
                          "recommended_values": list(f.recommended),
                          "errors": errs.get(f.name, []), "visible": True}})
        return {"name": self.name, "error_count": sum(len(v) for v in errs.values()),
                "groups": groups, "configs": configs}

    def message(self) -> str:
        """The 400 text Kafka's herder gives for an invalid create or update."""
        lines = [f"{key}: {msg}" for key, msgs in self.errors().items() for msg in msgs]
        return (f"Connector configuration is invalid and contains the following "
                f"{len(lines)} error(s):\n" + "\n".join(lines) +
                "\nYou can also find the above list of errors at the endpoint "
                "`/connector-plugins/{connectorType}/config/validate`")
