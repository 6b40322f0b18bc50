"""JSON Schema compatibility verdicts. BACKWARD: every document the old schema accepts, the new
one accepts; FORWARD: the reverse. The content-model cases follow Confluent's documented rules:
adding a typed property to an open content model is not backward compatible (old documents may
carry that name with any value), removing one from a closed model is not either."""

from __future__ import annotations

import json
from typing import Any

import pytest

from odradek.registry.compat import LEVELS, check
from odradek.registry.schemas import parse
from tests.unit.registry.test_protobuf_compat import expected


def obj(props: dict[str, Any], required: tuple[str, ...] = (), closed: bool = False,
        **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": props, **extra}
    if required:
        out["required"] = list(required)
    if closed:
        out["additionalProperties"] = False
    return out


STR, INT, NUM = {"type": "string"}, {"type": "integer"}, {"type": "number"}

# (old, new, backward ok, forward ok)
PAIRS: list[tuple[Any, Any, bool, bool]] = [
    (STR, STR, True, True),
    (INT, NUM, True, False),                                      # integer widens to number
    (STR, INT, False, False),
    ({"type": ["string", "null"]}, STR, False, True),
    ({}, STR, False, True),                                     # any -> string narrows
    (True, {}, True, True),
    ({"enum": ["a", "b"]}, {"enum": ["a", "b", "c"]}, True, False),
    (STR, {"type": "string", "maxLength": 5}, False, True),
    ({"type": "string", "maxLength": 5}, {"type": "string", "maxLength": 10}, True, False),
    ({"type": "integer", "minimum": 0}, {"type": "integer", "minimum": 1}, False, True),
    (obj({"a": STR}), obj({"a": STR}, required=("a",)), False, True),  # newly required
    (obj({"a": STR}, required=("a",)), obj({"a": STR}), True, False),
    (obj({"a": STR}), obj({"a": STR, "b": INT}), False, True),          # added to open model
    (obj({"a": STR}), obj({"a": STR, "b": {}}), True, True),          # an empty schema is fine
    (obj({"a": STR, "b": INT}), obj({"a": STR}), True, False),          # removed from open model
    (obj({"a": STR}, closed=True), obj({"a": STR, "b": INT}, closed=True), True, False),
    (obj({"a": STR, "b": INT}, closed=True), obj({"a": STR}, closed=True), False, True),
    (obj({"a": STR}, closed=True), obj({"a": STR, "b": INT}, required=("b",), closed=True),
     False, False),
    (obj({"a": STR}), obj({"a": STR}, closed=True), False, True),      # open -> closed
    (obj({"a": INT}), obj({"a": NUM}), True, False),                  # nested widening
    (obj({"a": obj({"x": STR})}), obj({"a": obj({"x": INT})}), False, False),
    ({"type": "array", "items": INT}, {"type": "array", "items": NUM}, True, False),
    ({"type": "array", "items": STR}, {"type": "array", "items": STR, "maxItems": 3}, False, True),
    ({"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "^b"}, False, False),
    (obj({"a": STR}, title="t1"), obj({"a": STR}, title="t2"), True, True),  # annotations only
]


def verdict(level: str, old: Any, new: Any) -> bool:
    return not check(level, parse("JSON", json.dumps(new)), [parse("JSON", json.dumps(old))])


@pytest.mark.parametrize(("old", "new", "backward", "forward"), PAIRS)
def test_pair_at_every_level(old: Any, new: Any, backward: bool, forward: bool) -> None:
    # With one earlier version, a transitive level judges as its plain level.
    for level in LEVELS:
        assert verdict(level, old, new) is expected(level, backward, forward), level


def test_type_change_between_schema_types_is_refused() -> None:
    reasons = check("BACKWARD", parse("JSON", '{"type": "string"}'),
                    [parse("AVRO", '"string"')])
    assert reasons == ["the schema type changed from AVRO to JSON"]


@pytest.mark.parametrize("text", ['{"type": "strin"}', '{"type": 5}', '{"required": "a"}',
                                  '[1]', "{nope"])
def test_bad_json_schema_is_42201(text: str) -> None:
    from odradek.registry.errors import RegistryError

    with pytest.raises(RegistryError) as info:
        parse("JSON", text)
    assert info.value.error_code == 42201
