"""Clickstream analytics: page views per region in tumbling, hopping and session windows.

One streaming query reads JSON page views (declared schema, bad values to a dead-letter topic
or failing the query), puts a watermark on the event time, counts views three ways and writes
every closed window to the output topic as JSON, keyed by region:

    {"kind": "tumbling"|"hopping"|"session", "region": ..., "user": null|...,
     "window_start": epoch ms, "window_end": epoch ms, "views": n}

- tumbling: 1-minute windows per region;
- hopping: 2-minute windows sliding every minute per region (each view counts in two);
- session: per region and user, a session closes after 30 s without a view.

Output mode is append: a window is written once, when the watermark (the latest event time
seen minus WATERMARK) passes its end; views older than the watermark are dropped as late.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from odradek.spark import register
from odradek.spark.deadletter import DeadLetter
from odradek.spark.serde import parse_json

SCHEMA = "user STRING, region STRING, page STRING, ts TIMESTAMP"
WATERMARK = "2 minutes"
TUMBLING = "1 minute"
HOPPING = ("2 minutes", "1 minute")
SESSION_GAP = "30 seconds"


def views(spark: SparkSession, bootstrap: str, topic: str, *, dead_letter_topic: str | None = None,
          source_options: Mapping[str, str] | None = None) -> DataFrame:
    rows = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("startingOffsets", "earliest")
            .options(**dict(source_options or {})).load())
    dead = DeadLetter(dead_letter_topic, bootstrap) if dead_letter_topic else None
    parsed = parse_json(rows, SCHEMA, on_error="dead-letter" if dead else "fail", dead_letter=dead)
    return parsed.select("data.*").where(F.col("ts").isNotNull() & F.col("region").isNotNull()) \
        .withWatermark("ts", WATERMARK)


def _out(df: DataFrame, kind: str, window: str, user: bool) -> DataFrame:
    return df.select(
        F.lit(kind).alias("kind"), "region",
        (F.col("user") if user else F.lit(None).cast("string")).alias("user"),
        F.unix_millis(F.col(f"{window}.start")).alias("window_start"),
        F.unix_millis(F.col(f"{window}.end")).alias("window_end"),
        F.col("count").alias("views"))


def windowed_counts(v: DataFrame) -> DataFrame:
    tumbling = v.groupBy(F.window("ts", TUMBLING).alias("w"), "region").count()
    hopping = v.groupBy(F.window("ts", *HOPPING).alias("w"), "region").count()
    session = v.groupBy(F.session_window("ts", SESSION_GAP).alias("w"), "region", "user").count()
    return (_out(tumbling, "tumbling", "w", False)
            .unionByName(_out(hopping, "hopping", "w", False))
            .unionByName(_out(session, "session", "w", True)))


def build(spark: SparkSession, bootstrap: str, input_topic: str, output_topic: str, checkpoint: str,
          *, trigger: Mapping[str, object] | None = None, dead_letter_topic: str | None = None,
          source_options: Mapping[str, str] | None = None) -> StreamingQuery:
    """Start the query; `trigger` is DataStreamWriter.trigger's keywords (default: as fast as it can)."""
    register(spark)
    counts = windowed_counts(views(spark, bootstrap, input_topic, dead_letter_topic=dead_letter_topic,
                                   source_options=source_options))
    out = counts.select(F.col("region").alias("key"),
                        F.to_json(F.struct("kind", "region", "user", "window_start", "window_end",
                                           "views")).alias("value"))
    writer = (out.writeStream.format("odradek").outputMode("append")
              .option("kafka.bootstrap.servers", bootstrap).option("topic", output_topic)
              .option("checkpointLocation", checkpoint).queryName(f"clickstream-{output_topic}"))
    if trigger:
        writer = writer.trigger(**trigger)
    return writer.start()
