"""Protobuf compatibility verdicts at every level, from the language guide's "Updating A Message
Type" (fields are matched by number; wire types decide what a reader can parse) and the rules
Confluent documents for its registry: adding or removing optional fields, renaming, enum
changes and new messages are compatible; a changed package, a removed message, a changed field
kind or wire type, required fields added or removed and several fields moved into one oneof are
not. BACKWARD = a reader of the new schema parses the old data, FORWARD = the reverse."""

from __future__ import annotations

import pytest

from odradek.registry.compat import LEVELS, check
from odradek.registry.errors import RegistryError
from odradek.registry.schemas import parse


def p3(body: str, package: str = "t") -> str:
    return f'syntax = "proto3";\npackage {package};\n{body}\n'


def msg(fields: str, name: str = "M") -> str:
    return p3(f"message {name} {{ {fields} }}")


NESTED = "message Inner { int32 x = 1; }"
ENUM = "enum Color { RED = 0; GREEN = 1; }"

# (old, new, backward ok, forward ok)
PAIRS: list[tuple[str, str, bool, bool]] = [
    (msg("int32 a = 1;"), msg("int32 a = 1;"), True, True),
    (msg("int32 a = 1;"), msg("int32 a = 1; string b = 2;"), True, True),     # field added
    (msg("int32 a = 1; string b = 2;"), msg("int32 a = 1;"), True, True),     # field removed
    (msg("int32 a = 1;"), msg("int32 renamed = 1;"), True, True),             # numbers matter
    (msg("int32 a = 1;"), msg("int64 a = 1;"), True, True),                   # varint group
    (msg("int32 a = 1;"), msg("uint32 a = 1;"), True, True),
    (msg("int32 a = 1;"), msg("bool a = 1;"), True, True),
    (msg("int32 a = 1;"), msg("sint32 a = 1;"), False, False),                # zigzag differs
    (msg("sint32 a = 1;"), msg("sint64 a = 1;"), True, True),
    (msg("string a = 1;"), msg("bytes a = 1;"), True, True),
    (msg("fixed32 a = 1;"), msg("sfixed32 a = 1;"), True, True),
    (msg("fixed32 a = 1;"), msg("fixed64 a = 1;"), False, False),             # 4 vs 8 bytes
    (msg("float a = 1;"), msg("double a = 1;"), False, False),
    (msg("int32 a = 1;"), msg("string a = 1;"), False, False),                # varint -> LEN
    (msg(f"string a = 1; {NESTED}"), msg(f"Inner a = 1; {NESTED}"), False, False),
    (msg(f"Inner a = 1; {NESTED}"), msg("map<string, int32> a = 1;"), False, False),
    (p3(f"{ENUM} message M {{ Color c = 1; }}"), msg("int32 c = 1;"), True, True),
    (p3(f"{ENUM} message M {{ Color c = 1; }}"),
     p3("enum Color { RED = 0; GREEN = 1; BLUE = 2; } message M { Color c = 1; }"), True, True),
    (p3(f"{ENUM} message M {{ Color c = 1; }}"),
     p3("enum Color { RED = 0; } message M { Color c = 1; }"), True, True),
    (msg("int32 a = 1;"), p3("message M { int32 a = 1; }", package="other"), False, False),
    (p3("message M { int32 a = 1; } message N { int32 b = 1; }"), msg("int32 a = 1;"),
     False, True),                                                            # message removed
    (msg("int32 a = 1;"), p3("message M { int32 a = 1; } message N { int32 b = 1; }"),
     True, False),                                                            # message added
    (p3("message A { int32 x = 1; } message M { A f = 1; }"),
     p3("message A { int32 x = 1; } message B { int32 x = 1; } message M { B f = 1; }"),
     False, False),                                                           # other message
    (msg(f"Inner a = 1; {NESTED}"), msg("Inner a = 1; message Inner { string x = 1; }"),
     False, False),                                                           # inside nested
    (msg(f"Inner a = 1; {NESTED}"), msg("Inner a = 1; message Inner { int64 y = 1; }"),
     True, True),
    ('syntax = "proto2"; package t; message M { optional int32 a = 1; }',
     'syntax = "proto2"; package t; message M { optional int32 a = 1; required int32 b = 2; }',
     False, False),                                                           # required added
    ('syntax = "proto2"; package t; message M { optional int32 a = 1; }',
     'syntax = "proto2"; package t; message M { optional int32 a = 1; optional int32 b = 2; }',
     True, True),
    (msg("int32 a = 1; int32 b = 2;"), msg("oneof o { int32 a = 1; int32 b = 2; }"),
     False, True),                                                            # two into a oneof
    (msg("int32 a = 1; int32 b = 2;"), msg("int32 a = 1; oneof o { int32 b = 2; }"),
     True, True),                                                             # one into a oneof
    (msg("int32 a = 1;"), msg("int32 a = 1; oneof o { string s = 2; int32 i = 3; }"),
     True, True),
    (msg("repeated int32 a = 1;"), msg("int32 a = 1;"), False, False),        # packed numbers
    (msg("repeated string a = 1;"), msg("string a = 1;"), True, True),
    (msg("map<string, int32> m = 1;"), msg("map<string, int64> m = 1;"), True, True),
    (msg("map<string, int32> m = 1;"), msg("map<string, string> m = 1;"), False, False),
    (msg("int32 a = 1;"), msg("int32 a = 2;"), True, True),                   # new number
    (msg("M next = 1; int32 v = 2;"), msg("M next = 1; int64 v = 2;"), True, True),  # recursive
    (msg("M next = 1; int32 v = 2;"), msg("M next = 1; string v = 2;"), False, False),
]


def verdict(level: str, old: str, new: str) -> bool:
    return not check(level, parse("PROTOBUF", new), [parse("PROTOBUF", old)])


def expected(level: str, backward: bool, forward: bool) -> bool:
    if level == "NONE":
        return True
    if level.startswith("BACKWARD"):
        return backward
    if level.startswith("FORWARD"):
        return forward
    return backward and forward


@pytest.mark.parametrize(("old", "new", "backward", "forward"), PAIRS)
def test_pair_at_every_level(old: str, new: str, backward: bool, forward: bool) -> None:
    # With one earlier version, a transitive level judges as its plain level.
    for level in LEVELS:
        assert verdict(level, old, new) is expected(level, backward, forward), level


def test_transitive_levels_check_every_version() -> None:
    v1, v2, v3 = msg("int32 a = 1;"), msg("int32 b = 2;"), msg("string a = 1; int32 b = 2;")
    olds = [parse("PROTOBUF", v) for v in (v1, v2)]
    new = parse("PROTOBUF", v3)
    assert check("BACKWARD", new, olds) == []  # against v2: a field added
    reasons = check("BACKWARD_TRANSITIVE", new, olds)  # against v1: int32 -> string
    assert len(reasons) == 1 and "wire type" in reasons[0], reasons
    assert check("FULL_TRANSITIVE", new, olds)
    assert check("FORWARD", new, olds) == []


def test_reasons_name_the_message_and_field_number() -> None:
    reasons = check("BACKWARD", parse("PROTOBUF", msg("string a = 1;")),
                    [parse("PROTOBUF", msg("int32 a = 1;"))])
    assert reasons == ["BACKWARD /M/1: the field a changed from int32 to string, another wire type"]


def test_text_and_descriptor_forms_are_one_schema() -> None:
    text = parse("PROTOBUF", msg("int32 a = 1; repeated string tags = 2;"))
    again = parse("PROTOBUF", text.parsed.serialized())
    assert again.identity() == text.identity()
    assert again.text == text.canonical  # a descriptor is stored as its rendering
    spaced = parse("PROTOBUF", msg("int32    a = 1;\n\n repeated string tags = 2 ;"))
    assert spaced.identity() == text.identity()


@pytest.mark.parametrize("text", [
    "", "message {", "message M { int32 a = 1 }", 'syntax = "proto4"; message M {}',
    "message M { int32 a = 1; int32 b = 1; }", "message M { Nope n = 1; }",
    'import "missing.proto"; message M {}', "message M { int32 a = 0; }",
    'edition = "2023"; message M {}', "bWVzc2FnZQ==",
])
def test_bad_protobuf_is_42201(text: str) -> None:
    with pytest.raises(RegistryError) as info:
        parse("PROTOBUF", text)
    assert info.value.error_code == 42201 and info.value.status == 422
