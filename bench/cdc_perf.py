"""PostgreSQL CDC source benchmark (issue 19): rows/s and CPU per 1M rows, PostgreSQL -> topic.

    python -m bench.cdc_perf [--rows 100000] [--rounds 2] [--write] [--loop-only]

A throwaway PostgreSQL (wal_level=logical) and a node running its own Connect worker
(`connect.listeners`, Spark local[2]). Three jobs, each on `--rows` rows of a table of its
own per round, interleaved (the connector first in even rounds, last in odd ones):

- the connector: Debezium's PostgresConnector (snapshot.mode=never, JsonConverter with
  schemas), started and warmed up on one row, then the rows inserted in transactions of
  1,000, timed from the first insert to the last record in its topic;
- a plain Spark job (bench/connect_spark_jobs.cdc_snapshot) in a warm SparkSession of this
  process: the table's SNAPSHOT read with Spark's JDBC reader and written as Debezium-shaped
  read events through odradek's sink. Not a change stream (Spark has no logical-replication
  source): the closest plain Spark job, so the figure is a floor for Spark's part;
- a plain loop in this process, no Connect runtime and no Spark: the same SQL reads of the
  slot (pg_logical_slot_peek_binary_changes, pgoutput), the same decoder and Debezium events
  and JsonConverter bytes, produced with confluent-kafka, the slot advanced after each flush.

CPU is user+system seconds (bench/cpu.py) of this process's tree (the node, the worker with
its Spark JVM and Python workers, the bench's own JVM; less this process's own threads while
the connector runs: they only insert and poll), and of PostgreSQL's processes apart (logical
decoding runs in the backend), over the timed part. `--write` replaces bench/RESULTS-h19b.md.
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.integration.connect_support import NodeWorker
from tests.support.broker import BrokerProcess, free_port
from tests.support.postgres import PostgresServer, running_postgres

from bench import connect_spark_jobs as plain
from bench.cpu import tree_cpu
from bench.run import git_revision, machine

RESULTS = Path(__file__).parent / "RESULTS-h19b.md"
TX = 1000


def pg_cpu(pg: PostgresServer) -> float:
    return tree_cpu(int((pg.data_dir / "postmaster.pid").read_text().split()[0]))


def own_cpu() -> float:
    """This process's own threads (not its children: the node, the Spark JVM)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def high_water(bootstrap: str, topic: str) -> int:
    from confluent_kafka import KafkaException, TopicPartition

    from odradek.client import consumer

    c = consumer(bootstrap)
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
    except KafkaException:
        return 0
    finally:
        c.close()


def insert(dsn: str, table: str, first: int, count: int) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        for start in range(first, first + count, TX):
            n = min(TX, first + count - start)
            conn.execute(f"INSERT INTO {table} SELECT i, 'name-' || i, i * 0.5, NULL FROM "
                         "generate_series(%s::bigint, %s::bigint) i", (start, start + n - 1))


def wait(what: str, probe: Any, limit: float = 1800) -> None:
    deadline = time.monotonic() + limit
    while not probe():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.1)


def connector_run(worker: NodeWorker, node: BrokerProcess, pg: PostgresServer,
                  rows: int, r: int) -> dict[str, float]:
    dsn, table, slot_name = pg.dsn("bench"), f"t_conn{r}", f"conn_slot{r}"
    topic = f"conn.public.{table}"
    code, body = worker.call("POST", "/connectors", {"name": f"cdc{r}", "config": {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": "127.0.0.1", "database.port": str(pg.port),
        "database.user": "postgres", "database.dbname": "bench", "topic.prefix": "conn",
        "slot.name": slot_name, "publication.name": "bench_pub", "snapshot.mode": "never",
        "table.include.list": rf"public\.{table}", "max.batch.size": "20000"}})
    assert code == 201, body
    def slot() -> bool:  # created when the query starts: rows before it are not read
        import psycopg

        with psycopg.connect(dsn) as conn:
            return conn.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s",
                                (slot_name,)).fetchone() is not None

    wait("the connector's slot", slot)
    insert(dsn, table, 0, 1)
    wait("the connector's warm-up row", lambda: high_water(node.bootstrap, topic) >= 1)
    me = os.getpid()  # the node (with the worker and its JVM) and the bench's JVM
    cpu0, own0, pg0, t0 = tree_cpu(me), own_cpu(), pg_cpu(pg), time.monotonic()
    insert(dsn, table, 1, rows)
    wait("the connector's rows", lambda: high_water(node.bootstrap, topic) >= rows + 1)
    t1 = time.monotonic()
    # this process's own threads only inserted and polled: not the connector's work
    out = {"s": t1 - t0, "cpu": tree_cpu(me) - cpu0 - (own_cpu() - own0),
           "pg": pg_cpu(pg) - pg0}
    worker.call("DELETE", f"/connectors/cdc{r}")
    with psycopg_conn(dsn) as conn:  # the deleted connector's slot would hold WAL back
        conn.execute("SELECT pg_drop_replication_slot(%s) FROM pg_replication_slots WHERE "
                     "slot_name = %s AND NOT active", (slot_name, slot_name))
    return out


def psycopg_conn(dsn: str) -> Any:
    import psycopg

    return psycopg.connect(dsn, autocommit=True)


def spark_run(spark: Any, node: BrokerProcess, pg: PostgresServer, rows: int,
              r: int) -> dict[str, float]:
    """The closest plain Spark job: a JDBC read of the table's SNAPSHOT written to the topic
    as Debezium-shaped read events (connect_spark_jobs.cdc_snapshot): no change stream."""
    table = f"t_spark{r}"
    insert(pg.dsn("bench"), table, 0, rows)
    me = os.getpid()  # this process (the driver), its Spark JVM and Python workers, the node
    cpu0, pg0, t0 = tree_cpu(me), pg_cpu(pg), time.monotonic()
    plain.cdc_snapshot(spark, node.bootstrap, pg.port, "bench", table, "spark")
    t1 = time.monotonic()
    out = {"s": t1 - t0, "cpu": tree_cpu(me) - cpu0, "pg": pg_cpu(pg) - pg0}
    got = high_water(node.bootstrap, f"spark.public.{table}")
    assert got == rows, got
    return out


def loop_run(node: BrokerProcess, pg: PostgresServer, rows: int, r: int) -> dict[str, float]:
    """The same reads, decoding and bytes without Connect or Spark."""
    from odradek.client import producer
    from odradek.connect.connectors import pgoutput as po
    from odradek.connect.connectors.pg_cdc_records import ChangeBuilder, Position
    from odradek.connect.connectors.pg_cdc_source import Postgres
    from odradek.connect.converters import JsonConverter

    config = {"database.hostname": "127.0.0.1", "database.port": str(pg.port),
              "database.user": "postgres", "database.dbname": "bench",
              "slot.name": "loop_slot", "publication.name": "bench_pub"}
    source = Postgres(config)
    _, _, repl = source.create_slot()
    repl.close()
    builder = ChangeBuilder("loop", "bench")
    key_conv, value_conv = JsonConverter(True), JsonConverter(True)
    p = producer(node.bootstrap, {"linger.ms": 20, "compression.type": "lz4"})
    me = os.getpid()
    table = f"t_loop{r}"
    insert(pg.dsn("bench"), table, 0, rows)  # written first: the loop drains a backlog
    cpu0, pg0, t0 = tree_cpu(me), pg_cpu(pg), time.monotonic()
    sent = 0
    while sent < rows:
        end = None
        begin: po.Begin | None = None
        for lsn, _xid, data in source.peek(20000):
            msg = po.decode(data)
            if isinstance(msg, po.Begin):
                begin = msg
            elif isinstance(msg, po.Commit):
                end = msg.end_lsn
            else:
                pos = Position(lsn, begin.xid if begin else None,
                               begin.commit_ts_us if begin else 0)
                for rec in builder.feed(msg, pos, int(time.time() * 1000)):
                    if not rec.topic.endswith(table):
                        continue
                    while True:
                        try:
                            p.produce(rec.topic,
                                      key=key_conv.from_connect(rec.topic, rec.key_schema,
                                                                rec.key),
                                      value=value_conv.from_connect(rec.topic, rec.value_schema,
                                                                    rec.value))
                            break
                        except BufferError:
                            p.poll(0.05)
                    sent += 1
        assert p.flush(120) == 0
        if end is not None:
            source.advance(end)
    t1 = time.monotonic()
    out = {"s": t1 - t0, "cpu": tree_cpu(me) - cpu0, "pg": pg_cpu(pg) - pg0}
    source.conn.execute("SELECT pg_drop_replication_slot('loop_slot')")
    source.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--loop-only", action="store_true",
                        help="only the plain loop (no Connect worker, no Spark)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="cdc-bench-"))
    port = free_port()
    node = BrokerProcess(tmp / "data", settings={"connect.listeners": f"http://127.0.0.1:{port}",
                                                 "connect.spark.master": "local[2]"})
    node.start(timeout=120)
    results: list[tuple[str, int, dict[str, float]]] = []
    load_before = os.getloadavg()
    try:
        with running_postgres() as pg:
            pg.create_database("bench")
            rounds = range(args.rounds)
            with psycopg_conn(pg.dsn("bench")) as conn:
                # t_spark<rounds>: the plain Spark job's warm-up
                for t in [*(f"t_{kind}{r}" for r in rounds for kind in ("conn", "loop", "spark")),
                          f"t_spark{args.rounds}"]:
                    conn.execute(f"CREATE TABLE {t} (id bigint PRIMARY KEY, name text, "
                                 "amount numeric(12,2), note text)")
                conn.execute("CREATE PUBLICATION bench_pub FOR TABLE " + ", ".join(
                    f"t_{kind}{r}" for r in rounds for kind in ("conn", "loop")))
            if args.loop_only:
                results.append((LOOP, 0, loop_run(node, pg, args.rows, 0)))
            else:
                worker = NodeWorker(node, port).start()
                spark = plain.spark_session()  # started (and its JVM warm) before any timing
                spark_run(spark, node, pg, 10, args.rounds)  # warm-up: Python workers, JDBC
                runs = [(CONNECTOR, lambda r: connector_run(worker, node, pg, args.rows, r)),
                        (SPARK, lambda r: spark_run(spark, node, pg, args.rows, r)),
                        (LOOP, lambda r: loop_run(node, pg, args.rows, r))]
                for r in rounds:  # the connector first in even rounds, last in odd ones
                    for name, run in (runs if r % 2 == 0 else runs[1:] + runs[:1]):
                        results.append((name, r, run(r)))
                        print(results[-1], flush=True)
                spark.stop()
    finally:
        node.stop()
    write(args, results, load_before)


LOOP = "plain loop (peek + decode + Debezium JSON + confluent-kafka, no Spark)"
CONNECTOR = "PostgresConnector (Connect worker, Spark local[2])"
SPARK = ("plain Spark: spark.read.jdbc SNAPSHOT -> Debezium-shaped JSON -> odradek sink "
         "(not a change stream)")


def write(args: argparse.Namespace, results: list[tuple[str, int, dict[str, float]]],
          load_before: tuple[float, float, float]) -> None:
    load = os.getloadavg()
    m = machine()
    lines = [
        "# PostgreSQL CDC source (issue 19, bench/cdc_perf.py)", "",
        f"{args.rows:,} rows (id bigint key, text, numeric(12,2), a NULL text) per job, "
        f"{args.rounds} round(s), the connector first in even rounds and last in odd ones. "
        f"The connector and the loop read them by logical decoding (pgoutput, SQL interface; "
        f"rows inserted in transactions of {TX}) into a 1-partition topic as Debezium change "
        "events (JsonConverter with schemas); the plain Spark job reads the table's snapshot "
        "with Spark's JDBC reader (it is not a change stream: Spark has no logical-replication "
        "source) and writes Debezium-shaped read events through odradek's sink. CPU: this "
        "process's whole tree (the node, the Connect worker with its Spark JVM and Python "
        "workers, the bench's own Spark JVM and Python workers), less the bench's own threads "
        "during the connector's run (they insert and poll); PostgreSQL's processes apart. "
        f"Revision {git_revision()}, {m.cores} cores ({m.cpu_model}), Python {m.python}, "
        f"load average {load_before[0]:.1f} before, {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} "
        "after (`uptime`; the machine is shared, so these are lower bounds).", "",
        "| reader | round | rows/s | CPU s per 1M rows | PostgreSQL CPU s per 1M rows |",
        "|---|---|---|---|---|"]
    for name in dict.fromkeys(x[0] for x in results):
        lines += [f"| {n} | {r + 1} | {args.rows / x['s']:,.0f} | "
                  f"{x['cpu'] / args.rows * 1e6:,.0f} | {x['pg'] / args.rows * 1e6:,.0f} |"
                  for n, r, x in results if n == name]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        RESULTS.write_text(text)


if __name__ == "__main__":
    main()
