"""Confluent's JdbcSinkConnector, for PostgreSQL, with its config names: records of `topics`
into tables (`table.name.format`, default `${topic}`), through psycopg.

`insert.mode` insert, upsert (INSERT ... ON CONFLICT DO UPDATE) or update; `pk.mode` none,
kafka, record_key or record_value with `pk.fields`; `delete.enabled` (pk.mode=record_key: a
tombstone deletes its row); `auto.create` creates a missing table from the record's schema,
`auto.evolve` adds a missing optional column; `fields.whitelist` limits the value's columns.
Records need a STRUCT value with a schema (JsonConverter with schemas, Avro).

Each micro-batch is one PostgreSQL transaction, statements in record order, committed before
the worker commits the batch's offsets: a crash between the two repeats the batch, so
delivery is at-least-once, and with upsert (or deletes) a repeat leaves the table as it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from odradek.connect.configdef import Field, as_list
from odradek.connect.connectors import jdbc_sql, sink_query
from odradek.connect.connectors.jdbc_sql import Column, SinkSettings, conninfo
from odradek.connect.data import ConnectRecord, DataError
from odradek.connect.plugins import ConnectorPlugin, RunContext

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import StreamingQuery


def settings_of(config: Mapping[str, str]) -> SinkSettings:
    return SinkSettings(pk_mode=config.get("pk.mode", "none").strip(),
                        pk_fields=tuple(as_list(config.get("pk.fields"))),
                        insert_mode=config.get("insert.mode", "insert").strip(),
                        delete_enabled=config.get("delete.enabled", "false").strip().lower()
                        == "true",
                        fields_whitelist=tuple(as_list(config.get("fields.whitelist"))))


class JdbcSink(ConnectorPlugin):
    class_name = "io.confluent.connect.jdbc.JdbcSinkConnector"
    type = "sink"
    version = "0.1.0"
    fields = (
        *jdbc_sql.connection_fields("Connection"),
        Field("insert.mode", "STRING", "insert", "HIGH", "The insertion mode to use.",
              group="Writes", recommended=("insert", "upsert", "update")),
        Field("batch.size", "INT", "3000", "MEDIUM",
              "Records to put in one statement batch, when possible.", group="Writes",
              at_least=1),
        Field("delete.enabled", "BOOLEAN", "false", "MEDIUM",
              "Whether to treat null record values as deletes. Requires pk.mode to be "
              "record_key.", group="Writes"),
        Field("table.name.format", "STRING", "${topic}", "MEDIUM",
              "A format string for the destination table name; ${topic} is the topic.",
              group="Data Mapping"),
        Field("pk.mode", "STRING", "none", "HIGH", "The primary key mode.",
              group="Data Mapping", recommended=("none", "kafka", "record_key",
                                                 "record_value")),
        Field("pk.fields", "LIST", "", "MEDIUM", "The primary key field names.",
              group="Data Mapping"),
        Field("fields.whitelist", "LIST", "", "MEDIUM",
              "The record value's fields to use as columns (empty: all).",
              group="Data Mapping"),
        Field("auto.create", "BOOLEAN", "false", "MEDIUM",
              "Whether to create the destination table when it is missing.", group="DDL Support"),
        Field("auto.evolve", "BOOLEAN", "false", "MEDIUM",
              "Whether to add columns when the record schema has fields the table lacks.",
              group="DDL Support"),
    )

    def extra_errors(self, config: Mapping[str, str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        s = settings_of(config)
        if s.delete_enabled and s.pk_mode != "record_key":
            out["delete.enabled"] = ["Deletes are only supported for pk.mode record_key"]
        if s.insert_mode in ("upsert", "update") and s.pk_mode == "none":
            out["pk.mode"] = [f"insert.mode={s.insert_mode} requires a primary key: set pk.mode "
                              "to kafka, record_key or record_value"]
        return out

    def task_configs(self, config: Mapping[str, str], max_tasks: int) -> list[dict[str, str]]:
        return [dict(config) for _ in range(max_tasks)]

    def start(self, ctx: RunContext) -> StreamingQuery:
        from odradek.connect.sink_records import SinkRecords

        records = SinkRecords(ctx.name, ctx.config, ctx.worker_config, ctx.cluster)
        writer = TableWriter(ctx.config)

        def write(df: DataFrame, batch_id: int) -> None:
            rows = (df.select(*sink_query.COLUMNS).orderBy("topic", "partition", "offset")
                    .toArrow().to_pylist())
            if rows:
                writer.write(records.convert(rows))

        return sink_query.start_each_batch(ctx, sink_query.stream(ctx), write)


class TableWriter:
    """psycopg I/O: one transaction per batch; tables checked (and created or evolved) once
    per schema."""

    def __init__(self, config: Mapping[str, str]) -> None:
        self.config = dict(config)
        self.settings = settings_of(config)
        self.table_format = config.get("table.name.format", "${topic}")
        self.auto_create = config.get("auto.create", "false").strip().lower() == "true"
        self.auto_evolve = config.get("auto.evolve", "false").strip().lower() == "true"
        self.known: dict[str, set[str]] = {}  # table -> its columns, as last read
        self.batch_size = int(config.get("batch.size", "3000"))

    def write(self, records: list[ConnectRecord]) -> None:
        import psycopg

        if not records:
            return
        try:
            with psycopg.connect(**conninfo(self.config)) as conn, conn.cursor() as cur:
                run: list[dict[str, Any]] = []
                run_sql = ""
                for record in records:
                    sql, values = self.statement(cur, record)
                    if run and (sql != run_sql or len(run) >= self.batch_size):
                        cur.executemany(run_sql, run)
                        run = []
                    run_sql = sql
                    run.append(values)
                if run:
                    cur.executemany(run_sql, run)
                # the `with` commits on a clean exit, rolls back on an exception
        except BaseException:
            self.known.clear()  # a rolled-back CREATE or ALTER: read the tables again
            raise

    def statement(self, cur: Any, record: ConnectRecord) -> tuple[str, dict[str, Any]]:
        table = jdbc_sql.table_name(self.table_format, record.topic)
        if record.value is None:
            if not self.settings.delete_enabled:
                raise DataError(
                    f"Sink connector is configured with 'delete.enabled=false' and "
                    f"'pk.mode={self.settings.pk_mode}' and therefore requires records with a "
                    f"non-null Struct value and non-null Struct schema, but found record at "
                    f"(topic='{record.topic}',partition={record.partition},"
                    f"offset={record.offset}) with a null value")
            keys = [c for c in jdbc_sql.columns(self.settings, record.new(value_schema=None))
                    if c.key]
            values = jdbc_sql.row(self.settings, record, keys)
            return jdbc_sql.delete_sql(table, keys), jdbc_sql.params(values, keys)
        if record.value_schema is None:
            raise DataError(f"Sink connector requires records with a non-null Struct value "
                            f"and non-null Struct schema, but found record at "
                            f"(topic='{record.topic}',partition={record.partition},"
                            f"offset={record.offset}) with a schemaless value")
        cols = jdbc_sql.columns(self.settings, record)
        self.ensure(cur, table, cols)
        values = jdbc_sql.row(self.settings, record, cols)
        return jdbc_sql.upsert_sql(self.settings, table, cols), jdbc_sql.params(values, cols)

    def ensure(self, cur: Any, table: str, cols: list[Column]) -> None:
        have = self.known.get(table)
        if have is not None and all(c.name in have for c in cols):
            return
        cur.execute("SELECT column_name FROM information_schema.columns "
                    "WHERE table_schema = current_schema() AND table_name = %s", (table,))
        have = {r[0] for r in cur.fetchall()}
        if not have:
            if not self.auto_create:
                raise DataError(f"Table {jdbc_sql.quote(table)} is missing and auto-creation "
                                "is disabled")
            cur.execute(jdbc_sql.create_table(table, cols))
            have = {c.name for c in cols}
        missing = [c for c in cols if c.name not in have]
        if missing:
            if not self.auto_evolve:
                raise DataError(f"Table {jdbc_sql.quote(table)} is missing fields "
                                f"{[c.name for c in missing]} and auto-evolution is disabled")
            for sql in jdbc_sql.alter_table(table, missing):
                cur.execute(sql)
            have |= {c.name for c in missing}
        self.known[table] = have

