"""Streaming reads: admission control (maxOffsetsPerTrigger), AvailableNow, restart from checkpoint."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from tests.spark.support import create_topic, produce, topic_name
from tests.support.broker import BrokerProcess


def _run_available_now(spark: SparkSession, bootstrap: str, topic: str, checkpoint: Path,
                       **options: str) -> list[list[tuple[int, int]]]:
    """One AvailableNow run; the (partition, offset) pairs of each micro-batch, in order."""
    batches: list[list[tuple[int, int]]] = []

    def collect(df: DataFrame, _batch_id: int) -> None:
        batches.append([(r.partition, r.offset) for r in df.select("partition", "offset").collect()])

    reader = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    for k, v in options.items():
        reader = reader.option(k, v)
    query = (reader.load().writeStream.foreachBatch(collect)
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    try:
        query.awaitTermination(240)
        assert query.exception() is None, query.exception()
        assert not query.isActive
    finally:
        query.stop()
    return batches


def test_max_offsets_per_trigger_and_available_now(spark: SparkSession, spark_broker: BrokerProcess,
                                                    tmp_path: Path) -> None:
    topic = create_topic(spark_broker.bootstrap, topic_name("stream"), 3)
    produced = produce(spark_broker.bootstrap, topic, 1000)
    batches = _run_available_now(spark, spark_broker.bootstrap, topic, tmp_path / "cp",
                                 maxOffsetsPerTrigger="150")
    sizes = [len(b) for b in batches if b]
    assert all(size <= 150 for size in sizes), sizes
    assert len(sizes) >= 7  # 1000 records, at most 150 each
    seen = [pos for b in batches for pos in b]
    assert len(seen) == len(set(seen)) == 1000
    assert set(seen) == {(r.partition, r.offset) for r in produced}

    # Restarted from its checkpoint, the query reads only what came since.
    more = produce(spark_broker.bootstrap, topic, 200, start=1000)
    batches = _run_available_now(spark, spark_broker.bootstrap, topic, tmp_path / "cp",
                                 maxOffsetsPerTrigger="150")
    seen = [pos for b in batches for pos in b]
    assert sorted(seen) == sorted((r.partition, r.offset) for r in more)
    assert all(len(b) <= 150 for b in batches)


def test_available_now_without_limit_reads_everything_once(spark: SparkSession, spark_broker: BrokerProcess,
                                                           tmp_path: Path) -> None:
    topic = create_topic(spark_broker.bootstrap, topic_name("stream-all"), 2)
    produced = produce(spark_broker.bootstrap, topic, 400, partitions=2)
    batches = _run_available_now(spark, spark_broker.bootstrap, topic, tmp_path / "cp", minPartitions="4")
    seen = [pos for b in batches for pos in b]
    assert sorted(seen) == sorted((r.partition, r.offset) for r in produced)


def test_continuous_trigger_picks_up_new_records(spark: SparkSession, spark_broker: BrokerProcess,
                                                 tmp_path: Path) -> None:
    topic = create_topic(spark_broker.bootstrap, topic_name("stream-live"), 2)
    first = produce(spark_broker.bootstrap, topic, 50, partitions=2)
    rows: list[tuple[int, int, bytes]] = []

    def collect(df: DataFrame, _batch_id: int) -> None:
        rows.extend((r.partition, r.offset, r.value) for r in df.collect())

    query = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", spark_broker.bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest").load()
             .writeStream.foreachBatch(collect).option("checkpointLocation", str(tmp_path / "cp"))
             .start())
    try:
        query.processAllAvailable()
        second = produce(spark_broker.bootstrap, topic, 70, partitions=2, start=50)
        query.processAllAvailable()
    finally:
        query.stop()
    assert sorted(rows) == sorted((r.partition, r.offset, r.value) for r in first + second)


def test_subscribe_pattern_discovers_new_topics_while_running(spark: SparkSession, spark_broker: BrokerProcess,
                                                              tmp_path: Path) -> None:
    prefix = topic_name("disc")
    old = create_topic(spark_broker.bootstrap, f"{prefix}-old", 1)
    first = produce(spark_broker.bootstrap, old, 10, partitions=1)
    rows: list[tuple[str, int, int]] = []

    def collect(df: DataFrame, _batch_id: int) -> None:
        rows.extend((r.topic, r.partition, r.offset) for r in df.collect())

    query = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", spark_broker.bootstrap)
             .option("subscribePattern", f"{prefix}-.*").option("startingOffsets", "earliest").load()
             .writeStream.foreachBatch(collect).option("checkpointLocation", str(tmp_path / "cp"))
             .start())
    try:
        query.processAllAvailable()
        new = create_topic(spark_broker.bootstrap, f"{prefix}-new", 2)
        # Records produced before the query sees the topic are read too: new partitions start
        # at their earliest offset.
        second = produce(spark_broker.bootstrap, new, 20, partitions=2)
        query.processAllAvailable()
    finally:
        query.stop()
    assert sorted(rows) == sorted((r.topic, r.partition, r.offset) for r in first + second)
