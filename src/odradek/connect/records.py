"""The records of Kafka Connect's three internal topics, keyed and shaped as Kafka writes them.

Connect serialises these values with its internal JsonConverter, `schemas.enable=false`, so a
value is plain JSON; keys are plain strings (configs, status) or a JSON array (offsets):

connect-configs (one partition):
    connector-<name>         {"properties": {...}}        the connector's config; null deletes
    task-<name>-<n>          {"properties": {...}}        task n's config
    commit-<name>            {"tasks": N}                 the task configs before it count
    target-state-<name>      {"state": "STARTED"|"PAUSED", "state.v2": "STARTED"|"PAUSED"|"STOPPED"}
    restart-connector-<name> {"include-tasks": bool, "only-failed": bool}
connect-status:
    status-connector-<name>  {"state", "trace", "worker_id", "generation"}
    status-task-<name>-<n>   the same
connect-offsets:
    ["<connector>", {partition}]  {offset}; null deletes (KIP-875)

Kafka writes STOPPED (KIP-875) as `"state": "PAUSED", "state.v2": "STOPPED"` so that older
workers, which know only the first field, at least keep the connector from running.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

CONFIG_TOPIC = "connect-configs"
OFFSET_TOPIC = "connect-offsets"
STATUS_TOPIC = "connect-status"
# Kafka's defaults: offset.storage.partitions=25, status.storage.partitions=5; the config
# topic must have exactly one partition (its records are ordered across connectors).
OFFSET_PARTITIONS = 25
STATUS_PARTITIONS = 5

CONNECTOR_PREFIX = "connector-"
TASK_PREFIX = "task-"
COMMIT_PREFIX = "commit-"
TARGET_STATE_PREFIX = "target-state-"
RESTART_PREFIX = "restart-connector-"
STATUS_CONNECTOR_PREFIX = "status-connector-"
STATUS_TASK_PREFIX = "status-task-"

TARGET_STATES = ("STARTED", "PAUSED", "STOPPED")
# Connect's runtime states (AbstractStatus.State).
STATES = ("UNASSIGNED", "RUNNING", "PAUSED", "FAILED", "RESTARTING", "STOPPED", "DESTROYED")


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def loads(raw: bytes | None) -> Any:
    return None if raw is None else json.loads(raw)


# ---- connect-configs ------------------------------------------------------------------------
def connector_key(name: str) -> str:
    return CONNECTOR_PREFIX + name


def task_key(name: str, task: int) -> str:
    return f"{TASK_PREFIX}{name}-{task}"


def commit_key(name: str) -> str:
    return COMMIT_PREFIX + name


def target_state_key(name: str) -> str:
    return TARGET_STATE_PREFIX + name


def restart_key(name: str) -> str:
    return RESTART_PREFIX + name


def properties_value(props: dict[str, str]) -> dict[str, Any]:
    return {"properties": dict(props)}


def commit_value(tasks: int) -> dict[str, Any]:
    return {"tasks": tasks}


def target_state_value(state: str) -> dict[str, Any]:
    if state not in TARGET_STATES:
        raise ValueError(f"unknown target state {state!r}")
    return {"state": "PAUSED" if state == "STOPPED" else state, "state.v2": state}


def target_state_of(value: dict[str, Any]) -> str:
    """`state.v2` when present (it can say STOPPED), else `state`."""
    state = value.get("state.v2") or value.get("state")
    if state not in TARGET_STATES:
        raise ValueError(f"unknown target state {state!r}")
    return str(state)


def restart_value(include_tasks: bool, only_failed: bool) -> dict[str, Any]:
    return {"include-tasks": include_tasks, "only-failed": only_failed}


@dataclass(frozen=True)
class ConfigKey:
    kind: str  # connector, task, commit, target-state, restart
    connector: str
    task: int | None = None


def parse_config_key(key: str) -> ConfigKey | None:
    """The kind of a connect-configs key; None for keys we do not use (session-key, fencing).

    `task-<name>-<n>`: the task number is after the last dash (a name may hold dashes)."""
    for prefix, kind in ((TARGET_STATE_PREFIX, "target-state"), (RESTART_PREFIX, "restart"),
                         (CONNECTOR_PREFIX, "connector"), (COMMIT_PREFIX, "commit")):
        if key.startswith(prefix):
            return ConfigKey(kind, key[len(prefix):])
    if key.startswith(TASK_PREFIX):
        name, _, number = key[len(TASK_PREFIX):].rpartition("-")
        if name and number.isdigit():
            return ConfigKey("task", name, int(number))
    return None


# ---- connect-status -------------------------------------------------------------------------
def status_connector_key(name: str) -> str:
    return STATUS_CONNECTOR_PREFIX + name


def status_task_key(name: str, task: int) -> str:
    return f"{STATUS_TASK_PREFIX}{name}-{task}"


def status_value(state: str, worker_id: str, generation: int,
                 trace: str | None = None) -> dict[str, Any]:
    if state not in STATES:
        raise ValueError(f"unknown state {state!r}")
    return {"state": state, "trace": trace, "worker_id": worker_id, "generation": generation}


def parse_status_key(key: str) -> ConfigKey | None:
    if key.startswith(STATUS_CONNECTOR_PREFIX):
        return ConfigKey("connector", key[len(STATUS_CONNECTOR_PREFIX):])
    if key.startswith(STATUS_TASK_PREFIX):
        name, _, number = key[len(STATUS_TASK_PREFIX):].rpartition("-")
        if name and number.isdigit():
            return ConfigKey("task", name, int(number))
    return None


# ---- connect-offsets ------------------------------------------------------------------------
def offset_key(connector: str, partition: dict[str, Any]) -> bytes:
    return dumps([connector, partition])


def parse_offset_key(raw: bytes) -> tuple[str, dict[str, Any]] | None:
    """(connector, source partition), or None for a key that is not Connect's shape."""
    try:
        key = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if (isinstance(key, list) and len(key) == 2 and isinstance(key[0], str)
            and isinstance(key[1], dict)):
        return key[0], key[1]
    return None
