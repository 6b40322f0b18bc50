"""Sans-I/O views of the three Connect topics, built by applying their records in order.

`ConfigState` follows KafkaConfigBackingStore's rules: task configs are held back until the
connector's `commit-<name>` record says how many there are, and only a complete set replaces
the previous one (a commit that names a task whose config is missing leaves the connector
"inconsistent" until the next full write). `StatusState` and `OffsetState` are last-value
tables; a null value (tombstone) deletes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from odradek.connect import records


@dataclass
class ConfigState:
    connectors: dict[str, dict[str, str]] = field(default_factory=dict)
    target_states: dict[str, str] = field(default_factory=dict)
    task_configs: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    inconsistent: set[str] = field(default_factory=set)
    # Restart requests read but not yet acted on, in order: (connector, include, only_failed).
    restarts: list[tuple[str, bool, bool]] = field(default_factory=list)
    _deferred: dict[str, dict[int, dict[str, str]]] = field(default_factory=dict)

    def apply(self, key: str, value: dict[str, Any] | None) -> None:
        parsed = records.parse_config_key(key)
        if parsed is None:
            return
        name = parsed.connector
        if parsed.kind == "connector":
            if value is None:
                self.connectors.pop(name, None)
                self.target_states.pop(name, None)
                self.task_configs.pop(name, None)
                self._deferred.pop(name, None)
                self.inconsistent.discard(name)
            else:
                self.connectors[name] = _props(value)
        elif parsed.kind == "task":
            assert parsed.task is not None
            if value is not None:
                self._deferred.setdefault(name, {})[parsed.task] = _props(value)
        elif parsed.kind == "commit":
            if value is None:
                return
            count = int(value["tasks"])
            pending = self._deferred.get(name, {})
            if all(n in pending for n in range(count)):
                self.task_configs[name] = [pending[n] for n in range(count)]
                self.inconsistent.discard(name)
                self._deferred.pop(name, None)
            else:
                self.inconsistent.add(name)
        elif parsed.kind == "target-state":
            if value is None:
                self.target_states.pop(name, None)
            else:
                self.target_states[name] = records.target_state_of(value)
        elif parsed.kind == "restart" and value is not None:
            self.restarts.append((name, bool(value.get("include-tasks", False)),
                                  bool(value.get("only-failed", False))))

    def target_state(self, name: str) -> str:
        """STARTED when no record says otherwise (Kafka's default)."""
        return self.target_states.get(name, "STARTED")


def _props(value: dict[str, Any]) -> dict[str, str]:
    props = value.get("properties")
    if not isinstance(props, dict):
        raise ValueError("a config record needs a 'properties' object")
    return {str(k): str(v) for k, v in props.items() if v is not None}


@dataclass
class StatusState:
    connectors: dict[str, dict[str, Any]] = field(default_factory=dict)
    tasks: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)

    def apply(self, key: str, value: dict[str, Any] | None) -> None:
        parsed = records.parse_status_key(key)
        if parsed is None:
            return
        if parsed.kind == "connector":
            if value is None:
                self.connectors.pop(parsed.connector, None)
            else:
                self.connectors[parsed.connector] = value
        else:
            assert parsed.task is not None
            tasks = self.tasks.setdefault(parsed.connector, {})
            if value is None:
                tasks.pop(parsed.task, None)
            else:
                tasks[parsed.task] = value


def canonical(partition: dict[str, Any]) -> str:
    """One spelling of a source partition, so two equal maps are one entry."""
    return json.dumps(partition, sort_keys=True, separators=(",", ":"))


@dataclass
class OffsetState:
    # connector -> canonical partition -> (partition, offset)
    offsets: dict[str, dict[str, tuple[dict[str, Any], dict[str, Any]]]] = field(
        default_factory=dict)

    def apply(self, raw_key: bytes, value: dict[str, Any] | None) -> None:
        parsed = records.parse_offset_key(raw_key)
        if parsed is None:
            return
        name, partition = parsed
        per = self.offsets.setdefault(name, {})
        if value is None:
            per.pop(canonical(partition), None)
        else:
            per[canonical(partition)] = (partition, value)

    def of(self, connector: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        return list(self.offsets.get(connector, {}).values())
