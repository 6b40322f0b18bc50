"""The mirror connector and the lake and JDBC sinks beside plain jobs doing the same work
(issue 19's benchmark).

    python -m bench.connect_mirror_perf [--records 50000] [--rounds 2] [--write]

Two fresh nodes, `up` (the source cluster) and `down`, which runs the Connect worker
(`connect.listeners`, Spark local[2]), and a throwaway PostgreSQL. A warm-up connector starts
the worker's SparkSession and the bench's own SparkSession (local[2], for the plain Spark
jobs) reads a topic once, so no JVM start is in a figure. Every job copies a topic filled
beforehand (`--records` records, 3 partitions); a connector's time runs from its creation
(its query's planning included) to the last record in place, a plain job's from its start
(its planning included) to its end. Each round runs every job once, connector first in even
rounds and last in odd ones, so the machine's load falls on both alike.

- mirror: MirrorSourceConnector (`bench<r>` on up -> `up.bench<r>` on down, offset syncs
  included); a plain Spark job (odradek source on up -> odradek sink on down, partition, key,
  value, headers); a plain confluent-kafka consume -> produce loop in this process.
- lake, format=parquet: LakeSinkConnector (StringConverter, partition.by=partition); a plain
  Spark job (the topic -> df.write.partitionBy("partition").parquet).
- lake, format=delta: LakeSinkConnector; a plain Spark job (the topic as Arrow ->
  write_deltalake: Spark has no Delta package here, see connect_spark_jobs.lake_delta); a
  plain consume -> write_deltalake loop (100,000 rows per commit).
- JDBC sink: JdbcSinkConnector (JsonConverter with schemas, insert.mode=upsert,
  pk.mode=record_key, auto.create); a plain Spark job (from_json, Spark's JDBC writer into a
  staging table, one INSERT ... ON CONFLICT DO UPDATE).

CPU seconds are this process's whole tree (both nodes with the worker, its JVM and Python
workers; the bench's own Spark JVM and Python workers) over the run, less this process's own
threads while a connector runs (they only poll its progress then), and PostgreSQL's
processes apart, per million records. `--write` writes bench/RESULTS-h19c.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.integration.connect_support import NodeWorker
from tests.support.broker import BrokerProcess, free_port
from tests.support.postgres import PostgresServer, running_postgres

from bench import connect_spark_jobs as plain
from bench.cpu import measure, tree_cpu
from bench.run import git_revision, machine

RESULTS = Path(__file__).parent / "RESULTS-h19c.md"
PARTITIONS = 3
# JsonConverter's envelope for the JDBC sink's records (as bench/connect_perf.py writes them)
SCHEMA = {"type": "struct", "optional": False, "fields": [
    {"type": "int64", "optional": False, "field": "id"},
    {"type": "string", "optional": False, "field": "name"},
    {"type": "double", "optional": False, "field": "amount"},
    {"type": "string", "optional": True, "field": "note"}]}
STRINGS = {"key.converter": "org.apache.kafka.connect.storage.StringConverter",
           "value.converter": "org.apache.kafka.connect.storage.StringConverter"}


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




def fill_json(bootstrap: str, topic: str, count: int) -> None:
    """`count` JsonConverter records (schema + payload) keyed by a unique id."""
    from confluent_kafka.admin import NewTopic

    from odradek.client import admin_client, producer

    admin = admin_client(bootstrap)  # held: a collected client fails its futures
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(60)
    p = producer(bootstrap, {"linger.ms": 20, "compression.type": "lz4"})
    for i in range(count):
        key = json.dumps({"schema": {"type": "int64", "optional": False}, "payload": i})
        value = json.dumps({"schema": SCHEMA, "payload": {
            "id": i, "name": f"name-{i}", "amount": i * 0.5, "note": None}})
        while True:
            try:
                p.produce(topic, key=key.encode(), value=value.encode(), partition=i % PARTITIONS)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0


def create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import NewTopic

    from odradek.client import admin_client

    admin = admin_client(bootstrap)  # held: a collected client fails its futures
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(60)


def committed(worker: NodeWorker, name: str) -> int:
    """The records a sink connector has committed (its group's offsets, summed)."""
    code, body = worker.call("GET", f"/connectors/{name}/offsets")
    if code != 200:
        return 0
    return sum(int(o["offset"]["kafka_offset"]) for o in body["offsets"])


def parquet_rows(path: Path) -> int:
    import pyarrow.dataset as ds

    return ds.dataset(str(path), format="parquet", partitioning="hive").count_rows()


def table_rows(pg: PostgresServer, table: str) -> int:
    import psycopg

    with psycopg.connect(pg.dsn("bench")) as conn:
        row = conn.execute(f'SELECT count(*), count(DISTINCT id) FROM "{table}"').fetchone()
    assert row is not None and row[0] == row[1], row  # upserts: one row per key
    return int(row[0])


def own_cpu() -> float:
    """This process's own threads (not its children: the nodes, the Spark JVM)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def postgres_pid(pg: PostgresServer) -> int:
    return int((pg.data_dir / "postmaster.pid").read_text().split()[0])


Row = tuple[str, str, int, float, float, float]  # work, job, round, seconds, CPU, PG CPU
# (work, job, run it, count what it wrote)
Job = tuple[str, str, Callable[[], Any], Callable[[], int]]


@dataclass
class Bench:
    up: BrokerProcess
    down: BrokerProcess
    worker: NodeWorker
    pg: PostgresServer
    spark: Any
    tmp: Path
    n: int

    @property
    def mm2(self) -> dict[str, str]:
        return {"connector.class": "MirrorSourceConnector", "source.cluster.alias": "up",
                "target.cluster.alias": "down", "source.cluster.bootstrap.servers":
                self.up.bootstrap, "target.cluster.bootstrap.servers": self.down.bootstrap,
                "replication.factor": "1", "offset-syncs.topic.replication.factor": "1"}

    def warm_up(self) -> None:
        """The worker's SparkSession starts with its first query, the bench's Python
        workers with its first read: neither is in a figure."""
        fill(self.up.bootstrap, "warm", 10)
        self.connector("warm", {**self.mm2, "topics": "warm"},
                       lambda: highs(self.down.bootstrap, "up.warm") >= 10)
        self.worker.call("DELETE", "/connectors/warm")
        assert plain.read_topic(self.spark, self.up.bootstrap, "warm").count() == 10

    def connector(self, name: str, config: dict[str, str], done: Callable[[], bool]) -> None:
        code, body = self.worker.call("POST", "/connectors", {"name": name, "config": config})
        assert code == 201, body

        def finished() -> bool:
            if done():
                return True
            # a failed task stays failed: say why now rather than wait out the limit (on a
            # loaded machine Spark's Python workers can miss their connect-back timeout)
            code, status = self.worker.call("GET", f"/connectors/{name}/status")
            failed = [t for t in status.get("tasks", []) if t.get("state") == "FAILED"]
            if code == 200 and failed:
                raise RuntimeError(f"{name}'s task failed: {failed[0].get('trace', '')[:2000]}")
            return False

        wait(finished)

    def mirror(self, r: int) -> list[Job]:
        src, down = f"bench{r}", self.down.bootstrap
        fill(self.up.bootstrap, src, self.n)
        create_topic(down, f"spark.{src}")
        return [
            ("mirror", "MirrorSourceConnector", lambda: self.connector(
                f"mirror{r}", {**self.mm2, "topics": src},
                lambda: highs(down, f"up.{src}") >= self.n),
             lambda: highs(down, f"up.{src}")),
            ("mirror", "plain Spark: odradek source -> odradek sink",
             lambda: plain.mirror(self.spark, self.up.bootstrap, down, src, f"spark.{src}"),
             lambda: highs(down, f"spark.{src}")),
            ("mirror", "plain confluent-kafka consume -> produce loop",
             lambda: plain_mirror(self.up.bootstrap, down, src, self.n),
             lambda: highs(down, f"plain.{src}"))]

    def lake(self, fmt: str, r: int) -> list[Job]:
        conn, by_spark = self.tmp / f"{fmt}-conn{r}", self.tmp / f"{fmt}-spark{r}"
        rows = delta_rows if fmt == "delta" else parquet_rows
        config = {"connector.class": "LakeSink", "topics": "lake", "path": str(conn),
                  "format": fmt, "partition.by": "partition", "tasks.max": "2", **STRINGS}
        out: list[Job] = [(f"lake {fmt}", f"LakeSinkConnector format={fmt}", lambda: self.connector(
            f"{fmt}{r}", config, lambda: committed(self.worker, f"{fmt}{r}") >= self.n
            and rows(conn) >= self.n), lambda: rows(conn))]
        if fmt == "parquet":
            out.append((f"lake {fmt}", "plain Spark: odradek source -> write.parquet",
                        lambda: plain.lake_parquet(self.spark, self.down.bootstrap, "lake",
                                                   by_spark), lambda: rows(by_spark)))
        else:
            loop = self.tmp / f"delta-loop{r}"
            out += [(f"lake {fmt}", "plain Spark: odradek source -> Arrow -> write_deltalake",
                     lambda: plain.lake_delta(self.spark, self.down.bootstrap, "lake", by_spark),
                     lambda: rows(by_spark)),
                    (f"lake {fmt}", "plain consume -> write_deltalake loop (100k rows per "
                     "commit)", lambda: plain_delta(self.down.bootstrap, "lake", loop, self.n),
                     lambda: rows(loop))]
        return out

    def jdbc(self, r: int) -> list[Job]:
        import psycopg

        with psycopg.connect(self.pg.dsn("bench"), autocommit=True) as c:
            plain.jdbc_table(c, f"spark_{r}")
        config = {"connector.class": "JdbcSink", "topics": "jdbc",
                  "connection.url": f"jdbc:postgresql://127.0.0.1:{self.pg.port}/bench",
                  "connection.user": "postgres", "insert.mode": "upsert",
                  "pk.mode": "record_key", "pk.fields": "id", "auto.create": "true",
                  "table.name.format": f"conn_{r}", "tasks.max": "2"}
        return [
            ("JDBC sink", "JdbcSinkConnector (upsert, pk.mode=record_key)",
             lambda: self.connector(f"jdbc{r}", config,
                                    lambda: committed(self.worker, f"jdbc{r}") >= self.n),
             lambda: table_rows(self.pg, f"conn_{r}")),
            ("JDBC sink", "plain Spark: from_json -> write.jdbc (staging) -> INSERT ... ON "
             "CONFLICT", lambda: plain.jdbc_upsert(self.spark, self.down.bootstrap, "jdbc",
                                                  self.pg.port, "bench", f"spark_{r}"),
             lambda: table_rows(self.pg, f"spark_{r}"))]

    def run(self, jobs: list[Job], r: int, rows: list[Row]) -> None:
        """Each job timed, connector first in even rounds and last in odd ones."""
        pg_root, me = postgres_pid(self.pg), os.getpid()  # the nodes are in this tree
        if r % 2:
            jobs = jobs[1:] + jobs[:1]
        for work, name, job, count in jobs:
            pg0, own0 = tree_cpu(pg_root), own_cpu()
            _, secs, cpu = measure(job, me)
            if "Connector" in name:
                # this process only polls the connector's progress then: not its work
                cpu -= own_cpu() - own0
            rows.append((work, name, r, secs, cpu, tree_cpu(pg_root) - pg0))
            print(rows[-1], flush=True)
            assert count() == self.n, (name, count())
            for each in ("mirror", "parquet", "delta", "jdbc"):  # no idle query beside the next
                self.worker.call("DELETE", f"/connectors/{each}{r}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", default="mirror,parquet,delta,jdbc")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    n, only = args.records, args.only.split(",")
    tmp = Path(tempfile.mkdtemp(prefix="mirror-bench-"))
    port = free_port()
    up = BrokerProcess(tmp / "up")
    down = BrokerProcess(tmp / "down", settings={"connect.listeners": f"http://127.0.0.1:{port}",
                                                 "connect.spark.master": "local[2]"})
    rows: list[Row] = []
    load_before = os.getloadavg()
    with running_postgres() as pg:
        pg.create_database("bench")
        up.start(timeout=120)
        down.start(timeout=120)
        try:
            b = Bench(up, down, NodeWorker(down, port).start(), pg, plain.spark_session(), tmp, n)
            b.warm_up()
            if "parquet" in only or "delta" in only:
                fill(down.bootstrap, "lake", n)
            if "jdbc" in only:
                fill_json(down.bootstrap, "jdbc", n)
            for r in range(args.rounds):
                for work in only:
                    jobs = (b.mirror(r) if work == "mirror" else b.jdbc(r) if work == "jdbc"
                            else b.lake(work, r))
                    b.run(jobs, r, rows)
            b.spark.stop()
        finally:
            down.stop()
            up.stop()
    write(args, n, rows, load_before)


def write(args: argparse.Namespace, n: int, rows: list[Row],
          load_before: tuple[float, float, float]) -> None:
    load = os.getloadavg()
    m = machine()
    lines = [
        "# Connectors beside plain Spark jobs and plain loops (issue 19, "
        "bench/connect_mirror_perf.py)", "",
        f"{n:,} records per job (3 partitions) filled beforehand; {args.rounds} round(s), "
        "connector first in even rounds and last in odd ones. A connector's time runs from its "
        "creation in a warm worker (Spark local[2], the query's planning included) to the last "
        "record in place; a plain Spark job's from its start in a warm SparkSession "
        "(local[2], in the bench process) to its end. CPU: the bench process's whole tree (both "
        "nodes, the Connect worker, its JVM and Python workers, the bench's Spark JVM and "
        "Python workers), less the bench's own threads during a connector's run (they only "
        "poll its progress); PostgreSQL's processes apart. "
        f"Revision {git_revision()}, {m.cores} cores ({m.cpu_model}), Python {m.python}; load "
        f"average {load_before[0]:.1f} before, {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} after "
        "(`uptime`; a shared machine).", "",
        "| work | job | round | records/s | CPU s per 1M records | PostgreSQL CPU s per 1M | "
        "time (s) |", "|---|---|---|---|---|---|---|"]
    order = list(dict.fromkeys(r[0] for r in rows))
    for job in order:
        for j, name, r, secs, cpu, pgc in sorted((x for x in rows if x[0] == job),
                                                 key=lambda x: (x[1], x[2])):
            lines.append(f"| {j} | {name} | {r + 1} | {n / secs:,.0f} | {cpu / n * 1e6:,.1f} | "
                         f"{pgc / n * 1e6:,.1f} | {secs:.1f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        RESULTS.write_text(text)


if __name__ == "__main__":
    main()
