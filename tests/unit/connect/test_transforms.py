"""Issue 19: each Single Message Transform on its own and in a chain, against the examples of
Kafka's and Confluent's documentation (configs written as there), with and without
schemas; the predicates; the configs Kafka refuses."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.connect import converters, data, transforms
from odradek.connect.data import ConnectRecord, DataError, Schema
from odradek.connect.transforms import Chain
from odradek.connect.transforms.cast import cast_value

T = "org.apache.kafka.connect.transforms."
P = T + "predicates."
JSON = converters.JsonConverter(schemas=True)


def chain(**settings: str) -> Chain:
    return Chain.from_config({k.replace("__", "."): v for k, v in settings.items()})


def one(kind: str, **settings: str) -> Chain:
    config = {"transforms": "t", "transforms.t.type": T + kind}
    config.update({f"transforms.t.{k.replace('__', '.')}": v for k, v in settings.items()})
    return Chain.from_config(config)


def rec(value: object = None, schema: Schema | None = None, key: object = None,
        key_schema: Schema | None = None, topic: str = "test", **kw: object) -> ConnectRecord:
    return ConnectRecord(topic, kw.pop("partition", 0), key_schema, key, schema, value,
                         **kw)  # type: ignore[arg-type]


S = Schema("STRING")
I32, I64 = Schema("INT32"), Schema("INT64")


def test_the_quickstart_chain_hoist_then_insert() -> None:
    """Kafka's docs: MakeMap (HoistField$Value field=line) then InsertSource (InsertField$Value
    static.field=data_source static.value=test-file-source) on FileStreamSource's lines."""
    c = chain(transforms="MakeMap, InsertSource",
              transforms__MakeMap__type=T + "HoistField$Value",
              transforms__MakeMap__field="line",
              transforms__InsertSource__type=T + "InsertField$Value",
              transforms__InsertSource__static__field="data_source",
              transforms__InsertSource__static__value="test-file-source")
    out = c.apply(rec("foo", S))
    assert out is not None
    assert json.loads(JSON.from_connect(out.topic, out.value_schema, out.value) or b"") == {
        "schema": {"type": "struct", "fields": [
            {"type": "string", "optional": False, "field": "line"},
            {"type": "string", "optional": True, "field": "data_source"}],
            "optional": False},
        "payload": {"line": "foo", "data_source": "test-file-source"}}


def test_insert_field_metadata_and_requiredness() -> None:
    c = one("InsertField$Value", topic__field="t!", partition__field="p",
            offset__field="o", timestamp__field="ts")
    schema = data.struct([("id", I32)], name="Row", version=3)
    out = c.apply(rec({"id": 1}, schema, partition=2, offset=7, timestamp=1_000))
    assert out is not None and out.value_schema is not None
    assert out.value == {"id": 1, "t": "test", "p": 2, "o": 7,
                         "ts": dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC)}
    fields = {f.name: f.schema for f in out.value_schema.fields}
    assert not fields["t"].optional and fields["p"].optional
    assert fields["ts"].name == data.TIMESTAMP
    assert (out.value_schema.name, out.value_schema.version) == ("Row", 3)
    # schemaless: a map; the timestamp as epoch millis
    out = c.apply(rec({"id": 1}, partition=2, offset=7, timestamp=1_000))
    assert out is not None and out.value == {"id": 1, "t": "test", "p": 2, "o": 7, "ts": 1000}
    with pytest.raises(DataError, match="Only Map objects supported"):
        c.apply(rec("text"))
    assert c.apply(rec(None)) == rec(None)  # a tombstone passes
    with pytest.raises(transforms.ConfigError):
        one("InsertField$Value", static__field="x")  # no static.value


def test_replace_field_include_exclude_renames() -> None:
    # Confluent's example: exclude c2; renames foo:c1,bar:c2
    out = one("ReplaceField$Value", exclude="c2").apply(rec({"c1": 22, "c2": "abc"}))
    assert out is not None and out.value == {"c1": 22}
    out = one("ReplaceField$Value", renames="foo:c1,bar:c2").apply(rec({"foo": 22, "bar": "x"}))
    assert out is not None and out.value == {"c1": 22, "c2": "x"}
    schema = data.struct([("a", I32), ("b", S), ("c", I64)], name="R")
    out = one("ReplaceField$Value", include="a,b", renames="b:bee").apply(
        rec({"a": 1, "b": "x", "c": 3}, schema))
    assert out is not None and out.value_schema is not None
    assert [f.name for f in out.value_schema.fields] == ["a", "bee"]
    assert out.value == {"a": 1, "bee": "x"} and out.value_schema.name == "R"
    out = one("ReplaceField$Key", blacklist="a").apply(rec(None, key={"a": 1, "b": 2}))
    assert out is not None and out.key == {"b": 2}
    with pytest.raises(transforms.ConfigError, match="Invalid rename mapping"):
        one("ReplaceField$Value", renames="a")


def test_mask_field() -> None:
    schema = data.struct([("n", I32), ("s", S), ("b", Schema("BOOLEAN")),
                          ("d", data.decimal_schema(2)), ("keep", S)])
    value = {"n": 5, "s": "secret", "b": True, "d": __import__("decimal").Decimal("1.25"),
             "keep": "x"}
    out = one("MaskField$Value", fields="n,s,b,d").apply(rec(value, schema))
    assert out is not None
    assert out.value == {"n": 0, "s": "", "b": False, "d": 0, "keep": "x"}
    out = one("MaskField$Value", fields="s", replacement="****").apply(rec({"s": "x", "n": 1}))
    assert out is not None and out.value == {"s": "****", "n": 1}
    out = one("MaskField$Value", fields="n", replacement="-1").apply(rec({"n": 9}))
    assert out is not None and out.value == {"n": -1}
    with pytest.raises(DataError, match="Unable to convert"):
        one("MaskField$Value", fields="n", replacement="abc").apply(rec({"n": 9}))
    with pytest.raises(DataError, match="with custom replacement"):
        one("MaskField$Value", fields="b", replacement="x").apply(rec({"b": True}))


def test_value_to_key_then_extract_field() -> None:
    # Confluent's examples: ValueToKey fields=userId,city; ExtractField$Key field=userId
    schema = data.struct([("userId", I32), ("city", S), ("state", S)])
    value = {"userId": 1, "city": "Austin", "state": "TX"}
    out = one("ValueToKey", fields="userId,city").apply(rec(value, schema))
    assert out is not None and out.key == {"userId": 1, "city": "Austin"}
    assert out.key_schema == data.struct([("userId", I32), ("city", S)])
    c = chain(transforms="createKey,extractInt", transforms__createKey__type=T + "ValueToKey",
              transforms__createKey__fields="userId",
              transforms__extractInt__type=T + "ExtractField$Key",
              transforms__extractInt__field="userId")
    out = c.apply(rec(value, schema))
    assert out is not None and (out.key_schema, out.key) == (I32, 1)
    with pytest.raises(DataError, match="Field does not exist: nope"):
        one("ValueToKey", fields="nope").apply(rec(value, schema))
    out = one("ExtractField$Value", field="id").apply(rec({"id": 42, "cost": 4000}))
    assert out is not None and out.value == 42
    with pytest.raises(DataError, match="Unknown field: x"):
        one("ExtractField$Value", field="x").apply(rec(value, schema))
    with pytest.raises(transforms.ConfigError, match="V1"):
        one("ExtractField$Value", field="a.b", field__syntax__version="V2")


def test_hoist_field() -> None:
    out = one("HoistField$Value", field="line").apply(rec(42, I32))
    assert out is not None and out.value == {"line": 42}
    assert out.value_schema == data.struct([("line", I32)])
    out = one("HoistField$Key", field="k").apply(rec(None, key="a"))
    assert out is not None and (out.key_schema, out.key) == (None, {"k": "a"})


def test_cast_fields_and_whole_values() -> None:
    schema = data.struct([("id", I64), ("score", S), ("ok", Schema("INT32", optional=True))])
    out = one("Cast$Value", spec="id:string,score:float64,ok:boolean").apply(
        rec({"id": 7, "score": "2.5", "ok": None}, schema))
    assert out is not None and out.value == {"id": "7", "score": 2.5, "ok": None}
    fields = {f.name: f.schema for f in out.value_schema.fields}  # type: ignore[union-attr]
    assert (fields["id"], fields["score"]) == (S, Schema("FLOAT64"))
    assert fields["ok"] == Schema("BOOLEAN", optional=True)
    out = one("Cast$Key", spec="int8").apply(rec(None, key=300, key_schema=I64))
    assert out is not None and (out.key_schema, out.key) == (Schema("INT8"), 44)  # wraps
    assert cast_value(3.99, "INT32") == 3 and cast_value(-3.99, "INT16") == -3
    assert cast_value(1e20, "INT32") == 2**31 - 1  # Java's saturating (int) of a double
    assert cast_value(True, "INT32") == 1 and cast_value(0.0, "BOOLEAN") is False
    assert cast_value(1.0, "STRING") == "1.0" and cast_value(1.5e10, "STRING") == "1.5E10"
    assert cast_value("TRUE", "BOOLEAN") is True and cast_value(b"\x00", "STRING") == "AA=="
    with pytest.raises(DataError):
        cast_value("abc", "INT32")
    with pytest.raises(DataError, match="does not support casting"):
        one("Cast$Value", spec="int32").apply(rec({"a": 1}, data.struct([("a", I32)])))
    with pytest.raises(transforms.ConfigError, match="Invalid type found in casting spec"):
        one("Cast$Value", spec="a:date")


def test_routers() -> None:
    # Confluent's RegexRouter example: keep the table name of a Debezium topic
    c = one("RegexRouter", regex=r"([^.]+)\.([^.]+)\.([^.]+)", replacement="$3")
    assert c.apply(rec(1, topic="dbserver1.inventory.customers")).topic == "customers"  # type: ignore[union-attr]
    assert c.apply(rec(1, topic="plain")).topic == "plain"  # type: ignore[union-attr]
    c = one("RegexRouter", regex="(.*)", replacement=r"\$-$1")
    assert c.apply(rec(1, topic="a")).topic == "$-a"  # type: ignore[union-attr]
    c = one("TimestampRouter")  # ${topic}-${timestamp}, yyyyMMdd
    when = int(dt.datetime(2024, 3, 9, 23, 59, tzinfo=dt.UTC).timestamp() * 1000)
    assert c.apply(rec(1, topic="t", timestamp=when)).topic == "t-20240309"  # type: ignore[union-attr]
    c = one("TimestampRouter", topic__format="foo-${topic}-${timestamp}",
            timestamp__format="yyyy-MM-dd'T'HH.mm.ss.SSS")
    assert c.apply(rec(1, topic="t", timestamp=when + 5)).topic == (  # type: ignore[union-attr]
        "foo-t-2024-03-09T23.59.00.005")
    with pytest.raises(DataError, match="Timestamp missing"):
        c.apply(rec(1))
    with pytest.raises(transforms.ConfigError, match="not supported here"):
        one("TimestampRouter", timestamp__format="YYYYww")


def test_filter_with_predicates_as_kip585_shows() -> None:
    c = chain(transforms="Filter,Extract", transforms__Filter__type=T + "Filter",
              transforms__Filter__predicate="IsFoo",
              transforms__Extract__type=T + "ExtractField$Key",
              transforms__Extract__field="other_field",
              transforms__Extract__predicate="IsBar", transforms__Extract__negate="true",
              predicates="IsFoo,IsBar", predicates__IsFoo__type=P + "TopicNameMatches",
              predicates__IsFoo__pattern="foo", predicates__IsBar__type=P + "TopicNameMatches",
              predicates__IsBar__pattern="bar")
    key = {"other_field": 5, "x": 1}
    assert c.apply(rec(1, key=key, topic="foo")) is None
    assert c.apply(rec(1, key=key, topic="bar")) == rec(1, key=key, topic="bar")
    out = c.apply(rec(1, key=key, topic="baz"))
    assert out is not None and out.key == 5
    drop_tombstones = chain(transforms="f", transforms__f__type=T + "Filter",
                            transforms__f__predicate="t", predicates="t",
                            predicates__t__type=P + "RecordIsTombstone")
    assert drop_tombstones.apply(rec(None)) is None and drop_tombstones.apply(rec(1)) is not None
    keep_with_header = chain(transforms="f", transforms__f__type=T + "Filter",
                             transforms__f__predicate="h", transforms__f__negate="true",
                             predicates="h", predicates__h__type=P + "HasHeaderKey",
                             predicates__h__name="trace")
    assert keep_with_header.apply(rec(1)) is None
    assert keep_with_header.apply(rec(1, headers=(("trace", b"1"),))) is not None
    assert one("Filter").apply(rec(1)) is None  # no predicate: every record


def test_config_errors_name_the_setting() -> None:
    assert transforms.errors({"transforms": "a"}) == {"transforms.a.type": [
        'Missing required configuration "transforms.a.type" which has no default value.']}
    assert transforms.errors({"transforms": "a", "transforms.a.type": "com.x.Nope"}) == {
        "transforms.a.type": ["Invalid value com.x.Nope for configuration transforms.a.type: "
                              "Class com.x.Nope could not be found."]}
    assert "transforms.a" in transforms.errors({"transforms": "a",
                                                "transforms.a.type": T + "ExtractField$Key"})
    assert "transforms.a.predicate" in transforms.errors({
        "transforms": "a", "transforms.a.type": T + "Filter", "transforms.a.predicate": "p"})
    assert "transforms.a.negate" in transforms.errors({
        "transforms": "a", "transforms.a.type": T + "Filter", "transforms.a.negate": "true"})
    assert "predicates.p.type" in transforms.errors({"predicates": "p"})
    assert transforms.errors({}) == {}


@given(st.dictionaries(st.text(min_size=1, max_size=5), st.integers() | st.text(max_size=5),
                       max_size=6), st.lists(st.text(min_size=1, max_size=5), max_size=3))
def test_replace_field_schemaless_never_keeps_an_excluded_field(value: dict[str, object],
                                                               excluded: list[str]) -> None:
    names = [n for n in excluded if "," not in n and n.strip() == n]
    out = one("ReplaceField$Value", exclude=",".join(names)).apply(rec(dict(value)))
    assert out is not None
    assert set(out.value) == set(value) - set(names)  # type: ignore[arg-type]
