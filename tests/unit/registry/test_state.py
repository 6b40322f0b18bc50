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
    answer, recs = state.plan_config("s", "full")
    assert answer == {"compatibility": "FULL"}
    for key, value in recs:
        state.apply(key, value)
    assert state.level("s") == "FULL"
    state.apply({"keytype": "CONFIG", "subject": "s", "magic": 0}, None)
    assert state.level("s") == "BACKWARD"
    with pytest.raises(RegistryError) as info:
        state.plan_config(None, "SIDEWAYS")
    assert info.value.error_code == 42203


def apply_all(state: RegistryState, recs: list) -> None:
    for key, value in recs:
        state.apply(key, value)


def test_import_mode_takes_the_callers_id_and_version() -> None:
    state = RegistryState()
    _, recs = state.plan_mode(None, "import")
    apply_all(state, recs)
    parsed = state.parse_request({"schema": A})
    schema_id, recs = state.plan_register("s", parsed, [], schema_id=42, version=7)
    assert schema_id == 42 and recs[0][0]["version"] == 7
    apply_all(state, recs)
    # The id is taken by A: another schema may not take it, the same one in another subject may.
    with pytest.raises(RegistryError) as info:
        state.plan_register("t", state.parse_request({"schema": A2}), [], schema_id=42)
    assert info.value.error_code == 42207
    assert state.plan_register("t", parsed, [], schema_id=42)[0] == 42
    with pytest.raises(RegistryError) as info:  # version 7 of s exists
        state.plan_register("s", state.parse_request({"schema": A2}), [], schema_id=43, version=7)
    assert info.value.error_code == 42205
    for bad in ("x", 0, -1, True, 2**31):
        with pytest.raises(RegistryError) as info:
            state.plan_register("s", parsed, [], schema_id=bad)
        assert info.value.error_code == 42201
    # Back in READWRITE, new ids continue above the imported ones; ids may not be given.
    apply_all(state, state.plan_mode(None, "READWRITE")[1])
    assert register(state, "u", A2) == 43
    with pytest.raises(RegistryError) as info:
        state.plan_register("u", state.parse_request({"schema": A2}), [], schema_id=99)
    assert info.value.error_code == 42205


def test_import_mode_needs_an_empty_registry_or_force() -> None:
    state = RegistryState()
    register(state, "s", A)
    apply_all(state, state.plan_delete_subject("s", permanent=False)[1])
    for subject in (None, "s"):  # soft-deleted schemas still count
        with pytest.raises(RegistryError) as info:
            state.plan_mode(subject, "IMPORT")
        assert info.value.error_code == 42205
    assert state.plan_mode("other", "IMPORT")[0] == "IMPORT"
    assert state.plan_mode(None, "IMPORT", force=True)[0] == "IMPORT"
    with pytest.raises(RegistryError) as info:
        state.plan_mode(None, "SOMETIMES")
    assert info.value.error_code == 42204


def test_readonly_refuses_writes_per_subject_and_globally() -> None:
    state = RegistryState()
    apply_all(state, state.plan_mode("s", "READONLY")[1])
    with pytest.raises(RegistryError) as info:
        state.check_writable("s")
    assert (info.value.error_code, info.value.status) == (42205, 422)
    state.check_writable("t")
    apply_all(state, state.plan_delete_mode("s")[1])
    state.check_writable("s")
    apply_all(state, state.plan_mode(None, "READONLY")[1])
    with pytest.raises(RegistryError):
        state.check_writable("t")


def test_normalize_matches_reordered_json() -> None:
    state = RegistryState()
    first = register(state, "s", A)
    reordered = json.dumps({"fields": [{"type": "int", "name": "x"}], "name": "A",
                            "type": "record"})
    assert state.lookup("s", state.parse_request({"schema": reordered}, normalize=True),
                        normalize=True).schema_id == first
    parsed = state.parse_request({"schema": reordered}, normalize=True)
    assert parsed.text == '{"fields":[{"name":"x","type":"int"}],"name":"A","type":"record"}'
    assert state.plan_register("s", parsed, [], normalize=True) == (first, [])


def test_referenced_versions_cannot_be_deleted() -> None:
    state = RegistryState()
    register(state, "money", json.dumps({"type": "record", "name": "Money", "namespace": "m",
                                         "fields": [{"name": "c", "type": "long"}]}))
    user = json.dumps({"type": "record", "name": "Order", "fields": [
        {"name": "total", "type": "m.Money"}]})
    refs = [{"name": "m.Money", "subject": "money", "version": 1}]
    parsed = state.parse_request({"schema": user, "references": refs})
    order_id, recs = state.plan_register("order", parsed, refs)
    apply_all(state, recs)
    assert state.referenced_by("money", "1") == [order_id]
    with pytest.raises(RegistryError) as info:
        state.plan_delete_subject("money", permanent=False)
    assert info.value.error_code == 42206
    with pytest.raises(RegistryError) as info:
        state.plan_delete_version("money", "1", permanent=False)
    assert info.value.error_code == 42206
    # Once the user is gone, the referenced schema may go.
    apply_all(state, state.plan_delete_subject("order", False)[1])
    assert state.plan_delete_subject("money", False)[0] == [1]


def test_listing_and_deleted_only() -> None:
    state = RegistryState()
    register(state, "a", A)
    register(state, "a", A2)
    register(state, "b", A)
    apply_all(state, state.plan_delete_subject("b", permanent=False)[1])
    assert [(v.subject, v.version) for v in state.listing()] == [("a", 1), ("a", 2)]
    assert [(v.subject, v.version) for v in state.listing(latest_only=True)] == [("a", 2)]
    assert [(v.subject, v.version) for v in state.listing(deleted=True, prefix="b")] == [("b", 1)]
    assert state.subject_names(deleted_only=True) == ["b"]


def test_parsed_requests_are_cached_by_text_and_referenced_schema() -> None:
    state = RegistryState()
    body = {"schema": A}
    assert state.parse_request(body) is state.parse_request(dict(body))
    assert state.parse_request(body, normalize=True) is not state.parse_request(body)
    money = {"type": "record", "name": "Money", "namespace": "m",
             "fields": [{"name": "c", "type": "long"}]}
    register(state, "money", json.dumps(money))
    order = {"schema": json.dumps({"type": "record", "name": "Order", "fields": [
        {"name": "total", "type": "m.Money"}]}),
        "references": [{"name": "m.Money", "subject": "money", "version": 1}]}
    first = state.parse_request(order)
    assert state.parse_request(order) is first
    # The referenced version is deleted for good and the version number reused by another
    # schema: the same request text now means something else.
    apply_all(state, state.plan_delete_subject("money", False)[1])
    apply_all(state, state.plan_delete_subject("money", True)[1])
    money["fields"].append({"name": "cur", "type": "string", "default": "EUR"})
    register(state, "money", json.dumps(money))
    again = state.parse_request(order)
    assert again is not first and again.parsed is not first.parsed


def test_normalize_config() -> None:
    state = RegistryState()
    assert state.normalize_default("s") is False
    answer, recs = state.plan_config(None, None, True)
    assert answer == {"normalize": True} and recs[0][1] == {"normalize": True}
    apply_all(state, recs)
    assert state.normalize_default("s") is True and state.level("s") == "BACKWARD"
    apply_all(state, state.plan_config("s", "NONE", False)[1])
    assert state.normalize_default("s") is False and state.level("s") == "NONE"
    assert state.normalize_default("t") is True
    for level, normalize in ((None, None), (None, "yes"), ("SIDEWAYS", True)):
        with pytest.raises(RegistryError) as info:
            state.plan_config(None, level, normalize)
        assert info.value.error_code == 42203
