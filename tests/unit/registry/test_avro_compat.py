"""Avro compatibility verdicts, from the Avro specification's schema resolution rules and the
levels Confluent documents: BACKWARD = the new schema reads data written with the old one,
FORWARD = the old schema reads data written with the new one, FULL = both."""

from __future__ import annotations

import json
from typing import Any

import pytest

from odradek.registry.compat import LEVELS, check
from odradek.registry.errors import RegistryError
from odradek.registry.schemas import parse
from tests.unit.registry.test_protobuf_compat import expected


def rec(*fields: dict[str, Any], name: str = "R", **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "namespace": "t", "fields": list(fields), **extra}


def f(name: str, ftype: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": ftype, **extra}


E_AB = {"type": "enum", "name": "E", "symbols": ["A", "B"]}
E_ABC = {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}
E_AB_DEFAULT = {"type": "enum", "name": "E", "symbols": ["A", "B"], "default": "A"}
LINKED = rec(f("value", "int"), f("next", ["null", "t.Node"], default=None), name="Node")
LINKED_WIDE = rec(f("value", "long"), f("next", ["null", "t.Node"], default=None), name="Node")

# (old, new, backward ok, forward ok)
PAIRS: list[tuple[Any, Any, bool, bool]] = [
    ("int", "int", True, True),
    ("int", "long", True, False),                     # promotion one way only
    ("int", "float", True, False),
    ("int", "double", True, False),
    ("long", "double", True, False),
    ("float", "double", True, False),
    ("string", "bytes", True, True),                  # string <-> bytes both ways
    ("int", "string", False, False),
    ("boolean", "int", False, False),
    ("null", "null", True, True),
    (rec(f("a", "int")), rec(f("a", "int"), f("b", "string", default="")), True, True),
    (rec(f("a", "int")), rec(f("a", "int"), f("b", "string")), False, True),   # no default
    (rec(f("a", "int"), f("b", "string")), rec(f("a", "int")), True, False),  # field removed
    (rec(f("a", "int"), f("b", "string", default="x")), rec(f("a", "int")), True, True),
    (rec(f("a", "int")), rec(f("a", "long")), True, False),
    (rec(f("a", "int")), rec(f("a", "string")), False, False),
    (rec(f("a", "int")), rec(f("a", "int"), name="Other"), False, False),     # renamed record
    (rec(f("a", "int")), rec(f("a", "int"), name="Other", aliases=["t.R"]), True, False),
    (rec(f("a", "int")), rec(f("b", "int", aliases=["a"])), True, False),     # renamed field
    (E_AB, E_ABC, True, False),                       # new symbol: old readers cannot read it
    (E_ABC, E_AB, False, True),
    (E_AB, E_AB_DEFAULT, True, True),
    ({"type": "enum", "name": "E", "symbols": ["A", "C"]}, E_AB_DEFAULT, True, False),
    ({"type": "fixed", "name": "F", "size": 4}, {"type": "fixed", "name": "F", "size": 4},
     True, True),
    ({"type": "fixed", "name": "F", "size": 4}, {"type": "fixed", "name": "F", "size": 8},
     False, False),
    ({"type": "array", "items": "int"}, {"type": "array", "items": "long"}, True, False),
    ({"type": "map", "values": "int"}, {"type": "map", "values": "string"}, False, False),
    ({"type": "array", "items": "int"}, {"type": "map", "values": "int"}, False, False),
    ("int", ["null", "int"], True, False),            # old readers cannot read the null branch
    (["null", "int"], ["null", "int", "string"], True, False),
    (["null", "int"], ["null", "long"], True, False),
    (["null", "string"], "string", False, True),
    ({"type": "int", "logicalType": "date"}, "int", True, True),  # logical types resolve as int
    (rec(f("a", "int"), f("b", "int", default=0)), rec(f("a", "int")), True, True),
    (LINKED, LINKED_WIDE, True, False),               # recursive type
]


def verdict(level: str, old: Any, new: Any) -> bool:
    return not check(level, parse("AVRO", json.dumps(new)), [parse("AVRO", json.dumps(old))])


@pytest.mark.parametrize(("old", "new", "backward", "forward"), PAIRS)
def test_pair_at_every_level(old: Any, new: Any, backward: bool, forward: bool) -> None:
    # With one earlier version, a transitive level judges as its plain level.
    for level in LEVELS:
        assert verdict(level, old, new) is expected(level, backward, forward), level


def test_transitive_checks_every_version_plain_checks_the_latest() -> None:
    v1 = rec(f("a", "int"))
    v2 = rec(f("a", "int"), f("b", "int", default=0))
    v3 = rec(f("a", "int"), f("b", "int"))  # reads v2's data, not v1's (no default for b)
    olds = [parse("AVRO", json.dumps(v)) for v in (v1, v2)]
    new = parse("AVRO", json.dumps(v3))
    assert check("BACKWARD", new, olds) == []
    reasons = check("BACKWARD_TRANSITIVE", new, olds)
    assert len(reasons) == 1 and "b" in reasons[0]
    assert check("FULL_TRANSITIVE", new, olds)
    assert check("FORWARD_TRANSITIVE", new, olds) == []


def test_reasons_name_the_field() -> None:
    reasons = check("BACKWARD", parse("AVRO", json.dumps(rec(f("a", "string")))),
                    [parse("AVRO", json.dumps(rec(f("a", "int"))))])
    assert reasons == ["BACKWARD /fields/a: the reader's type string cannot read the writer's int"]


@pytest.mark.parametrize("text", [
    "", "{", '"nosuchtype"', '{"type": "record", "name": "R"}',
    '{"type": "record", "name": "R", "fields": [{"name": "a"}]}',
    '{"type": "enum", "name": "E"}', '{"type": "fixed", "name": "F"}', '{"type": "array"}',
])
def test_bad_avro_is_42201(text: str) -> None:
    with pytest.raises(RegistryError) as info:
        parse("AVRO", text)
    assert info.value.error_code == 42201 and info.value.status == 422


def test_equality_ignores_whitespace_and_key_order_not_defaults() -> None:
    a = parse("AVRO", '{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}')
    b = parse("AVRO", '{ "fields": [ {"type": "int", "name": "a"} ], "name": "R", "type": "record" }')
    c = parse("AVRO", '{"type":"record","name":"R","fields":[{"name":"a","type":"int","default":1}]}')
    assert a.identity() == b.identity()
    assert a.identity() != c.identity()
