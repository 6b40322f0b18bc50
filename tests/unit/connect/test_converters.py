"""Issue 19: Connect's converters with Kafka's names, sans I/O: JsonConverter's schema and
payload envelope in Kafka's JSON schema format (logical types included) and without schemas,
StringConverter, ByteArrayConverter, and the Avro converter's schema translation and
Confluent wire framing (its registry calls are tested against the node's registry in
tests/integration/test_connect.py)."""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.connect import avro_converter, converters, data
from odradek.connect.data import DataError, Schema

JSON = converters.JsonConverter(schemas=True)
PLAIN = converters.JsonConverter(schemas=False)


def test_json_envelope_as_kafka_writes_it() -> None:
    schema = data.struct([("id", Schema("INT32")), ("name", Schema("STRING", optional=True)),
                          ("tags", Schema("ARRAY", value_schema=Schema("STRING"))),
                          ("raw", Schema("BYTES"))], name="com.example.User", version=2)
    value = {"id": 1, "name": None, "tags": ["a"], "raw": b"\x01\x02"}
    raw = JSON.from_connect("t", schema, value)
    assert json.loads(raw or b"") == {
        "schema": {"type": "struct", "fields": [
            {"type": "int32", "optional": False, "field": "id"},
            {"type": "string", "optional": True, "field": "name"},
            {"type": "array", "items": {"type": "string", "optional": False},
             "optional": False, "field": "tags"},
            {"type": "bytes", "optional": False, "field": "raw"}],
            "optional": False, "name": "com.example.User", "version": 2},
        "payload": {"id": 1, "name": None, "tags": ["a"], "raw": "AQI="}}
    assert JSON.to_connect("t", raw) == (schema, value)
    # what Kafka's docs show a JsonConverter record as
    doc = (b'{"schema":{"type":"struct","fields":[{"type":"int64","optional":false,'
           b'"field":"registertime"},{"type":"string","optional":false,"field":"userid"}],'
           b'"optional":false,"name":"ksql.users"},"payload":{"registertime":1493819497170,'
           b'"userid":"User_1"}}')
    schema, value = JSON.to_connect("users", doc)
    assert schema is not None and schema.name == "ksql.users"
    assert value == {"registertime": 1493819497170, "userid": "User_1"}


def test_json_logical_types_and_maps() -> None:
    schema = data.struct([
        ("price", data.decimal_schema(2)),
        ("day", Schema("INT32", name=data.DATE, version=1)),
        ("at", Schema("INT64", name=data.TIMESTAMP, version=1)),
        ("counts", Schema("MAP", key_schema=Schema("STRING"), value_schema=Schema("INT64"))),
        ("by_id", Schema("MAP", key_schema=Schema("INT32"), value_schema=Schema("STRING")))])
    value = {"price": decimal.Decimal("12.34"), "day": dt.date(2024, 1, 2),
             "at": dt.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=dt.UTC),
             "counts": {"a": 1}, "by_id": {7: "x"}}
    raw = JSON.from_connect("t", schema, value)
    payload = json.loads(raw or b"")["payload"]
    assert payload["price"] == "BNI="  # 1234 unscaled, big-endian, base64
    assert payload["day"] == 19724 and payload["at"] == 1704164645006
    assert payload["by_id"] == [[7, "x"]]  # a map with non-string keys: pairs
    assert JSON.to_connect("t", raw) == (schema, value)


def test_json_errors_are_kafkas() -> None:
    with pytest.raises(DataError, match=r"schemas\.enable=false"):
        JSON.to_connect("t", b'{"a": 1}')
    with pytest.raises(DataError, match="serialization error"):
        JSON.to_connect("t", b"{nope")
    with pytest.raises(DataError, match="Unknown schema type"):
        JSON.to_connect("t", b'{"schema":{"type":"int128"},"payload":1}')
    with pytest.raises(DataError):
        JSON.from_connect("t", Schema("INT8"), 300)
    assert JSON.to_connect("t", b'{"schema":null,"payload":{"a":1}}') == (None, {"a": 1})
    # Kafka narrows numbers as Java does (Jackson's byteValue(), intValue()...)
    assert JSON.to_connect("t", b'{"schema":{"type":"int8"},"payload":300}')[1] == 44
    assert JSON.to_connect("t", b'{"schema":{"type":"int32"},"payload":2.9}')[1] == 2
    assert JSON.to_connect("t", None) == (None, None) and JSON.from_connect("t", None, None) is None
    assert PLAIN.to_connect("t", b'{"a":[1]}') == (None, {"a": [1]})
    assert PLAIN.from_connect("t", None, {"a": b"\x00"}) == b'{"a":"AA=="}'


def test_string_and_bytes_converters() -> None:
    s = converters.resolve("value.converter", {"value.converter": converters.STRING})
    assert s.to_connect("t", "é".encode()) == (data.OPTIONAL_STRING, "é")
    assert s.from_connect("t", Schema("INT32"), 5) == b"5"
    b = converters.resolve("value.converter", {"value.converter": converters.BYTES})
    assert b.to_connect("t", b"\x00") == (data.OPTIONAL_BYTES, b"\x00")
    with pytest.raises(DataError, match="not compatible"):
        b.from_connect("t", None, "text")


def test_avro_schemas_translate_as_avrodata_does() -> None:
    schema = data.struct([("id", Schema("INT64")), ("small", Schema("INT16")),
                          ("name", Schema("STRING", optional=True)),
                          ("price", data.decimal_schema(2)),
                          ("at", Schema("INT64", name=data.TIMESTAMP, version=1))])
    avro = avro_converter.to_avro_schema(schema)
    assert avro["name"] == "ConnectDefault" and avro["namespace"] == "io.confluent.connect.avro"
    fields = {f["name"]: f for f in avro["fields"]}
    assert fields["name"] == {"name": "name", "type": ["null", "string"], "default": None}
    assert fields["small"]["type"] == {"type": "int", "connect.type": "int16"}
    assert fields["price"]["type"]["logicalType"] == "decimal"
    assert fields["at"]["type"] == {"type": "long", "logicalType": "timestamp-millis"}
    back = avro_converter.from_avro_schema(avro)
    assert [(f.name, f.schema.type, f.schema.optional) for f in back.fields] == [
        ("id", "INT64", False), ("small", "INT16", False), ("name", "STRING", True),
        ("price", "BYTES", False), ("at", "INT64", False)]
    assert back.field("at").schema.name == data.TIMESTAMP  # type: ignore[union-attr]
    with pytest.raises(DataError, match="union"):
        avro_converter.from_avro_schema(["int", "string"])
    enum = avro_converter.from_avro_schema({"type": "enum", "name": "E", "symbols": ["A"]})
    assert enum == Schema("STRING")


def test_avro_values_round_trip_through_fastavro() -> None:
    """The bytes after the wire header are plain Avro binary any Avro reader decodes."""
    schema = data.struct([("id", Schema("INT64")), ("name", Schema("STRING", optional=True)),
                          ("price", data.decimal_schema(2))], name="shop.Item")
    value = {"id": 5, "name": None, "price": decimal.Decimal("9.99")}
    avro = avro_converter.to_avro_schema(schema)
    parsed = fastavro.parse_schema(avro)
    out = io.BytesIO()
    fastavro.schemaless_writer(out, parsed, avro_converter.to_avro_value(schema, value))
    read = fastavro.schemaless_reader(io.BytesIO(out.getvalue()), parsed, None)
    back = avro_converter.from_avro_schema(avro)
    assert back.name == "shop.Item"
    assert avro_converter.from_avro_value(back, read) == value


@given(st.recursive(st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) |
                    st.text(max_size=10),
                    lambda inner: st.lists(inner, max_size=3) |
                    st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=10))
def test_schemaless_json_round_trips(value: object) -> None:
    raw = PLAIN.from_connect("t", None, value)
    assert PLAIN.to_connect("t", raw)[1] == value if value is not None else raw is None


@given(st.binary(max_size=64))
def test_json_converter_refuses_or_reads_any_bytes(raw: bytes) -> None:
    """Fuzzed input: a DataError or a value, never another exception."""
    for conv in (JSON, PLAIN):
        try:
            conv.to_connect("t", raw)
        except DataError:
            pass


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False) |
    st.sampled_from(["int8", "int32", "int64", "float", "double", "string", "bytes",
                     "boolean", "array", "map", "struct", "AAE=", "x"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["type", "fields", "field", "items", "keys", "values", "optional",
                         "name", "parameters", "default", "scale", "version"]),
        inner, max_size=5), max_leaves=12)


@settings(max_examples=300)
@given(JSONISH, JSONISH)
def test_json_envelopes_of_any_shape_are_read_or_refused(schema: object,
                                                         payload: object) -> None:
    """Fuzzed envelopes: a value that round-trips, or a DataError; nothing else escapes."""
    raw = json.dumps({"schema": schema, "payload": payload}).encode()
    try:
        got_schema, value = JSON.to_connect("t", raw)
    except DataError:
        return
    again = JSON.to_connect("t", JSON.from_connect("t", got_schema, value))
    assert again == (got_schema, value)
