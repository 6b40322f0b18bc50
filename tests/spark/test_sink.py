"""The sink: batch and streaming (at-least-once) writes, read back with a plain consumer."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from pyspark.sql import SparkSession

from tests.spark.support import create_topic, produce, read_all, topic_name
from tests.support.broker import BrokerProcess


def test_batch_write_with_topic_option(spark: SparkSession, spark_broker: BrokerProcess) -> None:
    topic = create_topic(spark_broker.bootstrap, topic_name("sink"), 3)
    data = [(f"k{i}".encode(), f"v{i}") for i in range(500)] + [(None, "no-key")]
    df = spark.createDataFrame(data, "key binary, value string").repartition(2)
    df.write.format("odradek").option("kafka.bootstrap.servers", spark_broker.bootstrap) \
        .option("topic", topic).mode("append").save()
    got = read_all(spark_broker.bootstrap, topic, 3)
    assert Counter(got) == Counter((k, v.encode()) for k, v in data)


def test_batch_write_with_topic_partition_and_headers_columns(spark: SparkSession,
                                                             spark_broker: BrokerProcess) -> None:
    a = create_topic(spark_broker.bootstrap, topic_name("sink-a"), 2)
    b = create_topic(spark_broker.bootstrap, topic_name("sink-b"), 2)
    rows = [(a if i % 2 else b, i % 2, f"k{i}", f"v{i}".encode(), [("n", str(i).encode())])
            for i in range(40)]
    df = spark.createDataFrame(
        rows, "topic string, partition int, key string, value binary, "
              "headers array<struct<key:string,value:binary>>")
    df.write.format("odradek").option("kafka.bootstrap.servers", spark_broker.bootstrap).mode("append").save()
    consumer = Consumer({"bootstrap.servers": spark_broker.bootstrap, "group.id": "sink-check",
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(t, p, 0) for t in (a, b) for p in (0, 1)])
    seen: list[tuple[str, int, bytes, bytes, list[tuple[str, bytes]]]] = []
    eof: set[tuple[str, int]] = set()
    while len(eof) < 4:
        for m in consumer.consume(100, 1.0):
            if m.error() is None:
                seen.append((m.topic(), m.partition(), m.key(), m.value(), m.headers()))
            else:
                eof.add((m.topic(), m.partition()))
    consumer.close()
    assert sorted(seen) == sorted((t, p, k.encode(), v, h) for t, p, k, v, h in rows)


def test_streaming_round_trip_at_least_once(spark: SparkSession, spark_broker: BrokerProcess,
                                            tmp_path: Path) -> None:
    src = create_topic(spark_broker.bootstrap, topic_name("pipe-in"), 3)
    dst = create_topic(spark_broker.bootstrap, topic_name("pipe-out"), 2)
    produced = produce(spark_broker.bootstrap, src, 900)
    query = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", spark_broker.bootstrap)
             .option("subscribe", src).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", "400").load()
             .selectExpr("key", "upper(cast(value as string)) as value")
             .writeStream.format("odradek").option("kafka.bootstrap.servers", spark_broker.bootstrap)
             .option("topic", dst).option("checkpointLocation", str(tmp_path / "cp"))
             .trigger(availableNow=True).start())
    try:
        query.awaitTermination(240)
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    got = read_all(spark_broker.bootstrap, dst, 2)
    assert Counter(got) == Counter((r.key, r.value.upper()) for r in produced)


def _read_full(bootstrap: str, topics: list[str], partitions: int
               ) -> list[tuple[str, int, bytes | None, bytes | None, list[tuple[str, bytes]] | None]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "sink-check-full",
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(t, p, 0) for t in topics for p in range(partitions)])
    seen = []
    eof: set[tuple[str, int]] = set()
    while len(eof) < len(topics) * partitions:
        for m in consumer.consume(500, 1.0):
            if m.error() is None:
                seen.append((m.topic(), m.partition(), m.key(), m.value(), m.headers()))
            else:
                eof.add((m.topic(), m.partition()))
    consumer.close()
    return seen


def test_batch_write_mixed_nulls_takes_each_row_as_given(spark: SparkSession,
                                                         spark_broker: BrokerProcess) -> None:
    """Rows where key, partition, headers and value are null or present in any mix (the general
    produce path) and a topic column instead of the option."""
    a = create_topic(spark_broker.bootstrap, topic_name("sink-mix-a"), 3)
    b = create_topic(spark_broker.bootstrap, topic_name("sink-mix-b"), 3)
    rows = []
    for i in range(3000):
        # Key and value are never both null, so (topic, key, value) is unique per row.
        heads = [("n", str(i).encode()), ("m", b"x")] if i % 3 == 0 else ([] if i % 3 == 1 else None)
        rows.append((a if i % 2 else b, i % 3 if i % 5 else None,
                     None if i % 4 == 0 else f"k{i}", None if i % 7 == 0 and i % 4 else f"v{i}", heads))
    df = spark.createDataFrame(
        rows, "topic string, partition int, key string, value string, "
              "headers array<struct<key:string,value:binary>>").repartition(3)
    df.write.format("odradek").option("kafka.bootstrap.servers", spark_broker.bootstrap) \
        .mode("append").save()
    got = _read_full(spark_broker.bootstrap, [a, b], 3)

    def enc(s: str | None) -> bytes | None:
        return None if s is None else s.encode()

    # (topic, key, value) names a row; a null partition lets the partitioner choose, so the
    # partition is compared only where the row gave one.
    got_by_row = {(t, k, v): (p, h) for t, p, k, v, h in got}
    assert len(got) == len(rows) == len(got_by_row)
    expected = []
    for t, p, k, v, h in rows:
        row = (t, enc(k), enc(v))
        expected.append((row, got_by_row[row][0] if p is None and row in got_by_row else p,
                         tuple(h) if h else None))
    assert Counter(expected) == Counter(((t, k, v), p, tuple(h) if h else None) for t, p, k, v, h in got)


def test_delivery_error_fails_the_write(spark: SparkSession, spark_broker: BrokerProcess) -> None:
    topic = create_topic(spark_broker.bootstrap, topic_name("sink-bad-part"), 2)
    df = spark.createDataFrame([(f"v{i}", 7) for i in range(10)], "value string, partition int")
    with pytest.raises(Exception, match="Unknown partition"):
        df.write.format("odradek").option("kafka.bootstrap.servers", spark_broker.bootstrap) \
            .option("topic", topic).mode("append").save()
