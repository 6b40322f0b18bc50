"""Any schema text either parses or is refused with 42201, never another exception; a generated
Protobuf schema survives its rendering (text -> descriptor -> text -> the same descriptor)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.registry.errors import RegistryError
from odradek.registry.schemas import parse

PROTO_TOKENS = st.sampled_from([
    "syntax", "=", '"proto3"', '"proto2"', ";", "package", "a.b", "message", "M", "N", "{", "}",
    "int32", "string", "repeated", "optional", "required", "map", "<", ">", ",", "oneof", "o",
    "enum", "E", "X", "1", "2", "0", "-1", "reserved", "to", "max", "import", '"x.proto"',
    '"google/protobuf/timestamp.proto"', "google.protobuf.Timestamp", "[", "]", "packed",
    "true", "default", "option", "service", "rpc", "(", ")", "returns", "stream", "extend",
    "extensions", "group", ".M", "M.N", "//c\n", "/*", "*/", "9999999999", "\n",
])


def refused_or_parsed(kind: str, text: str) -> None:
    try:
        parse(kind, text)
    except RegistryError as exc:
        assert exc.error_code == 42201


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(PROTO_TOKENS, max_size=40).map(" ".join))
def test_proto_token_soup(text: str) -> None:
    refused_or_parsed("PROTOBUF", text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_any_text_as_every_type(text: str) -> None:
    for kind in ("PROTOBUF", "AVRO", "JSON"):
        refused_or_parsed(kind, text)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_any_base64_descriptor(raw: bytes) -> None:
    import base64

    refused_or_parsed("PROTOBUF", base64.b64encode(raw).decode() or "AA==")


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.sampled_from(
        ["record", "enum", "array", "map", "fixed", "int", "string", "null", "R", "a", "E"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["type", "name", "fields", "symbols", "items", "values", "size",
                         "default", "namespace", "properties", "required", "enum"]),
        inner, max_size=5),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(JSONISH)
def test_avro_and_json_schema_shaped_documents(doc: object) -> None:
    for kind in ("AVRO", "JSON"):
        refused_or_parsed(kind, json.dumps(doc))


SCALAR = st.sampled_from(["int32", "int64", "uint32", "sint64", "fixed32", "sfixed64", "bool",
                          "string", "bytes", "double", "float"])
# No underscores: protobuf refuses names whose JSON names clash (a and a_).
NAMES = st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True)


@st.composite
def proto_files(draw: st.DrawFn) -> str:
    syntax = draw(st.sampled_from(["proto2", "proto3"]))
    messages = []
    for m in range(draw(st.integers(1, 3))):
        names = draw(st.lists(NAMES, min_size=1, max_size=6, unique=True))
        numbers = draw(st.lists(st.integers(1, 2000).filter(lambda n: not 19000 <= n <= 19999),
                                min_size=len(names), max_size=len(names), unique=True))
        lines = []
        for name, number in zip(names, numbers, strict=True):
            kind = draw(st.sampled_from(["scalar", "repeated", "map", "message", "enum"]))
            if kind == "map":
                lines.append(f"map<string, {draw(SCALAR)}> {name} = {number};")
            elif kind == "message":
                lines.append(f"M0 {name} = {number};" if syntax == "proto3"
                             else f"optional M0 {name} = {number};")
            elif kind == "enum":
                lines.append(f"{'optional ' if syntax == 'proto2' else ''}E {name} = {number};")
            else:
                label = "repeated " if kind == "repeated" else (
                    "optional " if syntax == "proto2" else "")
                lines.append(f"{label}{draw(SCALAR)} {name} = {number};")
        messages.append(f"message M{m} {{ {' '.join(lines)} }}")
    return (f'syntax = "{syntax}"; package p.q; enum E {{ Z = 0; A = 1; }} '
            + " ".join(messages))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(proto_files())
def test_protobuf_rendering_round_trips(text: str) -> None:
    first = parse("PROTOBUF", text)
    again = parse("PROTOBUF", first.canonical)
    assert again.parsed.file == first.parsed.file
    assert again.canonical == first.canonical
    normal = parse("PROTOBUF", text, normalize=True)
    assert parse("PROTOBUF", normal.text, normalize=True).text == normal.text
