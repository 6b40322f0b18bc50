"""Debezium's PostgreSQL connector (io.debezium.connector.postgresql.PostgresConnector), with
its config names: the changes of a PostgreSQL database, read by logical decoding with the
pgoutput plugin, as Debezium's change events on `<topic.prefix>.<schema>.<table>`.

`snapshot.mode=initial` (the default) first reads every included table in the snapshot the
replication slot exported when it was created, then the changes committed after the slot's
consistent point; `never` only streams. Offsets in connect-offsets are Debezium's: partition
`{"server": <topic.prefix>}`, offset `{"lsn", "txId", "ts_usec"}` (plus `snapshot` while the
snapshot runs: a restart takes the snapshot again, with a new slot).

Delivery is at-least-once: the slot is advanced past a transaction only after its records are
in the topics, so a crash never loses a change; it may send the transactions of the last
unfinished micro-batch again (and a snapshot cut short is taken again). One task, as
Debezium's. pg_cdc_source holds the I/O; pg_cdc_records builds the events.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from odradek.connect.configdef import Field
from odradek.connect.connectors import sink_query
from odradek.connect.plugins import ConnectorPlugin, RunContext

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQuery


def _one_of(name: str, allowed: tuple[str, ...], why: str = "") -> Any:
    def check(raw: str, config: Mapping[str, str]) -> list[str]:
        if raw.strip().lower() in allowed:
            return []
        return [f"Invalid value {raw} for configuration {name}: must be one of "
                f"{', '.join(allowed)}{why}"]
    return check


def _regexes(raw: str, config: Mapping[str, str]) -> list[str]:
    out = []
    for pattern in (p.strip() for p in raw.split(",") if p.strip()):
        try:
            re.compile(pattern)
        except re.error as exc:
            out.append(f"Invalid value {pattern} for configuration table.include.list: {exc}")
    return out


def _required(name: str) -> Any:
    def check(raw: str, config: Mapping[str, str]) -> list[str]:
        return [] if raw.strip() else [f"The '{name}' value is invalid: A value is required"]
    return check


class PgCdc(ConnectorPlugin):
    class_name = "io.debezium.connector.postgresql.PostgresConnector"
    type = "source"
    version = "2.7.0.Final-odradek"
    fields = (
        Field("database.hostname", "STRING", None, "HIGH",
              "Resolvable hostname or IP address of the database server.",
              group="Connection", check=_required("database.hostname")),
        Field("database.port", "INT", "5432", "MEDIUM", "Port of the database server.",
              group="Connection", at_least=1),
        Field("database.user", "STRING", None, "HIGH", "Name of the database user.",
              group="Connection", check=_required("database.user")),
        Field("database.password", "PASSWORD", "", "HIGH", "Password of the database user.",
              group="Connection"),
        Field("database.dbname", "STRING", None, "HIGH", "The name of the database.",
              group="Connection", check=_required("database.dbname")),
        Field("topic.prefix", "STRING", None, "HIGH",
              "Topic prefix that identifies this database server; topics are "
              "<topic.prefix>.<schema>.<table>.", group="Connector",
              check=_required("topic.prefix")),
        Field("table.include.list", "LIST", "", "MEDIUM",
              "Regular expressions matching <schema>.<table> of the tables to capture "
              "(empty: all).", group="Filters", check=_regexes),
        Field("plugin.name", "STRING", "pgoutput", "MEDIUM",
              "The logical decoding plugin.", group="Connection",
              check=_one_of("plugin.name", ("pgoutput",),
                            " (decoderbufs is a server extension not offered here)")),
        Field("slot.name", "STRING", "debezium", "MEDIUM",
              "The name of the replication slot.", group="Connection",
              check=lambda raw, c: [] if re.fullmatch(r"[a-z0-9_]{1,63}", raw) else
              [f"Invalid value {raw} for configuration slot.name: Valid replication slot "
               "name must contain only digits, lowercase characters and underscores with "
               "length <= 63"]),
        Field("publication.name", "STRING", "dbz_publication", "MEDIUM",
              "The name of the PostgreSQL publication.", group="Connection"),
        Field("publication.autocreate.mode", "STRING", "all_tables", "MEDIUM",
              "Whether and how to create the publication when it is missing.",
              group="Connection", check=_one_of("publication.autocreate.mode",
                                                ("all_tables", "disabled", "filtered"))),
        Field("snapshot.mode", "STRING", "initial", "MEDIUM",
              "initial: snapshot the tables when there are no offsets; never: only stream.",
              group="Connector", check=_one_of("snapshot.mode", ("initial", "never"),
                                               " (other Debezium modes are not offered)")),
        Field("tombstones.on.delete", "BOOLEAN", "true", "MEDIUM",
              "Whether a delete event is followed by a tombstone.", group="Connector"),
        Field("decimal.handling.mode", "STRING", "precise", "MEDIUM",
              "How NUMERIC columns are represented: precise, double or string.",
              group="Connector", check=_one_of("decimal.handling.mode",
                                               ("precise", "double", "string"))),
        Field("max.batch.size", "INT", "2048", "MEDIUM",
              "About how many changes one micro-batch reads (whole transactions).",
              group="Connector", at_least=1),
    )

    def extra_errors(self, config: Mapping[str, str]) -> dict[str, list[str]]:
        if config.get("tasks.max", "1").strip() not in ("", "1"):
            return {"tasks.max": ["Only a single task is supported: one replication slot is "
                                  "read by one session"]}
        return {}

    def task_configs(self, config: Mapping[str, str], max_tasks: int) -> list[dict[str, str]]:
        return [dict(config)]

    def offset_errors(self, partition: dict[str, Any], offset: dict[str, Any] | None) -> list[str]:
        if set(partition) != {"server"} or not isinstance(partition["server"], str):
            return ["Partitions for PostgresConnector must contain exactly one key: 'server'"]
        if offset is not None and not isinstance(offset.get("lsn"), int):
            return ["The offset must have an integer 'lsn'"]
        return []

    def start(self, ctx: RunContext) -> StreamingQuery:
        from odradek.connect.connectors.pg_cdc_source import PgCdcSource

        ctx.spark.dataSource.register(PgCdcSource)
        prefix = ctx.config["topic.prefix"]
        stored = next((off for part, off in ctx.offsets or []
                       if part.get("server") == prefix), None)
        changes = (ctx.spark.readStream.format("odradek_connect_pg_cdc")
                   .option("name", ctx.name).option("config", json.dumps(ctx.config))
                   .option("worker", json.dumps(dict(ctx.worker_config)))
                   .option("offset", json.dumps(stored)).load())
        return (changes.writeStream.format("odradek").options(**ctx.cluster.spark_options())
                .option("checkpointLocation", ctx.checkpoint)
                .queryName(sink_query.query_name(ctx.name))
                .trigger(processingTime=sink_query.TRIGGER).start())

    def source_offset(self, config: Mapping[str, str],
                      end: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        offset = {"lsn": int(end["lsn"]), "txId": end.get("txId"), "ts_usec": end.get("ts_usec")}
        if end.get("snapshot"):
            offset.update(snapshot=True, last_snapshot_record=False)
        return [({"server": config["topic.prefix"]}, offset)]
