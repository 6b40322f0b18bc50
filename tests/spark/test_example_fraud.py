"""The fraud example: the flagged orders equal a plain-Python join of the generated data."""

from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta
from pathlib import Path

from examples.fraud import generator, pipeline
from pyspark.sql import SparkSession

from tests.spark.records import read_records
from tests.spark.support import create_topic, topic_name
from tests.support.broker import BrokerProcess

BOUND = timedelta(minutes=10)


def expected_flags(orders: list[generator.Order], payments: list[generator.Payment]) -> Counter[tuple]:
    out: Counter[tuple] = Counter()
    for o in orders:
        matches = [p for p in payments if p.order_id == o.order_id and o.ts <= p.ts <= o.ts + BOUND]
        ms = int(o.ts.timestamp() * 1000)
        if not matches:
            out[(o.order_id, o.user, "no_payment", o.amount_cents, None, None, ms)] += 1
        for p in matches:
            if p.amount_cents != o.amount_cents:
                out[(o.order_id, o.user, "amount_mismatch", o.amount_cents, p.amount_cents,
                     p.payment_id, ms)] += 1
    return out


def test_fraud_flags(spark: SparkSession, spark_broker: BrokerProcess, tmp_path: Path) -> None:
    b = spark_broker.bootstrap
    orders_topic = create_topic(b, topic_name("orders"), 2)
    payments_topic = create_topic(b, topic_name("payments"), 2)
    dst = create_topic(b, topic_name("fraud-flags"), 1)
    orders, payments = generator.produce(b, orders_topic, payments_topic, orders=60, seed=3)
    query = pipeline.build(spark, b, orders_topic, payments_topic, dst, str(tmp_path / "cp"),
                           trigger={"availableNow": True},
                           source_options={"maxOffsetsPerTrigger": "25"})
    try:
        query.awaitTermination(300)
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    got: Counter[tuple] = Counter()
    for r in read_records(b, dst, 1):
        f = json.loads(r.value)
        assert r.key == f["order_id"].encode()
        got[(f["order_id"], f["user"], f["reason"], f["order_amount_cents"], f.get("paid_amount_cents"),
             f.get("payment_id"), f["order_ts"])] += 1
    want = expected_flags(orders, payments)
    reasons = Counter(k[2] for k in want)
    assert reasons["no_payment"] and reasons["amount_mismatch"]
    assert got == want
