"""failOnDataLoss both ways after DeleteRecords or time retention removed records a query had
not read yet."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from pyspark.sql import DataFrame, SparkSession

from tests.spark.support import create_topic, produce, topic_name
from tests.support.broker import BrokerProcess


def _delete_below(bootstrap: str, topic: str, offset: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.delete_records([TopicPartition(topic, 0, offset)]).values():
        assert fut.result(30).low_watermark == offset


def run_available_now(spark: SparkSession, bootstrap: str, topic: str, checkpoint: Path, fail: str,
                      seen: list[int]) -> str | None:
    """One AvailableNow run from the checkpoint, offsets read appended to `seen`; the query's
    failure message, or None."""
    def collect(df: DataFrame, _batch_id: int) -> None:
        seen.extend(r.offset for r in df.select("offset").collect())

    query = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest")
             .option("failOnDataLoss", fail).load()
             .writeStream.foreachBatch(collect).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    try:
        query.awaitTermination(240)
    except Exception as exc:  # the query's failure surfaces here
        return str(exc)
    finally:
        query.stop()
    return None


def test_batch_read_below_the_log_start(spark: SparkSession, spark_broker: BrokerProcess) -> None:
    topic = create_topic(spark_broker.bootstrap, topic_name("loss"), 1)
    produce(spark_broker.bootstrap, topic, 100, partitions=1)
    _delete_below(spark_broker.bootstrap, topic, 60)

    def read(fail: str) -> DataFrame:
        return (spark.read.format("odradek").option("kafka.bootstrap.servers", spark_broker.bootstrap)
                .option("subscribe", topic).option("startingOffsets", json.dumps({topic: {"0": 10}}))
                .option("failOnDataLoss", fail).load())

    with pytest.raises(Exception, match=r"data loss.*failOnDataLoss"):
        read("true").collect()
    assert sorted(r.offset for r in read("false").collect()) == list(range(60, 100))


def test_streaming_restart_after_unread_records_were_deleted(spark: SparkSession, spark_broker: BrokerProcess,
                                                             tmp_path: Path) -> None:
    topic = create_topic(spark_broker.bootstrap, topic_name("loss-stream"), 1)
    produce(spark_broker.bootstrap, topic, 50, partitions=1)
    seen: list[int] = []

    def run(fail: str) -> str | None:
        return run_available_now(spark, spark_broker.bootstrap, topic, tmp_path / "cp", fail, seen)

    assert run("true") is None
    assert sorted(seen) == list(range(50))
    # 50 more arrive, then everything below 80 is deleted before the query reads again.
    produce(spark_broker.bootstrap, topic, 50, partitions=1, start=50)
    _delete_below(spark_broker.bootstrap, topic, 80)
    seen.clear()
    error = run("true")
    assert error is not None and "data loss" in error and "offset 50" in error
    assert seen == []
    assert run("false") is None
    assert sorted(seen) == list(range(80, 100))


def test_streaming_restart_after_retention_deleted_unread_records(spark: SparkSession, spark_broker: BrokerProcess,
                                                                  tmp_path: Path) -> None:
    """Time retention (not DeleteRecords) removes records the query has not read yet."""
    bootstrap = spark_broker.bootstrap
    topic = topic_name("loss-retention")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    # small segments, so the unread records sit in closed (deletable) segments
    new = NewTopic(topic, 1, 1, config={"segment.bytes": "600"})
    for fut in admin.create_topics([new]).values():
        fut.result(30)
    produce(bootstrap, topic, 20, partitions=1)
    seen: list[int] = []

    def run(fail: str) -> str | None:
        return run_available_now(spark, spark_broker.bootstrap, topic, tmp_path / "cp", fail, seen)

    assert run("true") is None
    assert sorted(seen) == list(range(20))
    # 60 more in separate batches (many closed segments), then retention of one day: the
    # records carry 2023 timestamps, so every closed segment goes
    for start in range(20, 80, 10):
        produce(bootstrap, topic, 10, partitions=1, start=start)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET)])
    for fut in admin.incremental_alter_configs([resource]).values():
        fut.result(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "loss-retention-check"})
    deadline = time.monotonic() + 120
    log_start = 0
    while log_start <= 20 and time.monotonic() < deadline:
        log_start = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[0]
        time.sleep(0.5)
    consumer.close()
    # Kafka's time retention rolls and deletes an expired active segment too
    assert 20 < log_start <= 80, f"retention left the log start at {log_start}"
    # five fresh records that retention keeps
    produce(bootstrap, topic, 5, partitions=1, start=80, base_ts=int(time.time() * 1000) - 800)
    seen.clear()
    error = run("true")
    assert error is not None and "data loss" in error and "offset 20" in error
    assert seen == []
    assert run("false") is None
    assert sorted(seen) == list(range(log_start, 85))
