"""Issue 19: the JSON Schema and Protobuf converters' translations, sans I/O: Connect schemas
as Confluent's JsonSchemaData and ProtobufData write them, back again, and the Protobuf
message-index list (zig-zag varints, `[0]` as one 0 byte); hypothesis for the index parser."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.connect import converters, data
from odradek.connect import jsonschema_converter as js
from odradek.connect import protobuf_converter as pb
from odradek.connect.data import DataError, Schema

ROW = data.struct([
    ("id", Schema("INT32")),
    ("name", Schema("STRING", optional=True)),
    ("tags", Schema("ARRAY", value_schema=Schema("STRING"))),
    ("attrs", Schema("MAP", key_schema=Schema("STRING"), value_schema=Schema("INT64"))),
    ("at", Schema("INT64", name=data.TIMESTAMP, version=1, optional=True)),
    ("inner", data.struct([("x", Schema("FLOAT64"))], name="Inner", optional=True)),
], name="shop.Row")


def test_json_schema_as_confluent_writes_it() -> None:
    out = js.to_json_schema(ROW)
    assert out["type"] == "object" and out["title"] == "shop.Row"
    props = out["properties"]
    assert props["id"] == {"type": "integer", "connect.type": "int32", "connect.index": 0}
    assert props["name"] == {"oneOf": [{"type": "null"}, {"type": "string"}],
                             "connect.index": 1}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}, "connect.index": 2}
    assert props["attrs"] == {"type": "object", "connect.type": "map", "connect.index": 3,
                              "additionalProperties": {"type": "integer",
                                                       "connect.type": "int64"}}
    assert props["at"]["oneOf"][1] == {"type": "integer", "connect.type": "int64",
                                       "title": data.TIMESTAMP, "connect.version": 1}
    decimal_schema = js.to_json_schema(data.decimal_schema(2))
    assert decimal_schema == {"type": "number", "connect.type": "bytes", "title": data.DECIMAL,
                              "connect.version": 1, "connect.parameters": {"scale": "2"}}
    # and back: the same Connect schema
    assert js.from_json_schema(out) == ROW
    assert js.from_json_schema(decimal_schema) == data.decimal_schema(2)


def test_json_schema_from_elsewhere() -> None:
    plain = {"type": "object", "properties": {"b": {"type": "number"}, "a": {"type": "integer"},
                                              "e": {"enum": ["x", "y"]},
                                              "n": {"type": ["string", "null"]}}}
    got = js.from_json_schema(plain)
    assert [(f.name, f.schema.type, f.schema.optional) for f in got.fields] == [
        ("b", "FLOAT64", False), ("a", "INT64", False), ("e", "STRING", False),
        ("n", "STRING", True)]
    for refused in ({"$ref": "#/definitions/x"}, {"allOf": [{"type": "string"}]},
                    {"oneOf": [{"type": "string"}, {"type": "integer"}]}, {}):
        with pytest.raises(DataError):
            js.from_json_schema(refused)


def test_json_values_both_ways() -> None:
    value = {"id": 7, "name": None, "tags": ["a"], "attrs": {"k": 1},
             "at": dt.datetime(2024, 1, 1, tzinfo=dt.UTC), "inner": {"x": 1.5}}
    text = js.value_to_json(ROW, value, "BASE64")
    assert text["at"] == 1_704_067_200_000
    assert js.value_from_json(ROW, text) == value
    dec = data.decimal_schema(2)
    import decimal

    assert js.value_to_json(dec, decimal.Decimal("1.00"), "BASE64") == "ZA=="
    assert js._dumps({"d": decimal.Decimal("12.30")}) == b'{"d":12.30}'
    assert js.value_from_json(dec, "ZA==") == decimal.Decimal("1.00")


def test_protobuf_file_as_confluent_writes_it() -> None:
    fdp, full = pb.file_of(ROW)
    assert (fdp.syntax, fdp.package, full) == ("proto3", "shop", "shop.Row")
    assert list(fdp.dependency) == ["google/protobuf/timestamp.proto"]
    msg = fdp.message_type[0]
    F = pb.F
    assert [(f.name, f.number, f.label, f.type, f.type_name) for f in msg.field] == [
        ("id", 1, F.LABEL_OPTIONAL, F.TYPE_INT32, ""),
        ("name", 2, F.LABEL_OPTIONAL, F.TYPE_STRING, ""),
        ("tags", 3, F.LABEL_REPEATED, F.TYPE_STRING, ""),
        ("attrs", 4, F.LABEL_REPEATED, F.TYPE_MESSAGE, ".shop.Row.AttrsEntry"),
        ("at", 5, F.LABEL_OPTIONAL, F.TYPE_MESSAGE, ".google.protobuf.Timestamp"),
        ("inner", 6, F.LABEL_OPTIONAL, F.TYPE_MESSAGE, ".shop.Row.Inner")]
    assert [n.name for n in msg.nested_type] == ["AttrsEntry", "Inner"]
    assert msg.nested_type[0].options.map_entry
    # no name: Confluent's default; a nested struct named as its field gets "Message"
    anon = data.struct([("inner", data.struct([("x", Schema("INT64"))], name="inner"))])
    fdp, full = pb.file_of(anon)
    assert full == pb.DEFAULT_NAME and fdp.message_type[0].field[0].type_name == (
        f".{pb.DEFAULT_NAME}.innerMessage")
    for refused in (data.struct([("a", Schema("ARRAY", value_schema=Schema(
                        "ARRAY", value_schema=Schema("INT32"))))]),
                    Schema("STRING")):
        with pytest.raises(DataError):
            pb.file_of(refused)


def test_protobuf_values_through_a_message_class() -> None:
    conv = pb.ProtobufConverter(pb._Registry(["http://127.0.0.1:9"]))
    cls, _ = conv.message_class(ROW)
    value = {"id": 7, "name": "n", "tags": ["a", "b"], "attrs": {"k": 1},
             "at": dt.datetime(2024, 1, 1, 0, 0, 0, 5, tzinfo=dt.UTC), "inner": {"x": 1.5}}
    msg = cls()
    pb.fill(msg, ROW, value)
    back = cls.FromString(msg.SerializeToString())
    schema = pb.schema_of(back.DESCRIPTOR)
    assert schema.name == "Row" and all(f.schema.optional for f in schema.fields)
    assert pb.read(back, schema) == value
    # proto3: a null scalar reads back as its default, a null message as null
    empty = cls()
    pb.fill(empty, ROW, {"id": 0, "name": None, "tags": [], "attrs": {}, "at": None,
                         "inner": None})
    assert pb.read(empty, schema) == {"id": 0, "name": "", "tags": [], "attrs": {},
                                      "at": None, "inner": None}


def test_message_indexes() -> None:
    assert pb.encode_indexes([0]) == b"\x00"
    assert pb.encode_indexes([1]) == b"\x02\x02"
    assert pb.encode_indexes([0, 2]) == b"\x04\x00\x04"
    assert pb.decode_indexes(b"\x00rest", 0) == ([0], 1)
    assert pb.decode_indexes(b"\x04\x00\x04", 0) == ([0, 2], 3)
    with pytest.raises(DataError):
        pb.decode_indexes(b"\x04\x00", 0)


@given(st.lists(st.integers(min_value=0, max_value=10_000), min_size=1, max_size=8))
def test_message_indexes_round_trip(indexes: list[int]) -> None:
    raw = pb.encode_indexes(indexes)
    assert pb.decode_indexes(raw + b"tail", 0) == (indexes, len(raw))


@given(st.binary(max_size=40))
def test_message_index_parser_never_crashes(raw: bytes) -> None:
    try:
        indexes, pos = pb.decode_indexes(raw, 0)
    except DataError:
        return
    assert pos <= len(raw) and indexes


def test_converters_resolve_the_new_classes() -> None:
    for name, kind in ((converters.JSON_SCHEMA, "jsonschema"), (converters.PROTOBUF,
                                                                 "protobuf")):
        config = {"value.converter": name,
                  "value.converter.schema.registry.url": "http://127.0.0.1:9"}
        assert converters.resolve("value.converter", config).kind == kind
        assert "schema.registry.url" in converters.class_errors(
            "value.converter", {"value.converter": name})[0]
