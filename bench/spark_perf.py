"""PySpark source and sink throughput on local[2] (issue 7).

    python -m bench.spark_perf [--num-records 1000000] [--record-size 100] [--sink-records 300000]

A fresh node (tests/support/broker.py), N records of S bytes over 6 partitions produced with
confluent-kafka, then on one local[2] SparkSession:

- source -> no-op: `spark.read.format("odradek")...write.format("noop")`, rows/s over the
  whole job (planning, 6 tasks on 2 cores, Arrow batches to the JVM). One warm-up run first so
  Python workers are started; the best and the median of the timed runs are reported.
- source -> odradek sink, streaming AvailableNow (one micro-batch), at-least-once and
  exactly-once (one transaction per Spark partition), rows/s from start to termination.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from tests.support.broker import BrokerProcess

from odradek.spark import session

PARTITIONS = 6


def create(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(30)


def fill(bootstrap: str, topic: str, n: int, size: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 10000,
                  "queue.buffering.max.messages": 1_000_000})
    payload = b"x" * size
    for i in range(n):
        while True:
            try:
                p.produce(topic, payload, partition=i % PARTITIONS)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--num-records", type=int, default=1_000_000)
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--sink-records", type=int, default=300_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="spark-perf-"))
    node = BrokerProcess(work / "data")
    node.start()
    try:
        boot = node.bootstrap
        create(boot, "src")
        fill(boot, "src", args.num_records, args.record_size)
        spark = session("local[2]", "odradek-spark-perf", {
            "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
            "spark.driver.memory": "2g"})
        spark.sparkContext.setLogLevel("ERROR")

        def source_to_noop() -> float:
            began = time.perf_counter()
            (spark.read.format("odradek").option("kafka.bootstrap.servers", boot)
             .option("subscribe", "src").load()
             .write.format("noop").mode("overwrite").save())
            return time.perf_counter() - began

        source_to_noop()  # warm-up: JVM JIT, Python workers
        times = [source_to_noop() for _ in range(args.runs)]
        n = args.num_records
        print(f"source -> noop: {n} rows of {args.record_size} B, {PARTITIONS} partitions, local[2]: "
              f"best {n / min(times):,.0f} rows/s ({min(times):.2f} s), "
              f"median {n / statistics.median(times):,.0f} rows/s")

        m = min(args.sink_records, n)
        create(boot, "sink-src")
        fill(boot, "sink-src", m, args.record_size)
        # Alternating runs; the first one also warms up the streaming planner process.
        for i, delivery in enumerate(("at-least-once", "exactly-once") * 2):
            dst = f"dst-{i}"
            create(boot, dst)
            began = time.perf_counter()
            q = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", boot)
                 .option("subscribe", "sink-src").option("startingOffsets", "earliest").load()
                 .select("key", "value")
                 .writeStream.format("odradek").option("kafka.bootstrap.servers", boot)
                 .option("topic", dst).option("deliveryGuarantee", delivery)
                 .option("checkpointLocation", str(work / f"cp-{i}"))
                 .trigger(availableNow=True).start())
            q.awaitTermination()
            took = time.perf_counter() - began
            rows = sum(p["numInputRows"] for p in q.recentProgress)
            print(f"run {i + 1}: source -> odradek sink ({delivery}), AvailableNow: {rows} rows in "
                  f"{took:.2f} s = {rows / took:,.0f} rows/s")
        spark.stop()
    finally:
        node.stop()


if __name__ == "__main__":
    main()
