"""Option checking: a bad option fails when the query is defined or started, naming the option."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from odradek.spark.options import OptionError, parse_sink, parse_source
from odradek.spark.ranges import OffsetRange, split
from odradek.spark.source import cap
from tests.spark.support import create_topic, produce, topic_name
from tests.support.broker import BrokerProcess

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:1"}


@pytest.mark.parametrize(("options", "named"), [
    ({"subscribe": "a", "assign": '{"a":[0]}'}, "'assign', 'subscribe'"),
    ({}, "'subscribePattern'"),
    ({"subscribe": "a", "startingOffsets": "oldest"}, "'startingOffsets'"),
    ({"subscribe": "a", "startingOffsets": '{"a":{"0":-3}}'}, "'startingOffsets'"),
    ({"subscribe": "a", "endingOffsets": '{"a":{"0":-2}}'}, "'endingOffsets'"),
    ({"subscribe": "a", "endingOffsets": "earliest"}, "'endingOffsets'"),
    ({"subscribe": "a", "startingTimestamp": "yesterday"}, "'startingTimestamp'"),
    ({"subscribe": "a", "minPartitions": "0"}, "'minPartitions'"),
    ({"subscribe": "a", "failOnDataLoss": "maybe"}, "'failOnDataLoss'"),
    ({"subscribe": "a", "kafka.group.id": "g"}, "'kafka.group.id'"),
    ({"subscribe": "a", "kafka.auto.offset.reset": "earliest"}, "'kafka.auto.offset.reset'"),
    ({"subscribe": "a", "kafka.enable.auto.commit": "true"}, "'kafka.enable.auto.commit'"),
    ({"subscribe": "a", "kafka.interceptor.classes": "x"}, "'kafka.interceptor.classes'"),
    ({"subscribe": "a", "kafka.value.deserializer": "x"}, "'kafka.value.deserializer'"),
    ({"subscribePattern": "("}, "'subscribePattern'"),
    ({"assign": "[0]"}, "'assign'"),
])
def test_batch_source_options_are_refused(options: dict[str, str], named: str) -> None:
    with pytest.raises(OptionError, match=named):
        parse_source({**BOOT, **options}, streaming=False)


def test_missing_bootstrap_and_stream_only_options() -> None:
    with pytest.raises(OptionError, match=r"'kafka.bootstrap.servers'"):
        parse_source({"subscribe": "a"}, streaming=False)
    with pytest.raises(OptionError, match="'endingOffsets'"):
        parse_source({**BOOT, "subscribe": "a", "endingOffsets": "latest"}, streaming=True)
    with pytest.raises(OptionError, match="'maxOffsetsPerTrigger'"):
        parse_source({**BOOT, "subscribe": "a", "maxOffsetsPerTrigger": "10"}, streaming=False)
    with pytest.raises(OptionError, match="'maxOffsetsPerTrigger'"):
        parse_source({**BOOT, "subscribe": "a", "maxOffsetsPerTrigger": "ten"}, streaming=True)
    with pytest.raises(OptionError, match="'minOffsetsPerTrigger'"):
        parse_source({**BOOT, "subscribe": "a", "minOffsetsPerTrigger": "10"}, streaming=False)
    with pytest.raises(OptionError, match="'minOffsetsPerTrigger'"):
        parse_source({**BOOT, "subscribe": "a", "minOffsetsPerTrigger": "0"}, streaming=True)
    with pytest.raises(OptionError, match="'maxTriggerDelay'"):
        parse_source({**BOOT, "subscribe": "a", "maxTriggerDelay": "soon"}, streaming=True)
    with pytest.raises(OptionError, match="'maxTriggerDelay'"):
        parse_source({**BOOT, "subscribe": "a", "maxTriggerDelay": "5 fortnights"}, streaming=True)
    with pytest.raises(OptionError, match="'fetchPath'"):
        parse_source({**BOOT, "subscribe": "a", "fetchPath": "carrier-pigeon"}, streaming=False)


def test_min_offsets_and_trigger_delay_parse_like_spark() -> None:
    base = {**BOOT, "subscribe": "a"}
    opts = parse_source({**base, "minOffsetsPerTrigger": "500"}, streaming=True)
    assert opts.min_offsets_per_trigger == 500
    assert opts.max_trigger_delay_ms == 15 * 60 * 1000  # Spark's default: 15m
    for raw, ms in (("30s", 30_000), ("2m", 120_000), ("2min", 120_000), ("250ms", 250),
                    ("1500", 1500), ("1h", 3_600_000)):
        got = parse_source({**base, "minOffsetsPerTrigger": "1", "maxTriggerDelay": raw},
                           streaming=True)
        assert got.max_trigger_delay_ms == ms, raw


def test_good_options_parse_with_spark_defaults() -> None:
    opts = parse_source({**BOOT, "SUBSCRIBE": "a, b", "kafka.fetch.max.bytes": "1000"}, streaming=True)
    assert opts.subscription.topics == ("a", "b")
    assert opts.starting.kind == "latest"  # streaming default
    assert opts.client == {"bootstrap.servers": "127.0.0.1:1", "fetch.max.bytes": "1000"}
    assert opts.fail_on_data_loss and not opts.include_headers
    batch = parse_source({**BOOT, "assign": '{"a":[1,0]}'}, streaming=False)
    assert batch.starting.kind == "earliest" and batch.ending is not None and batch.ending.kind == "latest"
    assert batch.subscription.assigned == (("a", 0), ("a", 1))


def test_sink_options() -> None:
    with pytest.raises(OptionError, match="'deliveryGuarantee'"):
        parse_sink({**BOOT, "deliveryGuarantee": "sometimes"}, exactly_once_available=True)
    with pytest.raises(OptionError, match=r"'kafka.key.serializer'"):
        parse_sink({**BOOT, "kafka.key.serializer": "x"}, exactly_once_available=True)
    assert parse_sink({**BOOT, "topic": "t"}, exactly_once_available=False).delivery == "at-least-once"


def test_cap_shares_the_limit_by_backlog() -> None:
    begin = {("t", 0): 0, ("t", 1): 100, ("t", 2): 5}
    end = {("t", 0): 1000, ("t", 1): 100, ("t", 2): 15}
    capped = cap(begin, end, 101)
    assert sum(capped[tp] - begin[tp] for tp in begin) == 101
    assert all(begin[tp] <= capped[tp] <= end[tp] for tp in begin)
    assert cap(begin, end, 5000) == end
    one = cap({("t", 0): 0, ("t", 1): 0}, {("t", 0): 3, ("t", 1): 3}, 1)
    assert sum(one.values()) == 1


def test_split_covers_each_offset_once() -> None:
    ranges = [OffsetRange("t", 0, 0, 1000), OffsetRange("t", 1, 50, 60), OffsetRange("t", 2, 7, 7)]
    pieces = split(ranges, 10)
    assert len(pieces) > 2
    covered = sorted((r.partition, o) for r in pieces for o in range(r.start, r.end))
    assert covered == [(0, o) for o in range(1000)] + [(1, o) for o in range(50, 60)]
    assert split(ranges, None) == ranges[:2]  # empty ranges are dropped, nothing split


def test_bad_options_fail_at_load_in_spark(spark: SparkSession, spark_broker: BrokerProcess) -> None:
    reader = spark.read.format("odradek").option("kafka.bootstrap.servers", spark_broker.bootstrap)
    with pytest.raises(Exception, match=r"'assign'.*'subscribe'"):
        reader.option("subscribe", "x").option("assign", '{"x":[0]}').load()
    with pytest.raises(Exception, match="'startingOffsets'"):
        spark.read.format("odradek").option("kafka.bootstrap.servers", spark_broker.bootstrap) \
            .option("subscribe", "x").option("startingOffsets", "oldest").load()
    with pytest.raises(Exception, match=r"'kafka.group.id'"):
        spark.readStream.format("odradek").option("kafka.bootstrap.servers", spark_broker.bootstrap) \
            .option("subscribe", "x").option("kafka.group.id", "mine").load()


def test_bad_options_fail_at_query_start(spark: SparkSession, spark_broker: BrokerProcess,
                                         tmp_path: Path) -> None:
    topic = create_topic(spark_broker.bootstrap, topic_name("opt"), 1)
    produce(spark_broker.bootstrap, topic, 3, partitions=1)
    stream = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", spark_broker.bootstrap)
              .option("subscribe", topic).option("endingOffsets", "latest").load())
    with pytest.raises(Exception, match="'endingOffsets'"):
        query = stream.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "a")).start()
        try:
            query.awaitTermination(120)
        finally:
            query.stop()
    # The sink: no value column, and no topic anywhere.
    df = spark.createDataFrame([("k",)], "key string")
    with pytest.raises(Exception, match="'value'"):
        df.write.format("odradek").option("kafka.bootstrap.servers", spark_broker.bootstrap) \
            .option("topic", topic).mode("append").save()
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match="'topic'"):
        df.write.format("odradek").option("kafka.bootstrap.servers", spark_broker.bootstrap) \
            .mode("append").save()
