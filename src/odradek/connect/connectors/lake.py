"""A lake sink: the records of `topics` appended to Parquet files under `path`.

Columns: topic, partition, offset, timestamp, key, value; key and value as their converter
reads them (StringConverter: string, ByteArrayConverter: binary, JsonConverter: the JSON text
of the payload). `partition.by` names columns to lay the files out by (Hive-style folders).
`format=parquet`: each micro-batch is one Spark append (`df.write.parquet`); offsets go to
the group `connect-<name>` after it, so delivery is at-least-once: a crash between the two
appends the batch again. `format=delta`: a Delta table, each micro-batch one Delta commit
that records the Kafka offsets in the same transaction, so exactly-once (lake_delta).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from odradek.connect import converters
from odradek.connect.configdef import Field, as_list
from odradek.connect.connectors import lake_delta, sink_query
from odradek.connect.plugins import ConnectorPlugin, RunContext

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import StreamingQuery

COLUMNS = ("topic", "partition", "offset", "timestamp", "key", "value")


def _path_check(raw: str, config: Mapping[str, str]) -> list[str]:
    return [] if raw.strip() else ["'path' must name the directory to write to"]


FORMATS = ("parquet", "delta")


def _partition_check(raw: str, config: Mapping[str, str]) -> list[str]:
    bad = [c for c in as_list(raw) if c not in COLUMNS]
    return [f"Invalid value {raw} for configuration partition.by: unknown column(s) "
            f"{', '.join(bad)}; choose from {', '.join(COLUMNS)}"] if bad else []


class LakeSink(ConnectorPlugin):
    class_name = "odradek.connect.lake.LakeSinkConnector"
    type = "sink"
    version = "0.1.0"
    fields = (
        Field("path", "STRING", None, "HIGH", "The directory (a URI Spark can write) the "
              "files go to.", group="Lake", check=_path_check),
        Field("format", "STRING", "parquet", "HIGH", "The table format: parquet files "
              "(at-least-once) or a Delta table (exactly-once).", group="Lake",
              recommended=FORMATS),
        Field("partition.by", "LIST", "", "MEDIUM", "Columns to partition the files by.",
              group="Lake", check=_partition_check),
    )

    def extra_errors(self, config: Mapping[str, str]) -> dict[str, list[str]]:
        # The lake's records go through Spark expressions, not per record in Python, so
        # what needs Python per record is refused here rather than ignored.
        out: dict[str, list[str]] = {}
        if (as_list(config.get("transforms"))
                and config.get("format", "parquet").strip() != "delta"):
            out["transforms"] = ["LakeSinkConnector applies Single Message Transforms with "
                                 "format=delta only; remove 'transforms'"]
        for which in ("key.converter", "value.converter"):
            if config.get(which, converters.JSON).strip() == converters.AVRO:
                out[which] = [f"LakeSinkConnector does not read {converters.AVRO} yet"]
        if config.get("errors.tolerance", "none").strip() != "none":
            out["errors.tolerance"] = ["LakeSinkConnector supports errors.tolerance=none only"]
        return out

    def task_configs(self, config: Mapping[str, str], max_tasks: int) -> list[dict[str, str]]:
        return [dict(config) for _ in range(max_tasks)]

    def start(self, ctx: RunContext) -> StreamingQuery:
        path = ctx.config["path"]
        parts = as_list(ctx.config.get("partition.by"))
        key = converters.resolve("key.converter", ctx.config, ctx.worker_config)
        value = converters.resolve("value.converter", ctx.config, ctx.worker_config)
        delta = ctx.config.get("format", "parquet").strip() == "delta"
        if delta:
            lake_delta.resume(ctx)  # the table's offsets, before the stream is planned
        df = sink_query.stream(ctx)
        if delta and as_list(ctx.config.get("transforms")):
            # Transforms run per record in Python (Kafka's WorkerSinkTask order: converters,
            # then the chain) on the driver, between the table's offsets and its commit.
            return lake_delta.start(ctx, df.select(*sink_query.COLUMNS), parts,
                                    lake_delta.transformer(ctx, key, value))
        table = df.select("topic", "partition", "offset", "timestamp",
                          _column(df["key"], key).alias("key"),
                          _column(df["value"], value).alias("value"))
        if delta:
            return lake_delta.start(ctx, table, parts)

        def write(batch: DataFrame, batch_id: int) -> None:
            writer = batch.write.mode("append")
            if parts:
                writer = writer.partitionBy(*parts)
            writer.parquet(path)

        return sink_query.start_each_batch(ctx, table, write)


def _column(col: Any, converter: Any) -> Any:
    from pyspark.sql import functions as F

    if converter.kind == "bytes":
        return col
    text = col.cast("string")
    if converter.kind == "json" and converter.schemas:
        # The payload's JSON text; the envelope's schema is not kept.
        return F.get_json_object(text, "$.payload")
    return text
