"""Debezium's change events from decoded pgoutput messages: envelope, key, ops, tombstones,
key changes, a schema change, column types; and what JsonConverter makes of them."""

from __future__ import annotations

import decimal
import json

from odradek.connect.connectors import pgoutput as po
from odradek.connect.connectors.pg_cdc_records import (
    UNAVAILABLE,
    ChangeBuilder,
    Position,
    table_of,
)
from odradek.connect.converters import JsonConverter

REL = po.Relation(16385, "public", "customers", "d", (
    po.Column("id", 23, -1, True), po.Column("name", 25, -1, False),
    po.Column("balance", 1700, 655366, False)))
POS = Position(0x16B3748, 750, 1_700_000_000_123_456)


def builder(**kw: object) -> ChangeBuilder:
    b = ChangeBuilder("cdc", "shop", **kw)  # type: ignore[arg-type]
    list(b.feed(REL, POS, 1))
    return b


def test_insert_is_a_create_event_with_debezium_envelope() -> None:
    [rec] = builder().feed(po.Insert(16385, ("1", "ann", "2.5")), POS, 42)
    assert rec.topic == "cdc.public.customers"
    assert rec.key == {"id": 1} and rec.key_schema is not None
    assert rec.key_schema.name == "cdc.public.customers.Key"
    assert rec.value_schema is not None and rec.value_schema.name == "cdc.public.customers.Envelope"
    assert [f.name for f in rec.value_schema.fields] == ["before", "after", "source", "op",
                                                          "ts_ms", "transaction"]
    v = rec.value
    assert v["op"] == "c" and v["before"] is None and v["ts_ms"] == 42
    assert v["after"] == {"id": 1, "name": "ann", "balance": decimal.Decimal("2.50")}
    src = v["source"]
    assert (src["connector"], src["name"], src["db"], src["schema"], src["table"]) == (
        "postgresql", "cdc", "shop", "public", "customers")
    assert (src["txId"], src["lsn"], src["ts_ms"], src["snapshot"]) == (
        750, 0x16B3748, 1_700_000_000_123, "false")
    # the JsonConverter's schema envelope, as Debezium's records carry it
    out = json.loads(JsonConverter(True).from_connect(rec.topic, rec.value_schema, rec.value)
                     or b"")
    assert out["schema"]["name"] == "cdc.public.customers.Envelope"
    after = next(f for f in out["schema"]["fields"] if f["field"] == "after")
    balance = next(f for f in after["fields"] if f["field"] == "balance")
    assert balance["name"] == "org.apache.kafka.connect.data.Decimal"
    assert balance["parameters"]["scale"] == "2"
    assert out["payload"]["op"] == "c" and out["payload"]["after"]["balance"] == "APo="


def test_update_delete_tombstone_and_key_change() -> None:
    b = builder()
    [upd] = b.feed(po.Update(16385, None, False, ("1", "anne", None)), POS, 1)
    assert upd.value["op"] == "u" and upd.value["before"] is None
    assert upd.value["after"]["name"] == "anne"
    dele, tomb = b.feed(po.Delete(16385, ("1", None, None), True), POS, 1)
    assert dele.value["op"] == "d" and dele.value["after"] is None
    assert dele.value["before"] == {"id": 1, "name": None, "balance": None}
    assert (tomb.key, tomb.value, tomb.value_schema) == ({"id": 1}, None, None)
    moved = list(b.feed(po.Update(16385, ("1", None, None), True, ("2", "x", None)), POS, 1))
    assert [(r.key, r.value and r.value["op"]) for r in moved] == [
        ({"id": 1}, "d"), ({"id": 1}, None), ({"id": 2}, "c")]
    quiet = ChangeBuilder("cdc", "shop", tombstones=False)
    list(quiet.feed(REL, POS, 1))
    assert len(list(quiet.feed(po.Delete(16385, ("1", None, None), True), POS, 1))) == 1


def test_schema_change_arrives_as_a_new_relation() -> None:
    b = builder()
    wider = po.Relation(16385, "public", "customers", "d",
                        (*REL.columns, po.Column("email", 25, -1, False)))
    assert list(b.feed(wider, POS, 1)) == []
    [rec] = b.feed(po.Insert(16385, ("3", "cy", None, "c@x")), POS, 1)
    assert rec.value["after"]["email"] == "c@x"
    assert rec.value_schema is not None
    after = rec.value_schema.field("after")
    assert after is not None and after.schema.field("email") is not None


def test_column_types_follow_debezium_defaults() -> None:
    rel = po.Relation(1, "s", "t", "d", (
        po.Column("k", 20, -1, True), po.Column("b", 16, -1, False),
        po.Column("d", 1082, -1, False), po.Column("ts", 1114, -1, False),
        po.Column("tz", 1184, -1, False), po.Column("raw", 17, -1, False),
        po.Column("n", 1700, -1, False), po.Column("f", 701, -1, False),
        po.Column("big", 25, -1, False), po.Column("mood", 99999, -1, False)))
    table = table_of(rel, "p")
    row = table.row(("9", "t", "1970-01-11", "1970-01-01 00:00:01.5",
                     "2024-05-06 07:08:09.25+02", "\\x0aff", "-12.345", "Infinity",
                     po.UNCHANGED, "happy"))
    assert row == {"k": 9, "b": True, "d": 10, "ts": 1_500_000,
                   "tz": "2024-05-06T05:08:09.25Z", "raw": b"\n\xff",
                   "n": {"scale": 3, "value": (-12345).to_bytes(2, "big", signed=True)},
                   "f": float("inf"), "big": UNAVAILABLE, "mood": "happy"}
    schemas = {f.name: f.schema for f in table.value_schema.fields}
    assert schemas["d"].name == "io.debezium.time.Date" and schemas["d"].type == "INT32"
    assert schemas["ts"].name == "io.debezium.time.MicroTimestamp"
    assert schemas["tz"].name == "io.debezium.time.ZonedTimestamp"
    assert schemas["n"].name == "io.debezium.data.VariableScaleDecimal"
    assert not schemas["k"].optional and schemas["b"].optional
    assert table_of(rel, "p", "string").row(("1",) + (None,) * 5 + ("1.50",) + (None,) * 3)["n"] \
        == "1.50"


def test_excluded_tables_and_missing_relation() -> None:
    b = ChangeBuilder("cdc", "shop", include=lambda schema, table: table != "customers")
    list(b.feed(REL, POS, 1))
    assert list(b.feed(po.Insert(16385, ("1", "a", None)), POS, 1)) == []
    try:
        list(b.feed(po.Insert(7, ("1",)), POS, 1))
    except ValueError as exc:
        assert "before its Relation" in str(exc)
    else:
        raise AssertionError("a change of an unknown relation was accepted")
