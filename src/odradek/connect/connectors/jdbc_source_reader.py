"""The JDBC source as a Spark streaming source: psycopg against PostgreSQL.

The stream's offset is `{"tables": {"<schema>.<table>" | "query": {Confluent's offset}},
"polls": n}`: `latestOffset` asks the database for the end of the next range of each table
(at most `batch.max.rows` rows on; `polls` counts bulk-mode polls, so each is a batch), and
`read` of one partition per table reads that range and turns each row into the record that
goes to the topic (the transforms and converters run there, in Spark's Python worker). A batch
Spark runs again reads the same range. The worker stores each batch's end offset in
connect-offsets, in Confluent's format, so a restarted connector goes on from there.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from odradek.connect.connectors import jdbc_source_sql as sql
from odradek.connect.connectors.jdbc_source_sql import ColumnType, SourceSettings, Table

SCHEMA = ("topic string, key binary, value binary, "
          "headers array<struct<key:string,value:binary>>")
NAME = "odradek_connect_jdbc"


def connect(config: dict[str, str]) -> Any:
    import psycopg

    from odradek.connect.connectors.jdbc_sql import conninfo

    conn = psycopg.connect(**conninfo(config), autocommit=True)
    conn.execute("SET TIME ZONE 'UTC'")  # db.timezone: UTC, as Confluent's default
    return conn


def resolve_tables(conn: Any, names: Sequence[str]) -> list[Table]:
    """`schema.table` or `table` (in the connection's current schema) -> Table; ValueError
    for a table that is not there."""
    out = []
    for name in names:
        schema, _, table = name.rpartition(".")
        row = conn.execute(
            "SELECT table_schema, table_name FROM information_schema.tables WHERE "
            "table_name = %s AND table_schema = COALESCE(NULLIF(%s, ''), current_schema())",
            (table, schema)).fetchone()
        if row is None:
            raise ValueError(f"table {name!r} of table.whitelist does not exist")
        out.append(Table(row[0], row[1]))
    return out


def describe(conn: Any, table: Table | None, base: str) -> list[ColumnType]:
    """The columns a read returns: their types, and (of a table) whether they are nullable."""
    with conn.cursor() as cur:
        cur.execute(f"{base} LIMIT 0")
        cols = [(d.name, d.type_code, d.scale) for d in cur.description or []]
    nullable: dict[str, bool] = {}
    if table is not None:
        rows = conn.execute("SELECT column_name, is_nullable FROM information_schema.columns "
                            "WHERE table_schema = %s AND table_name = %s",
                            (table.schema, table.name)).fetchall()
        nullable = {r[0]: r[1] == "YES" for r in rows}
    return [ColumnType(name, int(oid), scale, nullable.get(name, True))
            for name, oid, scale in cols]


class Source:
    """One table (or the query): its columns, schema and statements."""

    def __init__(self, conn: Any, settings: SourceSettings, table: Table | None) -> None:
        self.settings = settings
        self.table = table
        self.key = sql.QUERY_PARTITION["query"] if table is None else table.fqn
        self.base = sql.base_sql(table, settings.query)
        self.columns = describe(conn, table, self.base)
        self.schema = sql.value_schema(self.columns, table)
        ts_types = {c.oid for c in self.columns if c.name in settings.timestamps}
        self.naive_ts = 1184 not in ts_types  # `timestamp` (no zone) columns take naive values
        self.latest = sql.latest_sql(settings, self.base)
        self.range = sql.range_sql(settings, self.base)

    def end_of_next(self, conn: Any, start: dict[str, Any], limit: int) -> dict[str, Any]:
        """The offset after at most `limit` rows past `start` (start itself when none, and
        in bulk mode, which keeps no offset)."""
        if self.settings.mode == "bulk":
            return start
        args = {**sql.params(self.settings, start, self.naive_ts), "limit": limit}
        if self.settings.uses_timestamp:
            until = conn.execute("SELECT CURRENT_TIMESTAMP - make_interval(secs => %s)",
                                 (self.settings.delay_ms / 1000,)).fetchone()[0]
            args["until"] = until.replace(tzinfo=None) if self.naive_ts else until
        row = conn.execute(self.latest, args).fetchone()
        if row is None:
            return start
        values = list(row)
        ts = values.pop(0) if self.settings.uses_timestamp else None
        inc = values.pop(0) if self.settings.uses_incrementing else None
        return sql.offset_of(self.settings, ts, inc)

    def rows(self, conn: Any, start: dict[str, Any], end: dict[str, Any]) -> Iterator[tuple]:
        args = {**sql.params(self.settings, start, self.naive_ts),
                **sql.end_params(self.settings, end, self.naive_ts)}
        with conn.cursor() as cur:  # client-side: a range is at most about batch.max.rows
            cur.execute(self.range, args)
            while batch := cur.fetchmany(1000):
                yield from batch


class JdbcStreamReader(DataSourceStreamReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.config: dict[str, str] = json.loads(options["config"])
        self.worker: dict[str, str] = json.loads(options["worker"])
        self.name = options["name"]
        self.start: dict[str, Any] = json.loads(options["start"])
        self.settings = SourceSettings.of(self.config)
        self._conn: Any = None
        self._sources: list[Source] | None = None
        self._last = self.start

    def sources(self) -> list[Source]:
        if self._sources is None:
            conn = self.conn()
            tables: list[Table | None] = [None] if self.settings.query else \
                list(resolve_tables(conn, self.settings.tables))
            self._sources = [Source(conn, self.settings, t) for t in tables]
        return self._sources

    def conn(self) -> Any:
        if self._conn is None or self._conn.closed:
            self._conn = connect(self.config)
        return self._conn

    def initialOffset(self) -> dict[str, Any]:
        return self.start

    def getDefaultReadLimit(self) -> Any:
        from pyspark.sql.streaming.datasource import ReadMaxRows

        return ReadMaxRows(self.settings.batch_max_rows)

    def latestOffset(self, start: dict[str, Any] | None = None, limit: Any = None) -> dict:
        start = self._last if start is None else start
        rows = getattr(limit, "max_rows", None) or self.settings.batch_max_rows
        if getattr(limit, "__class__", type(None)).__name__ == "ReadAllAvailable":
            rows = 1 << 62
        tables = dict(start.get("tables", {}))
        if self.settings.mode == "bulk":
            end = {"tables": tables, "polls": int(start.get("polls", 0)) + 1}
        else:
            conn = self.conn()
            for source in self.sources():
                end_of = source.end_of_next(conn, tables.get(source.key, {}), rows)
                if end_of:  # a table with no row yet keeps no offset (no empty batch)
                    tables[source.key] = end_of
            end = {"tables": tables, "polls": 0}
        self._last = end
        return end

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        out = []
        for source in self.sources():
            begin = start.get("tables", {}).get(source.key, {})
            finish = end.get("tables", {}).get(source.key, {})
            if self.settings.mode == "bulk" or begin != finish:
                out.append(InputPartition(json.dumps([source.key, begin, finish])))
        return out

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        from odradek.connect.data import ConnectRecord
        from odradek.connect.source_records import SourceRecords

        key, begin, finish = json.loads(partition.value)
        records = SourceRecords(self.name, self.config, self.worker)
        batch: list[ConnectRecord] = []

        def flush() -> Iterator[tuple]:
            for r in records.encode(batch):
                yield (r["topic"], r["key"], r["value"],
                       [(h["key"], h["value"]) for h in r["headers"]])
            batch.clear()

        # An executor's own connection, closed when the range is read.
        with connect(self.config) as conn:
            tables: list[Table | None] = [None] if self.settings.query else \
                list(resolve_tables(conn, self.settings.tables))
            table = next(t for t in tables
                         if (sql.QUERY_PARTITION["query"] if t is None else t.fqn) == key)
            source = Source(conn, self.settings, table)
            topic, schema = self.settings.topic(source.table), source.schema
            for row in source.rows(conn, begin, finish):
                batch.append(ConnectRecord(topic, None, None, None, schema,
                                           sql.row_value(schema, row)))
                if len(batch) >= 1000:
                    yield from flush()
        yield from flush()

    def commit(self, end: dict) -> None:
        return None

    def stop(self) -> None:
        if self._conn is not None:
            self._conn.close()


class JdbcDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: StructType) -> JdbcStreamReader:
        return JdbcStreamReader(dict(self.options))
