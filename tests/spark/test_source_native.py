"""The native fetch path (our Fetch client, batches decoded into Arrow) against
confluent-kafka's path and a plain consumer: transactions, compression, every column."""

from __future__ import annotations

from collections import Counter

from confluent_kafka import Producer
from pyspark.sql import SparkSession

from tests.spark.support import create_topic, read_all, topic_name
from tests.support.broker import BrokerProcess

COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers")


def _rows(spark: SparkSession, boot: str, topic: str, path: str, **options: str) -> list[tuple]:
    reader = (spark.read.format("odradek").option("kafka.bootstrap.servers", boot)
              .option("subscribe", topic).option("includeHeaders", "true").option("fetchPath", path))
    for k, v in options.items():
        reader = reader.option(k, v)
    out = [tuple(r[c] if c != "headers" else tuple((h.key, h.value) for h in (r[c] or ()))
                 for c in COLUMNS) for r in reader.load().collect()]
    return sorted(out, key=lambda r: (r[3], r[4]))


def test_transactions_read_committed_and_uncommitted(spark: SparkSession,
                                                     spark_broker: BrokerProcess) -> None:
    boot = spark_broker.bootstrap
    topic = create_topic(boot, topic_name("native-txn"), 2)
    plain = Producer({"bootstrap.servers": boot, "linger.ms": 2})
    txn = Producer({"bootstrap.servers": boot, "transactional.id": f"{topic}-tx", "linger.ms": 2})
    txn.init_transactions(30)
    n = 0
    for round_ in range(6):
        txn.begin_transaction()
        for i in range(40):
            txn.produce(topic, f"t{round_}-{i}".encode(), key=f"k{i}".encode(), partition=i % 2,
                        headers=[("round", str(round_).encode())])
            if i % 4 == 0:
                plain.produce(topic, f"p{n}".encode(), partition=n % 2)
                n += 1
        plain.flush(30)
        # Flushed first: librdkafka would purge unsent records on abort instead of writing them.
        assert txn.flush(30) == 0
        # Rounds 1 and 4 abort: their records stay in the log, under an abort marker.
        if round_ in (1, 4):
            txn.abort_transaction(30)
        else:
            txn.commit_transaction(30)
    assert plain.flush(30) == 0

    committed = _rows(spark, boot, topic, "native")
    assert Counter((r[0], r[1]) for r in committed) == Counter(read_all(boot, topic, 2, committed=True))
    values = [r[1] for r in committed]
    assert not any(v.startswith((b"t1-", b"t4-")) for v in values)
    assert sum(v.startswith(b"t") for v in values) == 4 * 40
    assert committed == _rows(spark, boot, topic, "librdkafka")

    everything = _rows(spark, boot, topic, "native", **{"kafka.isolation.level": "read_uncommitted"})
    assert Counter((r[0], r[1]) for r in everything) == Counter(read_all(boot, topic, 2, committed=False))
    assert sum(r[1].startswith(b"t") for r in everything) == 6 * 40
    assert everything == _rows(spark, boot, topic, "librdkafka",
                               **{"kafka.isolation.level": "read_uncommitted"})


def test_every_compression_codec_and_offset_ranges(spark: SparkSession,
                                                   spark_broker: BrokerProcess) -> None:
    boot = spark_broker.bootstrap
    topic = create_topic(boot, topic_name("native-codec"), 2)
    sent = []
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        p = Producer({"bootstrap.servers": boot, "compression.type": codec, "linger.ms": 5})
        for i in range(300):
            value = f"{codec}-{i}-".encode() * (1 + i % 7)
            key = None if i % 3 == 0 else f"key-{i % 11}".encode()
            p.produce(topic, value, key=key, partition=i % 2, timestamp=1_700_000_000_000 + i)
            sent.append((key, value))
        assert p.flush(30) == 0
    native = _rows(spark, boot, topic, "native")
    assert Counter((r[0], r[1]) for r in native) == Counter(sent)
    assert native == _rows(spark, boot, topic, "librdkafka")
    # Offset ranges that start and end inside compressed batches, split across tasks.
    ranges = {"startingOffsets": f'{{"{topic}":{{"0":101,"1":7}}}}',
              "endingOffsets": f'{{"{topic}":{{"0":640,"1":-1}}}}', "minPartitions": "7"}
    part = _rows(spark, boot, topic, "native", **ranges)
    assert [(r[3], r[4]) for r in part] == [(r[3], r[4]) for r in native
                                            if (r[3] == 0 and 101 <= r[4] < 640) or
                                            (r[3] == 1 and r[4] >= 7)]
    assert part == _rows(spark, boot, topic, "librdkafka", **ranges)
