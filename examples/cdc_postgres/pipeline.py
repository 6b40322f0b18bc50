"""Change capture into PostgreSQL: change events from a topic applied as upserts and deletes.

    query = start(spark, "localhost:9092", "customers.cdc",
                  "host=127.0.0.1 port=5432 user=app dbname=shop", "/tmp/cdc-checkpoint")

The topic holds the envelope described in `changes.py`. Each micro-batch is reduced to the
last change per primary key and applied in one PostgreSQL transaction together with its batch
id (`postgres_writer.py`), so the table follows the topic exactly once, restarts included.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from examples.cdc_postgres.changes import CUSTOMERS, DELETE_OP, UPSERT_OPS, TableSpec
from examples.cdc_postgres.postgres_writer import PostgresBatchWriter, ensure_tables
from odradek.spark import register

Trigger = Mapping[str, object]


def changes(spark: SparkSession, bootstrap: str, topic: str, spec: TableSpec = CUSTOMERS,
            source_options: Mapping[str, str] | None = None) -> DataFrame:
    """One row per change: pk, op ('d' for deletes and tombstones), the after-row's columns.

    A change that cannot be applied (not JSON, unknown op, no key, an upsert without `after`)
    fails the query with a message naming its partition and offset: a CDC sink that skipped
    one would leave the table silently wrong.
    """
    register(spark)
    reader = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    for key, value in (source_options or {}).items():
        reader = reader.option(key, value)
    raw = reader.load()
    parsed = raw.select(
        F.from_json(F.col("key").cast("string"), spec.key_schema, {"mode": "FAILFAST"}).alias("k"),
        F.from_json(F.col("value").cast("string"), spec.envelope_schema, {"mode": "FAILFAST"}).alias("v"),
        F.col("value").isNull().alias("tombstone"),
        F.col("partition").alias("kafka_partition"), F.col("offset").alias("kafka_offset"),
    )
    pk = F.coalesce(F.col(f"k.{spec.key}"), F.col(f"v.after.{spec.key}"), F.col(f"v.before.{spec.key}"))
    op = F.when(F.col("tombstone"), F.lit(DELETE_OP)).otherwise(F.col("v.op"))
    bad = (pk.isNull() | ~op.isin(DELETE_OP, *UPSERT_OPS) | op.isNull()
           | (op.isin(*UPSERT_OPS) & F.col("v.after").isNull()))
    position = F.concat(F.lit("partition "), F.col("kafka_partition").cast("string"),
                        F.lit(" offset "), F.col("kafka_offset").cast("string"))
    checked_op = F.when(bad, F.raise_error(F.concat(
        F.lit("cdc_postgres: change without a key, with an unknown op or an upsert without 'after' at "),
        position))).otherwise(op)
    # A delete needs only the key; the other columns of its row are null.
    columns = [pk.alias(spec.key) if name == spec.key else F.col(f"v.after.{name}").alias(name)
               for name in spec.names]
    return parsed.select(checked_op.alias("op"), pk.alias("pk"), *columns, "kafka_partition", "kafka_offset")


def start(spark: SparkSession, bootstrap: str, topic: str, conninfo: str, checkpoint: str | Path,
          *, spec: TableSpec = CUSTOMERS, trigger: Trigger | None = None,
          source_options: Mapping[str, str] | None = None,
          writer: PostgresBatchWriter | None = None) -> StreamingQuery:
    ensure_tables(conninfo, spec)
    sink = writer or PostgresBatchWriter(conninfo, spec)
    stream = (changes(spark, bootstrap, topic, spec, source_options).writeStream.foreachBatch(sink)
              .option("checkpointLocation", str(checkpoint))
              .queryName("cdc_postgres_" + "".join(c if c.isalnum() else "_" for c in topic)))
    if trigger:
        stream = stream.trigger(**trigger)  # type: ignore[arg-type]
    return stream.start()


def build(spark: SparkSession, ctx: Any) -> StreamingQuery:
    """The `odradek pipeline run examples/cdc_postgres` hook: `--var conninfo=... --var topic=...`."""
    return start(spark, ctx.bootstrap or os.environ.get("ODRADEK_BOOTSTRAP", "localhost:9092"),
                 ctx.var("topic", "customers.cdc"), ctx.var("conninfo"), ctx.checkpoint("cdc_postgres"),
                 trigger=ctx.trigger())
