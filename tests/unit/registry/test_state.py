"""The registry view: records applied in order, writes planned as Confluent-format records."""

from __future__ import annotations

import json

import pytest

from odradek.registry.errors import RegistryError
from odradek.registry.state import RegistryState

A = json.dumps({"type": "record", "name": "A", "fields": [{"name": "x", "type": "int"}]})
A2 = json.dumps({"type": "record", "name": "A", "fields": [
    {"name": "x", "type": "int"}, {"name": "y", "type": "int", "default": 0}]})


def register(state: RegistryState, subject: str, text: str) -> int:
    """Plan a register and apply its records, as the store would after writing them."""
    parsed = state.parse_request({"schema": text})
    schema_id, recs = state.plan_register(subject, parsed, [])
    for key, value in recs:
        state.apply(key, value)
    return schema_id


def test_ids_are_global_and_versions_per_subject() -> None:
    state = RegistryState()
    a = register(state, "s1", A)
    a2 = register(state, "s1", A2)
    assert (a, a2) == (1, 2)
    assert register(state, "s2", A2) == a2  # same schema elsewhere: same id
    assert register(state, "s1", A) == a  # present already: no new version
    assert [v.version for v in state.versions("s1")] == [1, 2]
    assert [v.version for v in state.versions("s2")] == [1]
    _, recs = state.plan_register("s1", state.parse_request({"schema": A}), [])
    assert recs == []


def test_plan_register_writes_confluents_record() -> None:
    state = RegistryState()
    _, recs = state.plan_register("s", state.parse_request({"schema": A}), [])
    assert recs == [({"keytype": "SCHEMA", "subject": "s", "version": 1, "magic": 1},
                     {"subject": "s", "version": 1, "id": 1, "schema": A, "deleted": False})]
    _, recs = state.plan_register("j", state.parse_request(
        {"schema": '{"type": "string"}', "schemaType": "JSON"}), [])
    assert recs[0][1]["schemaType"] == "JSON"


def test_soft_deleted_version_numbers_are_not_reused() -> None:
    state = RegistryState()
    register(state, "s", A)
    _, recs = state.plan_delete_subject("s", permanent=False)
    for key, value in recs:
        state.apply(key, value)
    with pytest.raises(RegistryError) as info:
        state.versions("s")
    assert info.value.error_code == 40401
    assert register(state, "s", A) == 1  # same id, new version
    assert [v.version for v in state.versions("s")] == [2]


def test_incompatible_register_is_409_and_writes_nothing() -> None:
    state = RegistryState()
    register(state, "s", A)
    bad = json.dumps({"type": "record", "name": "A", "fields": [{"name": "x", "type": "string"}]})
    with pytest.raises(RegistryError) as info:
        state.plan_register("s", state.parse_request({"schema": bad}), [])
    assert (info.value.error_code, info.value.status) == (409, 409)
    assert [v.version for v in state.versions("s")] == [1]


def test_config_tombstone_falls_back_to_global() -> None:
    state = RegistryState()
    level, recs = state.plan_config("s", "full")
    assert level == "FULL"
    for key, value in recs:
        state.apply(key, value)
    assert state.level("s") == "FULL"
    state.apply({"keytype": "CONFIG", "subject": "s", "magic": 0}, None)
    assert state.level("s") == "BACKWARD"
    with pytest.raises(RegistryError) as info:
        state.plan_config(None, "SIDEWAYS")
    assert info.value.error_code == 42203
