"""Batch reads: exact rows, metadata and offset selection, checked against what was produced."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from pyspark.sql import DataFrame, SparkSession

from tests.spark.support import Produced, create_topic, produce, topic_name
from tests.support.broker import BrokerProcess


def _read(spark: SparkSession, bootstrap: str, **options: str) -> DataFrame:
    reader = spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _tuples(df: DataFrame) -> list[tuple[object, ...]]:
    return sorted((r.partition, r.offset, r.key, r.value) for r in df.collect())


def _expected(records: list[Produced]) -> list[tuple[object, ...]]:
    return sorted((r.partition, r.offset, r.key, r.value) for r in records)


def test_batch_read_returns_exactly_the_produced_rows(spark: SparkSession, spark_broker: BrokerProcess) -> None:
    topic = create_topic(spark_broker.bootstrap, topic_name("batch"), 3)
    produced = produce(spark_broker.bootstrap, topic, 600, headers=True)
    df = _read(spark, spark_broker.bootstrap, subscribe=topic, includeHeaders="true")
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int,headers:array<struct<key:string,value:binary>>>")
    rows = df.collect()
    assert len(rows) == 600
    by_pos = {(r.partition, r.offset): r for r in rows}
    for rec in produced:
        row = by_pos[(rec.partition, rec.offset)]
        assert (row.key, row.value, row.topic) == (rec.key, rec.value, topic)
        assert row.timestamp.replace(tzinfo=UTC) == datetime.fromtimestamp(rec.timestamp_ms / 1000, UTC)
        assert row.timestampType == 0  # CreateTime
        assert [(h.key, h.value) for h in row.headers] == list(rec.headers)
    # Offsets are contiguous per partition and start at 0.
    for p in range(3):
        offs = sorted(r.offset for r in rows if r.partition == p)
        assert offs == list(range(len(offs)))


def test_without_headers_the_schema_has_seven_columns(spark: SparkSession, spark_broker: BrokerProcess) -> None:
    topic = create_topic(spark_broker.bootstrap, topic_name("nohdr"), 1)
    produce(spark_broker.bootstrap, topic, 5, partitions=1)
    df = _read(spark, spark_broker.bootstrap, subscribe=topic)
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    assert df.count() == 5


def test_starting_and_ending_offsets_select_exact_ranges(spark: SparkSession, spark_broker: BrokerProcess) -> None:
    topic = create_topic(spark_broker.bootstrap, topic_name("range"), 3)
    produced = produce(spark_broker.bootstrap, topic, 300)  # 100 per partition
    starting = {topic: {"0": 10, "1": -2, "2": 99}}
    ending = {topic: {"0": 20, "1": 5, "2": -1}}
    df = _read(spark, spark_broker.bootstrap, subscribe=topic,
               startingOffsets=json.dumps(starting), endingOffsets=json.dumps(ending))
    want = [r for r in produced if (r.partition == 0 and 10 <= r.offset < 20)
            or (r.partition == 1 and r.offset < 5) or (r.partition == 2 and r.offset >= 99)]
    assert _tuples(df) == _expected(want)
    assert len(want) == 16


def test_assign_and_subscribe_pattern(spark: SparkSession, spark_broker: BrokerProcess) -> None:
    prefix = topic_name("pat")
    a = create_topic(spark_broker.bootstrap, f"{prefix}-a", 2)
    b = create_topic(spark_broker.bootstrap, f"{prefix}-b", 2)
    pa_ = produce(spark_broker.bootstrap, a, 20, partitions=2)
    pb = produce(spark_broker.bootstrap, b, 30, partitions=2)
    df = _read(spark, spark_broker.bootstrap, subscribePattern=f"{prefix}-.*")
    assert sorted((r.topic, r.partition, r.offset) for r in df.collect()) == sorted(
        (r.topic, r.partition, r.offset) for r in pa_ + pb)
    df = _read(spark, spark_broker.bootstrap, assign=json.dumps({b: [1]}))
    assert _tuples(df) == _expected([r for r in pb if r.partition == 1])


def test_timestamps_select_exact_ranges(spark: SparkSession, spark_broker: BrokerProcess) -> None:
    topic = create_topic(spark_broker.bootstrap, topic_name("ts"), 3)
    base = 1_700_000_000_000
    produced = produce(spark_broker.bootstrap, topic, 300, base_ts=base)  # record i at base+10i
    # From record 150 on (ts >= base + 1500), every partition.
    df = _read(spark, spark_broker.bootstrap, subscribe=topic, startingTimestamp=str(base + 1495))
    assert _tuples(df) == _expected([r for r in produced if r.timestamp_ms >= base + 1495])
    # Per partition: p0 from record 30, p1 from record 31 (ts 310), p2 from record 299; end before ts 2000.
    by_ts = {topic: {"0": base + 300, "1": base + 301, "2": base + 2990}}
    df = _read(spark, spark_broker.bootstrap, subscribe=topic,
               startingOffsetsByTimestamp=json.dumps(by_ts), endingTimestamp=str(base + 2000))
    def wanted(r: Produced) -> bool:
        lower = {0: base + 300, 1: base + 301, 2: base + 2990}[r.partition]
        return lower <= r.timestamp_ms < base + 2000
    expected = [r for r in produced if wanted(r)]
    assert _tuples(df) == _expected(expected)
    # p0: records 30..198 (57), p1: 31..199 (57), p2 starts past the end time (none).
    assert len(expected) == 114


def test_min_partitions_splits_and_returns_each_record_once(spark: SparkSession, spark_broker: BrokerProcess) -> None:
    topic = create_topic(spark_broker.bootstrap, topic_name("split"), 2)
    produced = produce(spark_broker.bootstrap, topic, 1000, partitions=2)
    df = _read(spark, spark_broker.bootstrap, subscribe=topic, minPartitions="8")
    assert df.rdd.getNumPartitions() == 8
    assert _tuples(df) == _expected(produced)
    assert df.groupBy("partition", "offset").count().where("count > 1").count() == 0
