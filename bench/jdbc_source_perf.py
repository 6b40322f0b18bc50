"""JDBC source benchmark (issue 19): rows/s and CPU per 1M rows of Confluent's
JdbcSourceConnector (PostgreSQL -> topic), beside a plain Spark job doing the same work.

    python -m bench.jdbc_source_perf [--rows 30000] [--write]

A throwaway PostgreSQL holds `bench_rows` (id SERIAL, name, amount, note, updated). Three
runs, each of the same `--rows` rows into a topic of its own as JsonConverter records
(schema + payload):

1. the connector (mode=incrementing, batch.max.rows 5000, poll.interval.ms 200) on a node
   running its own worker (connect.listeners, Spark local[2]): one warm-up row first (the
   query's start is not in the rate), then the rows inserted at once, timed from the insert
   to connect-offsets saying the last id;
2. a plain Spark batch job: spark.read.jdbc (PostgreSQL's JDBC driver, Debian's
   libpostgresql-jdbc-java) -> to_json -> the odradek sink, in a SparkSession of this
   process (local[2]);
3. a plain psycopg loop: fetch the rows, JSON-encode each, produce with confluent-kafka.

CPU is user+system seconds of the whole process tree (node, its worker, the JVMs, Python
workers; for 2 and 3 this process and its JVM) over the timed window, per 1M rows. The load
average goes beside the figures. `--write` replaces bench/RESULTS-h19a.md.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from tests.integration.connect_support import NodeWorker
from tests.support.broker import BrokerProcess, free_port
from tests.support.postgres import PostgresServer, running_postgres

from bench.connect_spark_jobs import JAR
from bench.cpu import measure
from bench.run import git_revision, machine

RESULTS = Path(__file__).parent / "RESULTS-h19a.md"


def fill(pg: PostgresServer, first: int, count: int) -> None:
    import psycopg

    with psycopg.connect(pg.dsn("bench"), autocommit=True) as conn:
        conn.execute("INSERT INTO bench_rows (id, name, amount, note) SELECT i, 'name-' || i, "
                     "i * 0.5, NULL FROM generate_series(%s::int, %s::int) AS i",
                     (first, first + count - 1))


def stored_id(worker: NodeWorker, name: str) -> int:
    code, body = worker.call("GET", f"/connectors/{name}/offsets")
    if code != 200 or not body["offsets"]:
        return 0
    return int(body["offsets"][0]["offset"].get("incrementing", 0))


def run_connector(node: BrokerProcess, worker: NodeWorker, pg: PostgresServer,
                  rows: int) -> tuple[float, float]:
    fill(pg, 1, 1)
    code, body = worker.call("POST", "/connectors", {"name": "jdbc-src", "config": {
        "connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
        "connection.url": f"jdbc:postgresql://127.0.0.1:{pg.port}/bench",
        "connection.user": "postgres", "mode": "incrementing",
        "incrementing.column.name": "id", "table.whitelist": "bench_rows",
        "topic.prefix": "conn-", "batch.max.rows": "5000", "poll.interval.ms": "200"}})
    assert code == 201, body
    deadline = time.monotonic() + 1800
    while stored_id(worker, "jdbc-src") < 1:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the connector never started: {worker.log()[-3000:]}")
        time.sleep(0.2)

    def timed() -> None:
        fill(pg, 2, rows)
        while stored_id(worker, "jdbc-src") < rows + 1:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the connector did not finish: {worker.log()[-3000:]}")
            time.sleep(0.1)

    assert node.proc is not None
    _, took, cpu = measure(timed, node.proc.pid)
    result = (took, cpu)
    worker.call("DELETE", "/connectors/jdbc-src")
    return result


def run_spark(bootstrap: str, pg: PostgresServer, rows: int) -> tuple[float, float]:
    from pyspark.sql import functions as F

    from odradek.spark.session import session

    spark = session("local[2]", "jdbc-bench", {"spark.jars": JAR})
    schema = {"type": "struct", "optional": False, "name": "bench_rows", "fields": [
        {"type": "int32", "optional": False, "field": "id"},
        {"type": "string", "optional": True, "field": "name"},
        {"type": "double", "optional": True, "field": "amount"},
        {"type": "string", "optional": True, "field": "note"},
        {"type": "int64", "optional": False, "field": "updated",
         "name": "org.apache.kafka.connect.data.Timestamp", "version": 1}]}

    def job() -> None:
        df = spark.read.jdbc(f"jdbc:postgresql://127.0.0.1:{pg.port}/bench", "bench_rows",
                             properties={"user": "postgres", "driver": "org.postgresql.Driver"})
        payload = F.struct("id", "name", "amount", "note",
                           (F.unix_millis(F.col("updated"))).alias("updated"))
        # JsonConverter's envelope: the schema as JSON, then the row's payload
        envelope = F.concat(F.lit('{"schema":' + json.dumps(schema) + ',"payload":'),
                            F.to_json(payload), F.lit("}"))
        (df.where(F.col("id") > 1).select(envelope.cast("binary").alias("value"))
         .write.format("odradek").mode("append").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", "spark-rows").save())

    job_rows = spark.read.jdbc(f"jdbc:postgresql://127.0.0.1:{pg.port}/bench", "bench_rows",
                               properties={"user": "postgres",
                                           "driver": "org.postgresql.Driver"}).count()
    assert job_rows == rows + 1, job_rows  # the JVM and driver are warm before the timing
    try:
        _, took, cpu = measure(job, os.getpid())
        return took, cpu
    finally:
        spark.stop()


def run_psycopg(bootstrap: str, pg: PostgresServer, rows: int) -> tuple[float, float]:
    import psycopg

    from odradek.client import producer

    def job() -> None:
        p = producer(bootstrap, {"linger.ms": 20, "compression.type": "lz4"})
        with psycopg.connect(pg.dsn("bench")) as conn, conn.cursor(name="rows") as cur:
            cur.execute("SELECT id, name, amount, note, updated FROM bench_rows WHERE id > 1 "
                        "ORDER BY id")
            for row in cur:
                value = json.dumps({"id": row[0], "name": row[1], "amount": row[2],
                                    "note": row[3],
                                    "updated": int(row[4].timestamp() * 1000)}).encode()
                while True:
                    try:
                        p.produce("psycopg-rows", value=value)
                        break
                    except BufferError:
                        p.poll(0.05)
        assert p.flush(120) == 0

    _, took, cpu = measure(job, os.getpid())
    return took, cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=30_000)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    if not Path(JAR).exists():
        raise SystemExit(f"{JAR} is missing: install Debian's libpostgresql-jdbc-java "
                         "(make setup installs DEB_PACKAGES)")
    tmp = Path(tempfile.mkdtemp(prefix="jdbc-bench-"))
    port = free_port()
    results: list[tuple[str, tuple[float, float]]] = []
    load_before = os.getloadavg()
    with running_postgres() as pg:
        pg.create_database("bench")
        import psycopg

        with psycopg.connect(pg.dsn("bench"), autocommit=True) as conn:
            conn.execute("CREATE TABLE bench_rows (id INT PRIMARY KEY, name TEXT, "
                         "amount DOUBLE PRECISION, note TEXT, "
                         "updated TIMESTAMP NOT NULL DEFAULT now())")
        node = BrokerProcess(tmp / "data", settings={
            "connect.listeners": f"http://127.0.0.1:{port}",
            "connect.spark.master": "local[2]"})
        node.start(timeout=120)
        try:
            worker = NodeWorker(node, port).start()
            results.append(("JdbcSourceConnector (incrementing, batch.max.rows 5000)",
                            run_connector(node, worker, pg, args.rows)))
            results.append(("plain Spark: spark.read.jdbc -> to_json -> odradek sink",
                            run_spark(node.bootstrap, pg, args.rows)))
            results.append(("plain psycopg loop -> confluent-kafka producer",
                            run_psycopg(node.bootstrap, pg, args.rows)))
        finally:
            node.stop()
    load = os.getloadavg()
    m = machine()
    lines = [
        "# JDBC source (issue 19, bench/jdbc_source_perf.py)", "",
        f"{args.rows:,} rows of a 5-column PostgreSQL table (int, text, double, null text, "
        "timestamp) to a topic as JsonConverter records. The connector's figure runs from the "
        "INSERT of the rows (after one warm-up row, so the Spark query's start is not in it) "
        "to connect-offsets holding the last id; the plain jobs' from their start (warm JVM). "
        "CPU: user+sys seconds of every process involved, per 1M rows. "
        f"Revision {git_revision()}, {m.cores} cores ({m.cpu_model}), Python {m.python}; "
        f"load average {load_before[0]:.1f} before, {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} "
        "after (a shared machine: lower bounds).", "",
        "| job | rows/s | CPU s per 1M rows | wall (s) |", "|---|---|---|---|"]
    for name, (took, cpu) in results:
        lines.append(f"| {name} | {args.rows / took:,.0f} | {cpu * 1e6 / args.rows:,.0f} | "
                     f"{took:.1f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        RESULTS.write_text(text)


if __name__ == "__main__":
    main()
