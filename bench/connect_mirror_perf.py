"""The mirror connector and the Delta lake sink beside plain jobs doing the same work (issue 19).

    python -m bench.connect_mirror_perf [--records 200000] [--write]

Two fresh nodes: `up` (the source cluster) and `down`, which runs the Connect worker
(`connect.listeners`, Spark local[2]). A warm-up connector starts the worker's SparkSession
first, so no JVM start is in a figure; a connector's time runs from its creation (its query's
planning included) to the last record in place, as each copies a topic filled beforehand
(`--records` records of ~100 bytes with a key, a header and a timestamp, 3 partitions).

- MirrorSourceConnector: `bench` on up -> `up.bench` on down, offset syncs included; beside
  it a plain confluent-kafka loop in this process (consume every partition, produce each
  record with its key, headers and timestamp to down, flush).
- LakeSinkConnector format=delta partition.by=partition: the topic on down -> a Delta table;
  beside it a plain loop (consume, 100,000 rows per Arrow table, write_deltalake with the
  same partitioning, no offsets kept).

CPU seconds are the whole process trees' (both nodes with the worker, its JVM and Python
workers, and this process) over the run, per million records. `--write` writes
bench/RESULTS-h19c.md.
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.integration.connect_support import NodeWorker
from tests.support.broker import BrokerProcess, free_port

from bench.run import git_revision, machine

RESULTS = Path(__file__).parent / "RESULTS-h19c.md"
PARTITIONS = 3
_TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu(root: int) -> float:
    """CPU seconds (user+sys, with reaped children) of `root` and its descendants."""
    todo, total = [root], 0.0
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    todo += [int(x) for x in f.read().split()]
        except OSError:
            continue
        total += sum(int(x) for x in stat[stat.rindex(")") + 2:].split()[11:15]) / _TICK
    return total


def own_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def fill(bootstrap: str, topic: str, count: int) -> None:
    from confluent_kafka.admin import NewTopic

    from odradek.client import admin_client, producer

    admin = admin_client(bootstrap)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(60)
    p = producer(bootstrap, {"linger.ms": 20, "compression.type": "lz4"})
    body = b"x" * 90
    for i in range(count):
        while True:
            try:
                p.produce(topic, key=b"k%d" % i, value=b"%08d" % i + body,
                          partition=i % PARTITIONS, headers=[("n", b"%d" % i)],
                          timestamp=1_600_000_000_000 + i)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0


def highs(bootstrap: str, topic: str) -> int:
    from confluent_kafka import TopicPartition

    from odradek.client import admin_client, consumer

    meta = admin_client(bootstrap).list_topics(timeout=30).topics.get(topic)
    if meta is None:
        return 0
    c = consumer(bootstrap)
    try:
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                   for p in meta.partitions)
    finally:
        c.close()


def delta_rows(path: Path) -> int:
    from deltalake import DeltaTable

    if not (path / "_delta_log").exists():
        return 0
    return int(DeltaTable(str(path)).count())  # from the files' statistics: no scan


def timed(roots: list[int], work: Callable[[], None]) -> tuple[float, float]:
    """(seconds, CPU seconds of `roots`' trees and this process) of `work`."""
    cpu0 = sum(tree_cpu(r) for r in roots) + own_cpu()
    t0 = time.monotonic()
    work()
    seconds = time.monotonic() - t0
    return seconds, sum(tree_cpu(r) for r in roots) + own_cpu() - cpu0


def wait(probe: Callable[[], bool], limit: float = 1800) -> None:
    deadline = time.monotonic() + limit
    while not probe():
        if time.monotonic() > deadline:
            raise TimeoutError("the run did not finish")
        time.sleep(0.2)


def plain_mirror(src: str, dst: str, topic: str, count: int) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import NewTopic

    from odradek.client import admin_client, consumer, producer

    # the target topic with the source's partitions, as the connector creates its remote topic
    # (a topic auto-created on the first produce would have one partition)
    admin = admin_client(dst)
    admin.create_topics([NewTopic("plain." + topic, PARTITIONS, 1)])["plain." + topic].result(60)
    c = consumer(src, {"enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    p = producer(dst, {"enable.idempotence": True, "linger.ms": 5,
                       "queue.buffering.max.messages": 500000})
    eof, done = set(), 0
    while len(eof) < PARTITIONS:
        for msg in c.consume(10000, 1.0):
            if msg.error():
                eof.add(msg.partition())
                continue
            while True:
                try:
                    p.produce("plain." + topic, key=msg.key(), value=msg.value(),
                              headers=msg.headers(), partition=msg.partition(),
                              timestamp=msg.timestamp()[1])
                    break
                except BufferError:
                    p.poll(0.1)
            done += 1
    assert p.flush(120) == 0 and done == count
    c.close()


def plain_delta(bootstrap: str, topic: str, path: Path, count: int) -> None:
    import pyarrow as pa
    from confluent_kafka import TopicPartition
    from deltalake import write_deltalake

    from odradek.client import consumer

    c = consumer(bootstrap, {"enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    cols: dict[str, list[Any]] = {k: [] for k in ("topic", "partition", "offset", "timestamp",
                                                  "key", "value")}
    eof, done = set(), 0

    def flush() -> None:
        if cols["offset"]:
            write_deltalake(str(path), pa.table(cols), mode="append", partition_by=["partition"])
            for v in cols.values():
                v.clear()

    while len(eof) < PARTITIONS:
        for msg in c.consume(10000, 1.0):
            if msg.error():
                eof.add(msg.partition())
                continue
            cols["topic"].append(msg.topic())
            cols["partition"].append(msg.partition())
            cols["offset"].append(msg.offset())
            cols["timestamp"].append(msg.timestamp()[1])
            cols["key"].append(msg.key().decode())
            cols["value"].append(msg.value().decode())
            done += 1
            if len(cols["offset"]) >= 100_000:
                flush()
    flush()
    assert done == count
    c.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    n = args.records
    tmp = Path(tempfile.mkdtemp(prefix="mirror-bench-"))
    port = free_port()
    up = BrokerProcess(tmp / "up")
    down = BrokerProcess(tmp / "down", settings={"connect.listeners": f"http://127.0.0.1:{port}",
                                                 "connect.spark.master": "local[2]"})
    up.start(timeout=120)
    down.start(timeout=120)
    rows: list[tuple[str, float, float]] = []
    try:
        worker = NodeWorker(down, port).start()
        assert up.proc is not None and down.proc is not None
        roots = [up.proc.pid, down.proc.pid]
        mm2 = {"connector.class": "MirrorSourceConnector", "source.cluster.alias": "up",
               "target.cluster.alias": "down", "source.cluster.bootstrap.servers": up.bootstrap,
               "target.cluster.bootstrap.servers": down.bootstrap, "replication.factor": "1",
               "offset-syncs.topic.replication.factor": "1"}
        # warm-up: the worker's SparkSession starts with its first query
        fill(up.bootstrap, "warm", 10)
        assert worker.call("POST", "/connectors", {"name": "warm", "config": {
            **mm2, "topics": "warm"}})[0] == 201
        wait(lambda: highs(down.bootstrap, "up.warm") >= 10)
        worker.call("DELETE", "/connectors/warm")

        fill(up.bootstrap, "bench", n)

        def connector_mirror() -> None:
            assert worker.call("POST", "/connectors", {"name": "mirror", "config": {
                **mm2, "topics": "bench"}})[0] == 201
            wait(lambda: highs(down.bootstrap, "up.bench") >= n)

        rows.append(("MirrorSourceConnector", *timed(roots, connector_mirror)))
        worker.call("DELETE", "/connectors/mirror")
        rows.append(("plain confluent-kafka consume -> produce loop",
                     *timed(roots, lambda: plain_mirror(up.bootstrap, down.bootstrap, "bench",
                                                        n))))

        fill(down.bootstrap, "lake", n)
        table = tmp / "delta"

        def connector_delta() -> None:
            assert worker.call("POST", "/connectors", {"name": "delta", "config": {
                "connector.class": "LakeSink", "topics": "lake", "path": str(table),
                "format": "delta", "partition.by": "partition", "tasks.max": "2",
                "key.converter": "org.apache.kafka.connect.storage.StringConverter",
                "value.converter": "org.apache.kafka.connect.storage.StringConverter"}})[0] == 201
            wait(lambda: delta_rows(table) >= n)

        rows.append(("LakeSinkConnector format=delta", *timed(roots, connector_delta)))
        worker.call("DELETE", "/connectors/delta")
        rows.append(("plain consume -> write_deltalake loop (100k rows per commit)",
                     *timed(roots, lambda: plain_delta(down.bootstrap, "lake", tmp / "plain",
                                                       n))))
    finally:
        down.stop()
        up.stop()
    load = os.getloadavg()
    m = machine()
    lines = [
        "# Mirror connector and Delta lake sink beside plain jobs (issue 19, "
        "bench/connect_mirror_perf.py)", "",
        f"{n:,} records (~100 bytes, key, one header, timestamp; 3 partitions) filled "
        "beforehand; a connector's time runs from its creation in a warm worker (Spark "
        "local[2], the query's planning included) to the last record in place. CPU: both "
        "nodes' process trees (node, Connect worker, its JVM and Python workers) and the "
        f"bench process. Revision {git_revision()}, {m.cores} cores ({m.cpu_model}), "
        f"Python {m.python}; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} "
        "(`uptime` after the run; the machine is shared).", "",
        "| job | records/s | CPU s per 1M records | time (s) |", "|---|---|---|---|"]
    lines += [f"| {name} | {n / secs:,.0f} | {cpu / n * 1e6:,.1f} | {secs:.1f} |"
              for name, secs, cpu in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        RESULTS.write_text(text)


if __name__ == "__main__":
    main()
