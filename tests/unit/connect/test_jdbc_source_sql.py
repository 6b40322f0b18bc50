"""Issue 19: the JDBC source's sans-I/O part: Confluent's offsets (java.sql.Timestamp's
getTime and getNanos), the statements each mode runs (TimestampIncrementingCriteria's
WHERE clauses), PostgreSQL's columns as Connect schemas, and the configs refused."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.connect import data
from odradek.connect.connectors import jdbc_source_sql as sql
from odradek.connect.connectors.jdbc_source import JdbcSource
from odradek.connect.connectors.jdbc_source_sql import ColumnType, SourceSettings, Table
from odradek.connect.data import DataError, Schema

TABLE = Table("public", "orders")


def settings(mode: str, **kw: object) -> SourceSettings:
    return SourceSettings(mode=mode, incrementing="id", timestamps=("updated",),
                          tables=("orders",), **kw)  # type: ignore[arg-type]


def test_timestamp_offsets_are_javas_timestamp() -> None:
    when = dt.datetime(2024, 3, 9, 23, 59, 7, 123_456, tzinfo=dt.UTC)
    offset = sql.timestamp_offset(when)
    assert offset == {"timestamp": int(when.timestamp()) * 1000 + 123,
                      "timestamp_nanos": 123_456_000}
    assert sql.timestamp_of(offset) == when
    # a naive timestamp column's value is UTC (db.timezone)
    assert sql.timestamp_offset(when.replace(tzinfo=None)) == offset
    # an offset written without nanos (or by hand) keeps its milliseconds
    assert sql.timestamp_of({"timestamp": 1500}) == data.EPOCH + dt.timedelta(milliseconds=1500)


@given(st.datetimes(min_value=dt.datetime(1970, 1, 1), max_value=dt.datetime(9000, 1, 1)))
def test_timestamp_offsets_round_trip(when: dt.datetime) -> None:
    aware = when.replace(tzinfo=dt.UTC)
    assert sql.timestamp_of(sql.timestamp_offset(aware)) == aware


def test_partitions_and_stored_offsets() -> None:
    assert sql.partition_of(TABLE) == {"protocol": "1", "table": "public.orders"}
    assert sql.partition_of(None) == {"query": "query"}
    v1 = ({"protocol": "1", "table": "public.orders"}, {"incrementing": 9})
    v0 = ({"table": "orders"}, {"incrementing": 4})
    assert sql.stored_offset(TABLE, [v0, v1]) == {"incrementing": 9}  # v1 first
    assert sql.stored_offset(TABLE, [v0]) == {"incrementing": 4}
    assert sql.stored_offset(Table("other", "x"), [v0, v1]) == {}
    plugin = JdbcSource()
    assert plugin.source_offset({}, {"tables": {"public.orders": {"incrementing": 3}},
                                     "polls": 0}) == [
        ({"protocol": "1", "table": "public.orders"}, {"incrementing": 3})]
    assert plugin.offset_errors({"protocol": "1", "table": "public.orders"},
                                {"incrementing": 3}) == []
    assert plugin.offset_errors({"file": "x"}, None)
    assert plugin.offset_errors({"query": "query"}, {"incrementing": "3"})


def test_where_clauses_per_mode() -> None:
    base = sql.base_sql(TABLE, "")
    assert base == 'SELECT * FROM "public"."orders"'
    inc = sql.range_sql(settings("incrementing"), base)
    assert '"id" > %(id)s AND "id" <= %(end_id)s ORDER BY "id" ASC' in inc
    ts = sql.range_sql(settings("timestamp"), base)
    assert '"updated" > %(ts)s AND "updated" <= %(end_ts)s ORDER BY "updated" ASC' in ts
    both = sql.range_sql(settings("timestamp+incrementing"), base)
    assert ('(("updated" = %(ts)s AND "id" > %(id)s) OR "updated" > %(ts)s)' in both
            and 'ORDER BY "updated" ASC, "id" ASC' in both)
    latest = sql.latest_sql(settings("timestamp+incrementing"), base)
    assert '"updated" < %(until)s' in latest and "LIMIT %(limit)s" in latest
    coalesced = SourceSettings(mode="timestamp", timestamps=("modified", "created"))
    assert 'COALESCE("modified", "created") > %(ts)s' in sql.range_sql(coalesced, base)
    assert sql.range_sql(settings("bulk"), base) == base
    query = sql.base_sql(None, "SELECT a, b FROM t JOIN u USING (k);")
    assert query == "SELECT * FROM (SELECT a, b FROM t JOIN u USING (k)) AS odradek_query"


def test_params_and_offsets_of_rows() -> None:
    s = settings("timestamp+incrementing")
    assert sql.params(s, {}, naive_ts=True) == {"id": -1, "ts": dt.datetime(1970, 1, 1)}
    when = dt.datetime(2024, 1, 1, 12, tzinfo=dt.UTC)
    assert sql.offset_of(s, when, 7) == {"incrementing": 7, **sql.timestamp_offset(when)}
    assert sql.offset_of(settings("incrementing"), None, decimal.Decimal(12)) == {
        "incrementing": 12}
    with pytest.raises(DataError, match="Null value for incrementing column"):
        sql.offset_of(settings("incrementing"), None, None)
    with pytest.raises(DataError, match="Scale of Decimal"):
        sql.incrementing_value(decimal.Decimal("1.5"), "id")


def test_columns_as_connect_schemas() -> None:
    cols = [ColumnType("id", 23, None, False), ColumnType("big", 20, None),
            ColumnType("price", 1700, 2), ColumnType("at", 1114, None, False),
            ColumnType("on", 1082, None), ColumnType("doc", 3802, None),
            ColumnType("raw", 17, None), ColumnType("ok", 16, None)]
    schema = sql.value_schema(cols, TABLE)
    assert schema.name == "orders"
    assert [(f.name, f.schema.type, f.schema.optional, f.schema.name) for f in schema.fields] == [
        ("id", "INT32", False, None), ("big", "INT64", True, None),
        ("price", "BYTES", True, data.DECIMAL), ("at", "INT64", False, data.TIMESTAMP),
        ("on", "INT32", True, data.DATE), ("doc", "STRING", True, None),
        ("raw", "BYTES", True, None), ("ok", "BOOLEAN", True, None)]
    row = sql.row_value(schema, (1, None, decimal.Decimal("2.5"), dt.datetime(2024, 1, 1),
                                 dt.date(2024, 1, 1), {"a": [1]}, memoryview(b"x"), True))
    assert row == {"id": 1, "big": None, "price": decimal.Decimal("2.50"),
                   "at": dt.datetime(2024, 1, 1, tzinfo=dt.UTC), "on": dt.date(2024, 1, 1),
                   "doc": '{"a":[1]}', "raw": b"x", "ok": True}
    data.validate(schema, row)
    with pytest.raises(DataError, match="unconstrained NUMERIC"):
        sql.column_schema(ColumnType("n", 1700, None))
    with pytest.raises(DataError, match="does not map"):
        sql.column_schema(ColumnType("g", 600, None))  # point
    assert sql.value_schema([ColumnType("x", 25, None)], None).name is None
    assert sql.column_schema(ColumnType("t", 1184, None)) == Schema(
        "INT64", optional=True, name=data.TIMESTAMP, version=1)


def test_configs_refused() -> None:
    base = {"name": "j", "connector.class": "JdbcSource", "topic.prefix": "p-",
            "connection.url": "jdbc:postgresql://127.0.0.1:5432/db"}

    def errors(**config: str) -> dict[str, list[str]]:
        merged = {**base, **{k.replace("__", "."): v for k, v in config.items()}}
        return {k: v for k, v in JdbcSource().validate(merged).errors().items() if v}

    assert errors(mode="incrementing", incrementing__column__name="id",
                  table__whitelist="t") == {}
    assert errors(mode="incrementing", table__whitelist="t") == {
        "incrementing.column.name": ["Mode incrementing requires incrementing.column.name to "
                                     "be set"]}
    assert errors(mode="timestamp+incrementing", incrementing__column__name="id",
                  timestamp__column__name="u", query="select 1", table__whitelist="t") == {
        "query": ["Do not specify table filtering (table.whitelist) when using the query "
                  "mode."]}
    assert "String must be one of" in errors(mode="sometimes", table__whitelist="t")["mode"][0]
    assert errors(mode="bulk")["table.whitelist"]
    assert "only jdbc:postgresql://" in errors(
        mode="bulk", table__whitelist="t",
        connection__url="jdbc:mysql://h/db")["connection.url"][0]
