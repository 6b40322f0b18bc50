"""Fraud detection: a stream-stream join of orders (JSON) and payments (Avro, Confluent wire
format) within a time bound, flagged orders to a topic.

An order must be paid, for its amount, within PAYMENT_BOUND after it was placed. The query
left-outer-joins orders to payments on order_id and `order.ts <= payment.ts <= order.ts +
PAYMENT_BOUND`, with a watermark on each side so Spark can drop join state, and writes

    {"order_id", "user", "reason": "no_payment"|"amount_mismatch", "order_amount_cents",
     "paid_amount_cents", "payment_id", "order_ts": epoch ms}

keyed by order_id. An amount mismatch is flagged as soon as the payment is joined; an order
with no payment in time is flagged once the watermark passes its bound (the outer join's
null row), so a payment that comes later than the bound does not clear it.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from examples.fraud.schemas import ORDER_SCHEMA, payment_codec
from odradek.spark import register
from odradek.spark.avro import SchemaRegistry
from odradek.spark.deadletter import DeadLetter
from odradek.spark.serde import parse_avro, parse_json

PAYMENT_BOUND = "10 minutes"
WATERMARK = "5 minutes"


def _rows(spark: SparkSession, bootstrap: str, topic: str, options: Mapping[str, str] | None) -> DataFrame:
    return (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("startingOffsets", "earliest")
            .options(**dict(options or {})).load())


def flagged(orders: DataFrame, payments: DataFrame) -> DataFrame:
    o = orders.select(F.col("order_id"), "user", F.col("amount_cents").alias("order_amount_cents"),
                      F.col("ts").alias("order_ts")).withWatermark("order_ts", WATERMARK)
    p = payments.select(F.col("order_id").alias("paid_order_id"), "payment_id",
                        F.col("amount_cents").alias("paid_amount_cents"),
                        F.col("ts").alias("payment_ts")).withWatermark("payment_ts", WATERMARK)
    joined = o.join(p, F.expr(f"""order_id = paid_order_id AND payment_ts >= order_ts
                                  AND payment_ts <= order_ts + interval {PAYMENT_BOUND}"""), "leftOuter")
    reason = (F.when(F.col("payment_id").isNull(), F.lit("no_payment"))
              .when(F.col("paid_amount_cents") != F.col("order_amount_cents"), F.lit("amount_mismatch")))
    return joined.withColumn("reason", reason).where(F.col("reason").isNotNull()).select(
        "order_id", "user", "reason", "order_amount_cents", "paid_amount_cents", "payment_id",
        F.unix_millis("order_ts").alias("order_ts"))


def build(spark: SparkSession, bootstrap: str, orders_topic: str, payments_topic: str,
          output_topic: str, checkpoint: str, *, registry: SchemaRegistry | None = None,
          trigger: Mapping[str, object] | None = None, dead_letter_topic: str | None = None,
          source_options: Mapping[str, str] | None = None) -> StreamingQuery:
    register(spark)
    dead = DeadLetter(dead_letter_topic, bootstrap) if dead_letter_topic else None
    mode = "dead-letter" if dead else "fail"
    orders = parse_json(_rows(spark, bootstrap, orders_topic, source_options), ORDER_SCHEMA,
                        on_error=mode, dead_letter=dead).select("data.*")
    payments = parse_avro(_rows(spark, bootstrap, payments_topic, source_options),
                          payment_codec(registry), on_error=mode, dead_letter=dead).select("data.*")
    flags = flagged(orders.where(F.col("ts").isNotNull()), payments)
    out = flags.select(F.col("order_id").alias("key"), F.to_json(F.struct(*flags.columns)).alias("value"))
    writer = (out.writeStream.format("odradek").outputMode("append")
              .option("kafka.bootstrap.servers", bootstrap).option("topic", output_topic)
              .option("checkpointLocation", checkpoint).queryName(f"fraud-{output_topic}"))
    if trigger:
        writer = writer.trigger(**trigger)
    return writer.start()
