"""minOffsetsPerTrigger with maxTriggerDelay (Spark's Kafka semantics): a trigger is skipped
until enough new offsets are there or the delay has passed; maxOffsetsPerTrigger still caps."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from tests.spark.support import create_topic, produce, topic_name
from tests.support.broker import BrokerProcess

NO_DATA_PROGRESS_INTERVAL = "spark.sql.streaming.noDataProgressEventInterval"


@contextmanager
def _query(spark: SparkSession, bootstrap: str, topic: str, checkpoint: Path,
           batches: list[list[tuple[int, int]]], **options: str) -> Iterator[StreamingQuery]:
    def collect(df: DataFrame, _batch_id: int) -> None:
        rows = [(r.partition, r.offset) for r in df.select("partition", "offset").collect()]
        if rows:
            batches.append(rows)

    reader = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    for k, v in options.items():
        reader = reader.option(k, v)
    # a progress event for every trigger, those that run no batch included (Spark's default
    # reports an idle query every 10 s): _idle_triggers counts them. Read at the query's start.
    spark.conf.set(NO_DATA_PROGRESS_INTERVAL, "0")
    try:
        query = (reader.load().writeStream.foreachBatch(collect)
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(processingTime="200 milliseconds").start())
    finally:
        spark.conf.unset(NO_DATA_PROGRESS_INTERVAL)
    try:
        yield query
        assert query.exception() is None, query.exception()
    finally:
        query.stop()


def _wait(cond: Callable[[], bool], query: StreamingQuery, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert query.exception() is None, query.exception()
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.2)


def _timestamp(progress: Any) -> str:
    return progress["timestamp"] if isinstance(progress, dict) else progress.timestamp


def _idle_triggers(query: StreamingQuery, count: int) -> None:
    """Until the query has run `count` more triggers (each one asks the source for offsets):
    one progress event each (ISO timestamps of one format: they order as strings)."""
    last = query.lastProgress
    since = _timestamp(last) if last is not None else ""
    _wait(lambda: sum(_timestamp(p) > since for p in query.recentProgress) >= count, query,
          f"{count} more triggers")


def test_batches_wait_for_min_offsets_then_max_caps(spark: SparkSession, spark_broker: BrokerProcess,
                                                    tmp_path: Path) -> None:
    boot = spark_broker.bootstrap
    topic = create_topic(boot, topic_name("admit-min"), 2)
    first = produce(boot, topic, 50, 2)
    batches: list[list[tuple[int, int]]] = []
    with _query(spark, boot, topic, tmp_path / "cp", batches, minOffsetsPerTrigger="100",
                maxOffsetsPerTrigger="60", maxTriggerDelay="1h") as q:
        # The first trigger runs at once, as in Spark (no batch before it to wait from).
        _wait(lambda: len(batches) == 1, q, "the first batch")
        assert sorted(batches[0]) == [(r.partition, r.offset) for r in first]
        # 80 new offsets < 100: however many triggers pass, no batch runs.
        second = produce(boot, topic, 80, 2, start=50)
        _idle_triggers(q, 15)
        assert len(batches) == 1
        # 130 new >= 100: one batch, capped at 60; the 70 left are < 100 again and wait.
        third = produce(boot, topic, 50, 2, start=130)
        _wait(lambda: len(batches) == 2, q, "the batch after the minimum was reached")
        _idle_triggers(q, 15)
        assert [len(b) for b in batches] == [50, 60]
        # 70 + 40 = 110 >= 100: another capped batch of 60, then 50 wait.
        fourth = produce(boot, topic, 40, 2, start=180)
        _wait(lambda: len(batches) == 3, q, "the third batch")
        _idle_triggers(q, 10)
        assert [len(b) for b in batches] == [50, 60, 60]
    seen = [pos for b in batches for pos in b]
    assert len(seen) == len(set(seen))
    everything = {(r.partition, r.offset) for r in first + second + third + fourth}
    assert set(seen) < everything and len(everything - set(seen)) == 50


def test_max_trigger_delay_admits_a_smaller_batch(spark: SparkSession, spark_broker: BrokerProcess,
                                                  tmp_path: Path) -> None:
    boot = spark_broker.bootstrap
    topic = create_topic(boot, topic_name("admit-delay"), 2)
    first = produce(boot, topic, 20, 2)
    batches: list[list[tuple[int, int]]] = []
    with _query(spark, boot, topic, tmp_path / "cp", batches, minOffsetsPerTrigger="1000",
                maxTriggerDelay="3s") as q:
        _wait(lambda: len(batches) == 1, q, "the first batch")
        # Far below the minimum: only the delay lets these through, as one smaller batch.
        second = produce(boot, topic, 30, 2, start=20)
        _wait(lambda: len(batches) == 2, q, "the batch admitted by maxTriggerDelay")
    assert sorted(batches[0]) == [(r.partition, r.offset) for r in first]
    assert sorted(batches[1]) == [(r.partition, r.offset) for r in second]


def test_available_now_ignores_the_minimum_and_ends(spark: SparkSession, spark_broker: BrokerProcess,
                                                    tmp_path: Path) -> None:
    boot = spark_broker.bootstrap
    topic = create_topic(boot, topic_name("admit-now"), 3)
    produced = produce(boot, topic, 250, 3)
    batches: list[list[tuple[int, int]]] = []

    def collect(df: DataFrame, _batch_id: int) -> None:
        batches.append([(r.partition, r.offset) for r in df.select("partition", "offset").collect()])

    query = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", boot)
             .option("subscribe", topic).option("startingOffsets", "earliest")
             .option("minOffsetsPerTrigger", "100000").option("maxOffsetsPerTrigger", "100")
             .load().writeStream.foreachBatch(collect)
             .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())
    try:
        query.awaitTermination(240)
        assert query.exception() is None, query.exception()
        assert not query.isActive
    finally:
        query.stop()
    sizes = [len(b) for b in batches if b]
    assert sizes and all(s <= 100 for s in sizes), sizes
    seen = [pos for b in batches for pos in b]
    assert sorted(seen) == [(r.partition, r.offset) for r in produced]
