"""Issue 19: Connect's internal-topic records (Kafka's keys and values) and the views built
from them, with no process: KafkaConfigBackingStore's commit rules, KIP-875's STOPPED target
state, status and offset tombstones; the key parsers fuzzed."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from odradek.connect import records
from odradek.connect.state import ConfigState, OffsetState, StatusState


def test_config_keys_are_kafkas() -> None:
    assert records.connector_key("a-b") == "connector-a-b"
    assert records.task_key("a-b", 3) == "task-a-b-3"
    assert records.commit_key("a-b") == "commit-a-b"
    assert records.target_state_key("a") == "target-state-a"
    assert records.restart_key("a") == "restart-connector-a"
    assert records.parse_config_key("task-my-conn-12") == records.ConfigKey("task", "my-conn", 12)
    # "target-state-" and "restart-connector-" are not connectors named "state-..."
    assert records.parse_config_key("target-state-x").kind == "target-state"  # type: ignore[union-attr]
    assert records.parse_config_key("restart-connector-x").kind == "restart"  # type: ignore[union-attr]
    assert records.parse_config_key("session-key") is None
    assert records.parse_config_key("task-nonumber") is None


def test_values_are_kafkas_json() -> None:
    assert records.dumps(records.properties_value({"a": "1"})) == b'{"properties":{"a":"1"}}'
    assert records.commit_value(2) == {"tasks": 2}
    assert records.target_state_value("STOPPED") == {"state": "PAUSED", "state.v2": "STOPPED"}
    assert records.target_state_value("PAUSED") == {"state": "PAUSED", "state.v2": "PAUSED"}
    assert records.target_state_of({"state": "STARTED"}) == "STARTED"  # a pre-KIP-875 record
    assert records.status_value("FAILED", "h:8083", 4, "boom") == {
        "state": "FAILED", "trace": "boom", "worker_id": "h:8083", "generation": 4}
    assert records.offset_key("c", {"filename": "/f"}) == b'["c",{"filename":"/f"}]'
    assert records.parse_offset_key(b'["c",{"filename":"/f"}]') == ("c", {"filename": "/f"})


def test_task_configs_apply_only_at_a_complete_commit() -> None:
    state = ConfigState()
    state.apply("connector-c", {"properties": {"k": "v"}})
    state.apply("task-c-0", {"properties": {"t": "0"}})
    assert state.task_configs == {}  # not committed yet
    state.apply("task-c-1", {"properties": {"t": "1"}})
    state.apply("commit-c", {"tasks": 2})
    assert state.task_configs["c"] == [{"t": "0"}, {"t": "1"}]
    # A commit naming a task whose config is missing (compaction ate it, a writer died)
    # leaves the previous set and marks the connector inconsistent.
    state.apply("task-c-0", {"properties": {"t": "new0"}})
    state.apply("commit-c", {"tasks": 3})
    assert state.task_configs["c"] == [{"t": "0"}, {"t": "1"}] and "c" in state.inconsistent
    state.apply("task-c-1", {"properties": {"t": "new1"}})
    state.apply("task-c-2", {"properties": {"t": "new2"}})
    state.apply("commit-c", {"tasks": 3})
    assert [t["t"] for t in state.task_configs["c"]] == ["new0", "new1", "new2"]
    assert "c" not in state.inconsistent
    state.apply("commit-c", {"tasks": 0})  # stopped: no tasks
    assert state.task_configs["c"] == []


def test_target_states_restarts_and_deletion() -> None:
    state = ConfigState()
    state.apply("connector-c", {"properties": {}})
    assert state.target_state("c") == "STARTED"
    state.apply("target-state-c", records.target_state_value("STOPPED"))
    assert state.target_state("c") == "STOPPED"
    state.apply("restart-connector-c", records.restart_value(True, False))
    assert state.restarts == [("c", True, False)]
    state.apply("connector-c", None)
    assert "c" not in state.connectors and state.target_state("c") == "STARTED"


def test_status_and_offset_tombstones() -> None:
    status = StatusState()
    status.apply("status-connector-a-b", records.status_value("RUNNING", "w", 1))
    status.apply("status-task-a-b-0", records.status_value("FAILED", "w", 1, "t"))
    assert status.connectors["a-b"]["state"] == "RUNNING"
    assert status.tasks["a-b"][0]["trace"] == "t"
    status.apply("status-task-a-b-0", None)
    assert status.tasks["a-b"] == {}

    offsets = OffsetState()
    offsets.apply(b'["c",{"b":1,"a":2}]', {"position": 1})
    offsets.apply(b'["c",{"a":2,"b":1}]', {"position": 7})  # the same partition, other order
    assert offsets.of("c") == [({"a": 2, "b": 1}, {"position": 7})]
    offsets.apply(b'["c",{"a":2,"b":1}]', None)
    assert offsets.of("c") == []


@given(st.text())
def test_config_key_parser_never_raises(key: str) -> None:
    parsed = records.parse_config_key(key)
    if parsed is not None:
        assert parsed.connector or parsed.kind != "task"


@given(st.binary())
def test_offset_key_parser_never_raises(raw: bytes) -> None:
    parsed = records.parse_offset_key(raw)
    assert parsed is None or isinstance(parsed[1], dict)


@given(st.text(min_size=1), st.dictionaries(st.text(), st.integers() | st.text()))
def test_offset_keys_round_trip(name: str, partition: dict[str, object]) -> None:
    raw = records.offset_key(name, partition)
    assert records.parse_offset_key(raw) == (name, partition)
    assert json.loads(raw) == [name, partition]


@given(st.text(), st.integers(0, 10_000))
def test_task_keys_round_trip(name: str, task: int) -> None:
    if not name:
        return
    assert records.parse_config_key(records.task_key(name, task)) == records.ConfigKey(
        "task", name, task)
    assert records.parse_status_key(records.status_task_key(name, task)) == records.ConfigKey(
        "task", name, task)
