"""Confluent's JdbcSourceConnector, for PostgreSQL, with its config names: the rows of
`table.whitelist` (or of one `query`) to topics `<topic.prefix><table>` (`<topic.prefix>` in
query mode), each row a STRUCT named after its table, through the value converter.

`mode` bulk, incrementing, timestamp or timestamp+incrementing (jdbc_source_sql says how
each reads); `batch.max.rows` bounds a micro-batch per table; `poll.interval.ms` is the
query's trigger interval; `timestamp.delay.interval.ms` leaves rows that new alone until
transactions with older timestamps have committed. Offsets go to connect-offsets in
Confluent's format after each micro-batch (jdbc_source_reader), so a restarted connector
resumes after the last row it sent.

Delivery is at-least-once: a crash after a batch is in the topic but before its offsets are
stored sends that batch again. Rows deleted, or changed without moving the incrementing or
timestamp column, are not seen (as in Confluent's; the CDC source sees them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from odradek.connect.configdef import Field
from odradek.connect.connectors import jdbc_source_sql as sql
from odradek.connect.connectors import sink_query
from odradek.connect.connectors.jdbc_source_sql import SourceSettings
from odradek.connect.connectors.jdbc_sql import connection_fields
from odradek.connect.plugins import ConnectorPlugin, RunContext

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQuery


class JdbcSource(ConnectorPlugin):
    class_name = "io.confluent.connect.jdbc.JdbcSourceConnector"
    type = "source"
    version = "0.1.0"
    fields = (
        *connection_fields("Database"),
        Field("table.whitelist", "LIST", "", "MEDIUM",
              "The tables to read (`table` in the current schema, or `schema.table`).",
              group="Database"),
        Field("mode", "STRING", None, "HIGH",
              "The mode for updating a table each time it is polled.", group="Mode",
              recommended=sql.MODES),
        Field("incrementing.column.name", "STRING", "", "MEDIUM",
              "The name of the strictly incrementing column to use to detect new rows.",
              group="Mode"),
        Field("timestamp.column.name", "LIST", "", "MEDIUM",
              "Comma separated list of one or more timestamp columns to detect new or modified "
              "rows using the COALESCE SQL function.", group="Mode"),
        Field("query", "STRING", "", "MEDIUM",
              "If specified, the query to perform to select new or updated rows.",
              group="Mode"),
        Field("topic.prefix", "STRING", None, "HIGH",
              "Prefix to prepend to table names to generate the name of the Kafka topic to "
              "publish data to, or in the case of a custom query, the full name of the topic.",
              group="Connector"),
        Field("poll.interval.ms", "INT", "5000", "HIGH",
              "Frequency in ms to poll for new data in each table.", group="Connector",
              at_least=1),
        Field("batch.max.rows", "INT", "100", "LOW",
              "Maximum number of rows to include in a single batch when polling for new data.",
              group="Connector", at_least=1),
        Field("timestamp.delay.interval.ms", "LONG", "0", "HIGH",
              "How long to wait after a row with a certain timestamp appears before we include "
              "it in the result.", group="Connector", at_least=0),
    )

    def extra_errors(self, config: Mapping[str, str]) -> dict[str, list[str]]:
        try:
            return SourceSettings.of(config).errors()
        except ValueError:
            return {}  # a number that is not one: its field says so

    def task_configs(self, config: Mapping[str, str], max_tasks: int) -> list[dict[str, str]]:
        # One query reads every table; Spark reads the tables' ranges in parallel.
        return [dict(config)]

    def offset_errors(self, partition: dict[str, Any], offset: dict[str, Any] | None) -> list[str]:
        return sql.offset_errors(SourceSettings(mode="bulk"), partition, offset)

    def start(self, ctx: RunContext) -> StreamingQuery:
        from odradek.connect.connectors.jdbc_source_reader import (
            NAME,
            JdbcDataSource,
            connect,
            resolve_tables,
        )

        settings = SourceSettings.of(ctx.config)
        stored = list(ctx.offsets or [])
        tables: dict[str, Any] = {}
        if settings.mode != "bulk":
            if settings.query:
                found = sql.stored_offset(None, stored)
                if found:
                    tables[sql.QUERY_PARTITION["query"]] = found
            else:
                with connect(ctx.config) as conn:
                    for table in resolve_tables(conn, settings.tables):
                        found = sql.stored_offset(table, stored)
                        if found:
                            tables[table.fqn] = found
        ctx.spark.dataSource.register(JdbcDataSource)
        rows = (ctx.spark.readStream.format(NAME)
                .option("config", json.dumps(ctx.config))
                .option("worker", json.dumps(dict(ctx.worker_config)))
                .option("name", ctx.name)
                .option("start", json.dumps({"tables": tables, "polls": 0})).load())
        return (rows.writeStream.format("odradek").options(**ctx.cluster.spark_options())
                .option("checkpointLocation", ctx.checkpoint)
                .queryName(sink_query.query_name(ctx.name))
                .trigger(processingTime=f"{settings.poll_ms} milliseconds").start())

    def source_offset(self, config: Mapping[str, str],
                      end: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        out = []
        for key, offset in (end.get("tables") or {}).items():
            if not offset:
                continue
            if key == sql.QUERY_PARTITION["query"] and config.get("query", "").strip():
                out.append((dict(sql.QUERY_PARTITION), dict(offset)))
            else:
                out.append(({"protocol": "1", "table": key}, dict(offset)))
        return out
