"""Streaming ETL into a data lake: JSON events from a topic to Parquet and to a Delta table.

Two streaming queries read the same topic, each with its own checkpoint:

- `start_parquet`: Spark's file sink, Parquet partitioned by `date` (the event's UTC date).
  Exactly-once through the sink's own log (`<path>/_spark_metadata`): a re-executed batch
  whose id is already in that log is skipped, and readers that go through the log (Spark,
  or anything reading `_spark_metadata`) never see files of a failed attempt.
- `start_delta`: `foreachBatch` turns each micro-batch into Arrow and appends it with the
  `deltalake` package (no Delta jar needed in Spark). See `DeltaBatchWriter` for how a
  re-executed batch is kept from being appended twice.

`start(...)` starts both and returns them; `build(spark, ctx)` is the hook
`odradek pipeline run` calls.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.types import (
    DecimalType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from examples.lake_etl.delta import DeltaBatchWriter
from odradek.spark import register

EVENT_SCHEMA = StructType([
    StructField("event_id", StringType()),
    StructField("user_id", LongType()),
    StructField("kind", StringType()),
    StructField("amount", DecimalType(12, 2)),
    StructField("ts", TimestampType()),
])
REQUIRED = ("event_id", "ts")
MS_PER_DAY = 86_400_000
Trigger = Mapping[str, object]


def utc_date(ts: Column) -> Column:
    """The UTC calendar date of an instant, whatever spark.sql.session.timeZone says.

    to_date(ts) would use the session time zone; counting whole days since the epoch does not.
    """
    return F.date_from_unix_date(F.floor(F.unix_millis(ts) / MS_PER_DAY).cast("int"))


def events(spark: SparkSession, bootstrap: str, topic: str,
           source_options: Mapping[str, str] | None = None) -> DataFrame:
    """The topic's records parsed into typed events plus their date and Kafka position.

    A value that is not JSON, or lacks a required field, fails the query with a message that
    names its partition and offset: the lake never silently loses an event.
    """
    register(spark)
    reader = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    for key, value in (source_options or {}).items():
        reader = reader.option(key, value)
    raw = reader.load()
    parsed = raw.select(
        F.from_json(F.col("value").cast("string"), EVENT_SCHEMA, {"mode": "FAILFAST"}).alias("e"),
        F.col("partition").alias("kafka_partition"), F.col("offset").alias("kafka_offset"),
    )
    missing = F.lit(False)
    for name in REQUIRED:
        missing = missing | F.col(f"e.{name}").isNull()
    position = F.concat(F.lit("partition "), F.col("kafka_partition").cast("string"),
                        F.lit(" offset "), F.col("kafka_offset").cast("string"))
    checked = parsed.withColumn("e", F.when(
        missing, F.raise_error(F.concat(F.lit(f"lake_etl: event without {' or '.join(REQUIRED)} at "),
                                        position))).otherwise(F.col("e")))
    return checked.select(
        "e.event_id", "e.user_id", "e.kind", "e.amount", F.col("e.ts").alias("event_time"),
        utc_date(F.col("e.ts")).alias("date"), "kafka_partition", "kafka_offset",
    )


def start_parquet(spark: SparkSession, bootstrap: str, topic: str, path: str | Path, checkpoint: str | Path,
                  *, trigger: Trigger | None = None,
                  source_options: Mapping[str, str] | None = None) -> StreamingQuery:
    writer = (events(spark, bootstrap, topic, source_options).writeStream.format("parquet")
              .partitionBy("date").option("path", str(path))
              .option("checkpointLocation", str(checkpoint)).queryName(f"lake_etl_parquet_{_tag(topic)}"))
    if trigger:
        writer = writer.trigger(**trigger)  # type: ignore[arg-type]
    return writer.start()


def start_delta(spark: SparkSession, bootstrap: str, topic: str, table_uri: str | Path,
                checkpoint: str | Path, *, trigger: Trigger | None = None,
                source_options: Mapping[str, str] | None = None,
                writer: DeltaBatchWriter | None = None) -> StreamingQuery:
    sink = writer or DeltaBatchWriter(str(table_uri), partition_by=("date",))
    stream = (events(spark, bootstrap, topic, source_options).writeStream.foreachBatch(sink)
              .option("checkpointLocation", str(checkpoint)).queryName(f"lake_etl_delta_{_tag(topic)}"))
    if trigger:
        stream = stream.trigger(**trigger)  # type: ignore[arg-type]
    return stream.start()


def start(spark: SparkSession, bootstrap: str, topic: str, out_dir: str | Path, checkpoint: str | Path,
          *, trigger: Trigger | None = None,
          source_options: Mapping[str, str] | None = None) -> list[StreamingQuery]:
    """Both queries: `<out_dir>/parquet` and `<out_dir>/delta`, checkpoints under `checkpoint`."""
    out, cp = Path(out_dir), Path(checkpoint)
    parquet = start_parquet(spark, bootstrap, topic, out / "parquet", cp / "parquet",
                            trigger=trigger, source_options=source_options)
    settle(parquet)
    delta = start_delta(spark, bootstrap, topic, out / "delta", cp / "delta",
                        trigger=trigger, source_options=source_options)
    return [parquet, delta]


def build(spark: SparkSession, ctx: Any) -> list[StreamingQuery]:
    """The `odradek pipeline run examples/lake_etl` hook: `--var topic=... --var out=...`."""
    return start(spark, ctx.bootstrap or os.environ.get("ODRADEK_BOOTSTRAP", "localhost:9092"),
                 ctx.var("topic", "events"), ctx.var("out", "lake"), ctx.checkpoint("lake_etl"),
                 trigger=ctx.trigger())


def settle(query: StreamingQuery, limit: float = 60.0) -> None:
    """Wait until a query has started its source before starting another.

    A Python data source's planning worker must connect back to the JVM within 10 s; two
    queries initialising at once on a busy machine can miss that.
    """
    deadline = time.monotonic() + limit
    while query.isActive and time.monotonic() < deadline:
        if not str(query.status.get("message", "")).startswith("Initializing"):
            return
        time.sleep(0.2)


def _tag(topic: str) -> str:
    # Query names must be unique among active queries; a topic name may hold characters
    # that are awkward in one.
    return "".join(c if c.isalnum() else "_" for c in topic)

