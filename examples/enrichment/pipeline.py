"""Enrichment: a stream of user actions joined to user profiles held in a compacted topic.

The table side is the compacted topic read as a *batch* DataFrame (earliest to latest) and
reduced to the latest value per key: `max_by(value, offset)` per key, since Kafka keeps a key
in one partition, so its highest offset is its current value; keys whose latest value is a
tombstone (null) are deleted users and drop out. Reading the whole topic is what compaction
makes cheap: it keeps about one record per key.

How the table refreshes: a plain stream-static join does not do it here. Spark keeps the
static side's scan as planned when the query starts (tried: a profile changed while the query
runs was not seen by later micro-batches), so the join would use a snapshot forever. This
pipeline therefore joins in `foreachBatch`: every micro-batch reads the compacted topic again
(as of that moment) and joins its actions to it, then writes the result with the odradek sink
as a batch write. The cost is one read of the compacted topic per micro-batch, fine for
dimension tables of thousands to a few hundred thousand keys (compaction keeps them small).
The join is by processing time, not event time: an action gets the profile current when its
micro-batch runs. Delivery is at-least-once: a micro-batch re-run after a crash writes its
rows again (keyed by event_id, so a compacted output topic or the reader can de-duplicate).

Output, keyed by event_id, with null profile fields for unknown or deleted users:

    {"event_id", "user_id", "action", "ts": epoch ms, "name", "tier", "country"}
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from odradek.spark import register
from odradek.spark.deadletter import DeadLetter
from odradek.spark.serde import parse_json

ACTION_SCHEMA = "event_id STRING, user_id STRING, action STRING, ts TIMESTAMP"
PROFILE_SCHEMA = "user_id STRING, name STRING, tier STRING, country STRING"


def latest_table(spark: SparkSession, bootstrap: str, topic: str,
                 source_options: Mapping[str, str] | None = None) -> DataFrame:
    """The compacted topic as a table: the latest non-tombstone value per key, parsed."""
    rows = (spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("startingOffsets", "earliest")
            .options(**dict(source_options or {})).load())
    current = (rows.where(F.col("key").isNotNull()).groupBy("key")
               .agg(F.max_by("value", "offset").alias("value"))
               .where(F.col("value").isNotNull()))
    return parse_json(current, PROFILE_SCHEMA).select(
        F.col("key").cast("string").alias("profile_key"), "data.name", "data.tier", "data.country")


def enriched(actions: DataFrame, table: DataFrame) -> DataFrame:
    joined = actions.join(table, actions["user_id"] == table["profile_key"], "left")
    return joined.select("event_id", "user_id", "action", F.unix_millis("ts").alias("ts"),
                         "name", "tier", "country")


def build(spark: SparkSession, bootstrap: str, input_topic: str, table_topic: str, output_topic: str,
          checkpoint: str, *, trigger: Mapping[str, object] | None = None,
          dead_letter_topic: str | None = None,
          source_options: Mapping[str, str] | None = None,
          table_options: Mapping[str, str] | None = None) -> StreamingQuery:
    """`source_options` go to the action stream, `table_options` to the batch table read."""
    register(spark)
    dead = DeadLetter(dead_letter_topic, bootstrap) if dead_letter_topic else None
    rows = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", input_topic).option("startingOffsets", "earliest")
            .options(**dict(source_options or {})).load())
    actions = parse_json(rows, ACTION_SCHEMA, on_error="dead-letter" if dead else "fail",
                         dead_letter=dead).select("data.*")
    table_opts = dict(table_options or {})
    dest = {"kafka.bootstrap.servers": bootstrap, "topic": output_topic}

    def enrich_batch(batch: DataFrame, _batch_id: int) -> None:
        # Runs on the driver once per micro-batch: a fresh read of the table each time.
        out = enriched(batch, latest_table(spark, bootstrap, table_topic, table_opts))
        (out.select(F.col("event_id").alias("key"), F.to_json(F.struct(*out.columns)).alias("value"))
         .write.format("odradek").options(**dest).mode("append").save())

    writer = (actions.writeStream.foreachBatch(enrich_batch).option("checkpointLocation", checkpoint)
              .queryName(f"enrichment-{output_topic}"))
    if trigger:
        writer = writer.trigger(**trigger)
    return writer.start()
