"""Issue 19: the JDBC sink's columns and PostgreSQL statements, sans I/O, as Confluent's
JdbcSinkConnector derives them from pk.mode, pk.fields, insert.mode and the record's
schemas (the end-to-end run into a real PostgreSQL is in tests/integration/test_connect.py)."""

from __future__ import annotations

import pytest

from odradek.connect import data
from odradek.connect.connectors import jdbc_sql
from odradek.connect.connectors.jdbc_sink import JdbcSink
from odradek.connect.connectors.jdbc_sql import SinkSettings, conninfo
from odradek.connect.data import ConnectRecord, DataError, Schema

VALUE = data.struct([("id", Schema("INT32")), ("name", Schema("STRING")),
                     ("note", Schema("STRING", optional=True))])
KEY = data.struct([("id", Schema("INT32"))])


def rec(key: object = None, value: object = None, key_schema: Schema | None = KEY,
        value_schema: Schema | None = VALUE) -> ConnectRecord:
    return ConnectRecord("orders", 1, key_schema, key, value_schema, value, offset=9)


def test_columns_per_pk_mode() -> None:
    r = rec({"id": 1}, {"id": 1, "name": "a", "note": None})
    cols = jdbc_sql.columns(SinkSettings("record_key", ("id",)), r)
    assert [(c.name, c.key) for c in cols] == [("id", True), ("name", False), ("note", False)]
    cols = jdbc_sql.columns(SinkSettings("kafka"), r)
    assert [c.name for c in cols if c.key] == list(jdbc_sql.KAFKA_PK)
    assert jdbc_sql.row(SinkSettings("kafka"), r, cols)["__connect_offset"] == 9
    cols = jdbc_sql.columns(SinkSettings("record_value", ("name",)), r)
    assert [(c.name, c.key) for c in cols] == [("name", True), ("id", False), ("note", False)]
    prim = rec(5, {"id": 1, "name": "a", "note": None}, key_schema=Schema("INT64"))
    cols = jdbc_sql.columns(SinkSettings("record_key"), prim)
    assert cols[0].name == "__connect_key" and jdbc_sql.row(SinkSettings("record_key"), prim,
                                                            cols)["__connect_key"] == 5
    with pytest.raises(DataError, match="exactly one PK column"):
        jdbc_sql.columns(SinkSettings("record_key", ("a", "b")), prim)
    with pytest.raises(DataError, match="does not contain field: nope"):
        jdbc_sql.columns(SinkSettings("record_key", ("nope",)), r)
    cols = jdbc_sql.columns(SinkSettings("none", fields_whitelist=("name",)), r)
    assert [c.name for c in cols] == ["name"]


def test_statements_as_the_postgres_dialect_writes_them() -> None:
    r = rec({"id": 1}, {"id": 1, "name": "a", "note": None})
    up = SinkSettings("record_key", ("id",), "upsert")
    cols = jdbc_sql.columns(up, r)
    assert jdbc_sql.create_table("t", cols) == (
        'CREATE TABLE "t" (\n"id" INT NOT NULL,\n"name" TEXT NOT NULL,\n"note" TEXT NULL,\n'
        'PRIMARY KEY("id"))')
    assert jdbc_sql.upsert_sql(up, "t", cols) == (
        'INSERT INTO "t" ("id", "name", "note") VALUES (%(0)s, %(1)s, %(2)s) ON CONFLICT '
        '("id") DO UPDATE SET "name"=EXCLUDED."name", "note"=EXCLUDED."note"')
    upd = SinkSettings("record_key", ("id",), "update")
    assert jdbc_sql.upsert_sql(upd, "t", cols) == (
        'UPDATE "t" SET "name" = %(1)s, "note" = %(2)s WHERE "id" = %(0)s')
    assert jdbc_sql.delete_sql("t", cols[:1]) == 'DELETE FROM "t" WHERE "id" = %(0)s'
    assert jdbc_sql.alter_table("t", cols[2:]) == ['ALTER TABLE "t" ADD "note" TEXT NULL']
    with pytest.raises(DataError, match="not optional"):
        jdbc_sql.alter_table("t", cols[1:2])
    assert jdbc_sql.quote('a"b') == '"a""b"'
    assert jdbc_sql.sql_type(data.decimal_schema(2)) == "DECIMAL"
    with pytest.raises(DataError, match="Unsupported type"):
        jdbc_sql.sql_type(Schema("ARRAY", value_schema=Schema("INT32")))


def test_connection_url_and_validation() -> None:
    assert conninfo({"connection.url": "jdbc:postgresql://db:5433/shop?user=u&password=p"}) == {
        "host": "db", "port": 5433, "dbname": "shop", "user": "u", "password": "p"}
    assert conninfo({"connection.url": "jdbc:postgresql://db/shop",
                     "connection.user": "x"})["user"] == "x"
    with pytest.raises(ValueError, match="only jdbc:postgresql"):
        conninfo({"connection.url": "jdbc:mysql://db/shop"})
    base = {"name": "j", "connector.class": "JdbcSink", "topics": "t",
            "connection.url": "jdbc:postgresql://db/shop"}
    errors = {k: v for k, v in JdbcSink().validate(base).errors().items() if v}
    assert errors == {}
    errors = {k: v for k, v in JdbcSink().validate({**base, "insert.mode": "upsert"})
              .errors().items() if v}
    assert list(errors) == ["pk.mode"]
    errors = {k: v for k, v in JdbcSink().validate({
        **base, "delete.enabled": "true", "errors.deadletterqueue.topic.name": "t"})
        .errors().items() if v}
    assert errors == {"delete.enabled": ["Deletes are only supported for pk.mode record_key"],
                      "errors.deadletterqueue.topic.name": [
                          "The DLQ topic 't' may not be included in the list of topics "
                          "('topics.regex' or 'topics') consumed by the connector"]}
