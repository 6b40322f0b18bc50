"""Parsing values in streaming queries: JSON and Confluent-wire Avro, with bad records sent to a
dead-letter topic, failing the query, or kept with an error column."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from odradek.spark.avro import AvroCodec, LocalRegistry, frame
from odradek.spark.deadletter import H_MESSAGE, H_OFFSET, H_PARTITION, H_TOPIC, DeadLetter
from odradek.spark.serde import parse_avro, parse_json, to_avro_value
from tests.spark.records import Record, read_records, send
from tests.spark.support import create_topic, topic_name
from tests.support.broker import BrokerProcess

SCHEMA = "id INT, name STRING, score DOUBLE"
AVRO = {"type": "record", "name": "Item", "fields": [
    {"name": "id", "type": "int"}, {"name": "name", "type": "string"},
    {"name": "score", "type": ["null", "double"], "default": None}]}


def _json_value(i: int) -> bytes:
    if i % 7 == 3:
        return b'{"id": ' + str(i).encode() + b', "name": '  # truncated
    if i % 11 == 5:
        return json.dumps({"id": "not-a-number", "name": f"n{i}"}).encode()
    if i % 13 == 6:
        return b""
    return json.dumps({"id": i, "name": f"n{i}", "score": i / 4}).encode()


def _json_good(i: int) -> bool:
    return not (i % 7 == 3 or i % 11 == 5 or i % 13 == 6)


def _source(spark: SparkSession, bootstrap: str, topic: str) -> DataFrame:
    return (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("startingOffsets", "earliest")
            .option("includeHeaders", "true").load())


def _to_topic(df: DataFrame, bootstrap: str, topic: str, checkpoint: Path) -> StreamingQuery:
    return (df.writeStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
            .option("topic", topic).option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True).start())


def _finish(query: StreamingQuery) -> None:
    try:
        query.awaitTermination(240)
        assert query.exception() is None, query.exception()
    finally:
        query.stop()


def _check_dead_letters(dead: list[Record], bad: list[Record]) -> None:
    assert sorted((r.key, r.value) for r in dead) == sorted((r.key, r.value) for r in bad)
    by_origin = {(r.header(H_TOPIC), r.header(H_PARTITION), r.header(H_OFFSET)): r for r in dead}
    for r in bad:
        got = by_origin[(r.topic.encode(), str(r.partition).encode(), str(r.offset).encode())]
        assert (got.key, got.value) == (r.key, r.value)
        assert got.header(H_MESSAGE)
        # The source's own headers travel with the dead letter.
        assert got.header("origin") == b"test"


def test_json_dead_letter_in_streaming_query(spark: SparkSession, spark_broker: BrokerProcess,
                                            tmp_path: Path) -> None:
    b = spark_broker.bootstrap
    src = create_topic(b, topic_name("serde-json-in"), 3)
    dst = create_topic(b, topic_name("serde-json-out"), 1)
    dlt = create_topic(b, topic_name("serde-json-dlt"), 1)
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": b})
    for i in range(80):
        producer.produce(src, _json_value(i), f"k{i}".encode(), partition=i % 3, headers=[("origin", b"test")])
    assert producer.flush(30) == 0
    stored = read_records(b, src, 3)
    parsed = parse_json(_source(spark, b, src), SCHEMA, on_error="dead-letter",
                        dead_letter=DeadLetter(dlt, b))
    out = parsed.select("key", F.to_json("data").alias("value"))
    _finish(_to_topic(out, b, dst, tmp_path / "cp"))

    good = [r for r in stored if _json_good(int(r.key[1:]))]
    bad = [r for r in stored if not _json_good(int(r.key[1:]))]
    assert bad and good
    got = read_records(b, dst, 1)
    assert sorted((r.key, json.loads(r.value)) for r in got) == sorted(
        (r.key, json.loads(r.value)) for r in good)
    _check_dead_letters(read_records(b, dlt, 1), bad)


def test_avro_dead_letter_in_streaming_query(spark: SparkSession, spark_broker: BrokerProcess,
                                            tmp_path: Path) -> None:
    b = spark_broker.bootstrap
    src = create_topic(b, topic_name("serde-avro-in"), 2)
    dst = create_topic(b, topic_name("serde-avro-out"), 1)
    dlt = create_topic(b, topic_name("serde-avro-dlt"), 1)
    codec = AvroCodec(LocalRegistry(), AVRO, subject=f"{src}-value")
    from confluent_kafka import Producer

    def value(i: int) -> bytes | None:
        if i % 9 == 4:
            return b"\x07garbage"  # wrong magic byte
        if i % 9 == 7:
            return frame(42, b"\x02")  # unknown schema id
        if i % 9 == 8:
            return codec.encode({"id": i, "name": "x" * 20, "score": None})[:-5]  # truncated
        return codec.encode({"id": i, "name": f"n{i}", "score": None if i % 2 else i * 1.5})

    producer = Producer({"bootstrap.servers": b})
    for i in range(60):
        producer.produce(src, value(i), f"k{i}".encode(), partition=i % 2, headers=[("origin", b"test")])
    assert producer.flush(30) == 0
    stored = read_records(b, src, 2)
    parsed = parse_avro(_source(spark, b, src), codec, on_error="dead-letter", dead_letter=DeadLetter(dlt, b))
    out = parsed.select("key", F.to_json("data").alias("value"))
    _finish(_to_topic(out, b, dst, tmp_path / "cp"))

    def ok(r: Record) -> bool:
        return int(r.key[1:]) % 9 not in (4, 7, 8)

    got = read_records(b, dst, 1)
    expected = []
    for r in stored:
        if ok(r):
            rec = codec.decode(r.value)
            expected.append((r.key, {k: v for k, v in rec.items() if v is not None}))
    assert sorted((r.key, json.loads(r.value)) for r in got) == sorted(expected)
    _check_dead_letters(read_records(b, dlt, 1), [r for r in stored if not ok(r)])


@pytest.mark.parametrize("fmt", ["json", "avro"])
def test_fail_mode_fails_the_query_naming_the_record(spark: SparkSession, spark_broker: BrokerProcess,
                                                     tmp_path: Path, fmt: str) -> None:
    b = spark_broker.bootstrap
    src = create_topic(b, topic_name(f"serde-fail-{fmt}"), 1)
    dst = create_topic(b, topic_name(f"serde-fail-{fmt}-out"), 1)
    codec = AvroCodec(LocalRegistry(), AVRO)
    good = (json.dumps({"id": 1, "name": "a"}).encode() if fmt == "json"
            else codec.encode({"id": 1, "name": "a", "score": None}))
    stored = send(b, src, [(b"a", good, 0), (b"b", good, 0), (b"c", b"\x00\x00{oops", 0), (b"d", good, 0)])
    bad = stored[2]
    rows = _source(spark, b, src)
    parsed = parse_json(rows, SCHEMA) if fmt == "json" else parse_avro(rows, codec)
    query = _to_topic(parsed.select("key", F.to_json("data").alias("value")), b, dst, tmp_path / "cp")
    try:
        with pytest.raises(StreamingQueryException) as failed:
            query.awaitTermination(240)
    finally:
        query.stop()
    assert f"unparsable record at topic {src} partition 0 offset {bad.offset}" in str(failed.value)
    assert read_records(b, dst, 1) == [] or fmt == "json"


def test_error_column_mode_and_avro_encoding_in_batch(spark: SparkSession, spark_broker: BrokerProcess) -> None:
    b = spark_broker.bootstrap
    topic = create_topic(b, topic_name("serde-batch"), 1)
    codec = AvroCodec(LocalRegistry(), AVRO, subject=f"{topic}-value")
    rows = spark.createDataFrame([(i, f"n{i}", i / 2) for i in range(10)], "id int, name string, score double")
    encoded = to_avro_value(rows.select(F.struct("id", "name", "score").alias("data")), codec)
    encoded.write.format("odradek").option("kafka.bootstrap.servers", b).option("topic", topic) \
        .mode("append").save()
    send(b, topic, [(None, b"junk", 0)])
    read = (spark.read.format("odradek").option("kafka.bootstrap.servers", b)
            .option("subscribe", topic).load())
    result = parse_avro(read, codec, on_error="column").select("offset", "data", "error").collect()
    assert len(result) == 11
    good = [r.data for r in result if r.error is None]
    assert sorted((d.id, d.name, d.score) for d in good) == [(i, f"n{i}", i / 2) for i in range(10)]
    [bad] = [r for r in result if r.error is not None]
    assert bad.offset == 10 and bad.data is None and "shorter than the 5-byte" in bad.error
    js = spark.createDataFrame([(b'{"id": 1}',), (b"{",), (None,)], "value binary")
    out = parse_json(js, SCHEMA, on_error="column").collect()
    assert [(r.data.id if r.data else None, r.error is not None) for r in out] == [
        (1, False), (None, True), (None, False)]
