"""PySpark source and sink throughput on local[2] (issue 7).

    python -m bench.spark_perf [--num-records 1000000] [--record-size 100] [--runs 3]
                               [--only noop,agg,sink] [--paths native,librdkafka]
                               [--sink-records 300000] [--sink-modes at-least-once,exactly-once,noop]

A fresh node (tests/support/broker.py), topics filled with confluent-kafka, one local[2]
SparkSession. Every figure comes with the load average and the CPU seconds the whole
process tree spent per million rows (JVM, Python workers, node, this driver): the machine
is shared, so wall-clock rows/s move with the load while CPU seconds mostly do not.

- noop: `spark.read.format("odradek")...write.format("noop")` over 2 and 6 partitions, per
  fetch path (native: our Fetch client decoding batches into Arrow; librdkafka:
  confluent-kafka), after one warm-up run; best and median of the timed runs.
- agg: streaming AvailableNow, 1-minute tumbling count by key with a watermark, results
  to an odradek topic.
- sink: streaming AvailableNow source -> odradek sink, at-least-once vs exactly-once, and the
  same query into Spark's no-op sink (`--sink-modes`), alternating, `--sink-runs` rounds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import DataFrameReader
from tests.support.broker import BrokerProcess

from bench import cpu
from odradek.spark import session

PARTITIONS = 6


def create(bootstrap: str, name: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def fill(bootstrap: str, topic: str, n: int, size: int, partitions: int = PARTITIONS,
         keys: int = 0, span_ms: int = 0) -> None:
    """n records of `size` bytes round-robin over partitions; with `keys`, keyed k0..k{keys-1}
    and timestamps spread evenly over `span_ms` ending now."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 10000,
                  "queue.buffering.max.messages": 1_000_000})
    payload = b"x" * size
    now = int(time.time() * 1000)
    for i in range(n):
        kw: dict[str, object] = {}
        if keys:
            kw = {"key": f"k{i % keys}".encode(), "timestamp": now - span_ms + (i * span_ms) // n}
        while True:
            try:
                p.produce(topic, payload, partition=i % partitions, **kw)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0


def tree_cpu(broker_pid: int) -> dict[str, float]:
    """CPU seconds (user+sys, plus reaped children) of this process tree by role; the node's
    own children are the node's (not walked: its cutime holds the reaped ones)."""
    out = {"jvm": 0.0, "pyworkers": 0.0, "node": 0.0, "driver": 0.0}
    for pid in cpu.walk([os.getpid()], into=lambda pid: pid != broker_pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        if pid == broker_pid:
            role = "node"
        elif name == "java":
            role = "jvm"
        elif pid == os.getpid():
            role = "driver"
        else:
            role = "pyworkers" if b"pyspark" in cmd else "driver"
        out[role] += cpu.proc_cpu(pid)
    return out


def measure(fn: Callable[[], int], broker_pid: int) -> tuple[int, float, dict[str, float], float]:
    """(rows, seconds, cpu seconds by role, 1-min load average at the end)."""
    before = tree_cpu(broker_pid)
    began = time.perf_counter()
    rows = fn()
    took = time.perf_counter() - began
    after = tree_cpu(broker_pid)
    return rows, took, {k: after[k] - before[k] for k in after}, os.getloadavg()[0]


def describe(rows: int, took: float, cpu: dict[str, float], load: float) -> str:
    per_m = 1e6 / max(rows, 1)
    parts = ", ".join(f"{k} {v * per_m:.2f}" for k, v in cpu.items())
    return (f"{rows / took:,.0f} rows/s ({rows} rows, {took:.2f} s), load {load:.1f}; "
            f"CPU s per 1M rows: total {sum(cpu.values()) * per_m:.2f} ({parts})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--num-records", type=int, default=1_000_000)
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--sink-records", type=int, default=300_000)
    ap.add_argument("--agg-records", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sink-modes", default="at-least-once,exactly-once,noop")
    ap.add_argument("--sink-runs", type=int, default=2)
    ap.add_argument("--only", default="noop,agg,sink")
    ap.add_argument("--paths", default="native,librdkafka")
    ap.add_argument("--partitions", default="2,6")
    args = ap.parse_args()
    only = set(args.only.split(","))
    work = Path(tempfile.mkdtemp(prefix="spark-perf-"))
    node = BrokerProcess(work / "data")
    node.start()
    pid = node.proc.pid
    try:
        boot = node.bootstrap
        spark = session("local[2]", "odradek-spark-perf", {
            "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
            "spark.driver.memory": "2g"})
        spark.sparkContext.setLogLevel("ERROR")
        n = args.num_records

        def reader(topic: str, path: str, **extra: str) -> DataFrameReader:
            r = (spark.read.format("odradek").option("kafka.bootstrap.servers", boot)
                 .option("subscribe", topic).option("fetchPath", path))
            for k, v in extra.items():
                r = r.option(k, v)
            return r

        if "noop" in only:
            for parts in [int(x) for x in args.partitions.split(",")]:
                topic = f"src{parts}"
                create(boot, topic, parts)
                fill(boot, topic, n, args.record_size, parts)
                for path in args.paths.split(","):
                    def noop(topic: str = topic, path: str = path) -> int:
                        reader(topic, path).load().write.format("noop").mode("overwrite").save()
                        return n
                    noop()  # warm-up: JIT, Python workers
                    runs = [measure(noop, pid) for _ in range(args.runs)]
                    best = min(runs, key=lambda r: r[1])
                    med = statistics.median(r[1] for r in runs)
                    print(f"source -> noop, {parts} partitions, {args.record_size} B, {path}: best "
                          f"{describe(*best)}; median {n / med:,.0f} rows/s", flush=True)

        if "agg" in only:
            create(boot, "clicks")
            # Ten minutes of event time, so the 1-minute windows close as the watermark moves.
            fill(boot, "clicks", args.agg_records, args.record_size, keys=100, span_ms=600_000)
            for i in range(2):
                create(boot, f"counts-{i}")

                def agg(i: int = i) -> int:
                    from pyspark.sql import functions as F
                    src = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", boot)
                           .option("subscribe", "clicks").option("startingOffsets", "earliest").load())
                    out = (src.withWatermark("timestamp", "1 minute")
                           .groupBy(F.window("timestamp", "1 minute"), "key").count()
                           .select(F.col("key"), F.to_json(F.struct(
                               F.col("window.start").alias("start"), "count")).alias("value")))
                    q = (out.writeStream.format("odradek").option("kafka.bootstrap.servers", boot)
                         .option("topic", f"counts-{i}").outputMode("append")
                         .option("checkpointLocation", str(work / f"agg-cp-{i}"))
                         .trigger(availableNow=True).start())
                    q.awaitTermination()
                    return sum(p["numInputRows"] for p in q.recentProgress)
                print(f"run {i + 1}: source -> 1-min tumbling count by key (watermark 1 min) -> "
                      f"odradek sink, AvailableNow: {describe(*measure(agg, pid))}", flush=True)

        if "sink" in only:
            m = args.sink_records
            create(boot, "sink-src")
            fill(boot, "sink-src", m, args.record_size)
            # Alternating runs; the first one also warms up the streaming planner process.
            # "noop" is the same streaming query into Spark's no-op sink: what the source and
            # Spark's streaming machinery cost, so the odradek sink's own cost is the difference.
            modes = args.sink_modes.split(",")
            for i, mode in enumerate(modes * args.sink_runs):
                dst = f"dst-{i}"
                create(boot, dst)

                def sink(i: int = i, mode: str = mode, dst: str = dst) -> int:
                    df = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", boot)
                          .option("subscribe", "sink-src").option("startingOffsets", "earliest").load()
                          .select("key", "value"))
                    w = df.writeStream.option("checkpointLocation", str(work / f"cp-{i}"))
                    if mode == "noop":
                        w = w.format("noop")
                    else:
                        w = (w.format("odradek").option("kafka.bootstrap.servers", boot)
                             .option("topic", dst).option("deliveryGuarantee", mode))
                    q = w.trigger(availableNow=True).start()
                    q.awaitTermination()
                    return sum(p["numInputRows"] for p in q.recentProgress)
                what = "no-op sink" if mode == "noop" else f"odradek sink ({mode})"
                print(f"run {i + 1}: source -> {what}, AvailableNow, {args.record_size} B: "
                      f"{describe(*measure(sink, pid))}", flush=True)
        spark.stop()
    finally:
        node.stop()


if __name__ == "__main__":
    main()
