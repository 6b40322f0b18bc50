"""failOnDataLoss both ways after DeleteRecords removed records a query had not read yet."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from pyspark.sql import DataFrame, SparkSession

from tests.spark.support import create_topic, produce, topic_name
from tests.support.broker import BrokerProcess


def _delete_below(bootstrap: str, topic: str, offset: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.delete_records([TopicPartition(topic, 0, offset)]).values():
        assert fut.result(30).low_watermark == offset


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
        def collect(df: DataFrame, _batch_id: int) -> None:
            seen.extend(r.offset for r in df.select("offset").collect())

        query = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", spark_broker.bootstrap)
                 .option("subscribe", topic).option("startingOffsets", "earliest")
                 .option("failOnDataLoss", fail).load()
                 .writeStream.foreachBatch(collect).option("checkpointLocation", str(tmp_path / "cp"))
                 .trigger(availableNow=True).start())
        try:
            query.awaitTermination(240)
        except Exception as exc:  # the query's failure surfaces here
            return str(exc)
        finally:
            query.stop()
        return None

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
