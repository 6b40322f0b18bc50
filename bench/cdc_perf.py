"""PostgreSQL CDC source benchmark (issue 19): rows/s and CPU per 1M rows, PostgreSQL -> topic.

    python -m bench.cdc_perf [--rows 100000] [--write]

A throwaway PostgreSQL (wal_level=logical) and a node running its own Connect worker
(`connect.listeners`, Spark local[2]). Two readers of the same kind of change stream:

- the connector: Debezium's PostgresConnector (snapshot.mode=never, JsonConverter with
  schemas), started and warmed up on one row, then `--rows` rows inserted in transactions of
  1,000, timed from the first insert to the last record in its topic;
- a plain loop in this process, no Connect runtime and no Spark: the same SQL reads of the
  slot (pg_logical_slot_peek_binary_changes, pgoutput), the same decoder and Debezium events
  and JsonConverter bytes, produced with confluent-kafka, the slot advanced after each flush.

CPU is user+system seconds (psutil) of the node's process tree (node, worker, Spark JVM and
its Python workers) or of this process, and of PostgreSQL's processes (logical decoding runs
in the backend), over the timed part. `--write` replaces bench/RESULTS-h19b.md.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from tests.integration.connect_support import NodeWorker
from tests.support.broker import BrokerProcess, free_port
from tests.support.postgres import PostgresServer, running_postgres

from bench.run import git_revision, machine

RESULTS = Path(__file__).parent / "RESULTS-h19b.md"
TX = 1000


def tree_cpu(root: int) -> float:
    total = 0.0
    try:
        top = psutil.Process(root)
        for p in [top, *top.children(recursive=True)]:
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.Error:
                pass
    except psutil.Error:
        pass
    return total


def pg_cpu(pg: PostgresServer) -> float:
    pid = int((pg.data_dir / "postmaster.pid").read_text().split()[0])
    return tree_cpu(pid)


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
                  rows: int) -> dict[str, float]:
    dsn = pg.dsn("bench")
    code, body = worker.call("POST", "/connectors", {"name": "cdc", "config": {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": "127.0.0.1", "database.port": str(pg.port),
        "database.user": "postgres", "database.dbname": "bench", "topic.prefix": "conn",
        "slot.name": "conn_slot", "publication.name": "bench_pub", "snapshot.mode": "never",
        "table.include.list": r"public\.t_conn", "max.batch.size": "20000"}})
    assert code == 201, body
    def slot() -> bool:  # created when the query starts: rows before it are not read
        import psycopg

        with psycopg.connect(dsn) as conn:
            return conn.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = "
                                "'conn_slot'").fetchone() is not None

    wait("the connector's slot", slot)
    insert(dsn, "t_conn", 0, 1)
    wait("the connector's warm-up row", lambda: high_water(node.bootstrap, "conn.public.t_conn") >= 1)
    assert node.proc is not None
    cpu0, pg0, t0 = tree_cpu(node.proc.pid), pg_cpu(pg), time.monotonic()
    insert(dsn, "t_conn", 1, rows)
    wait("the connector's rows",
         lambda: high_water(node.bootstrap, "conn.public.t_conn") >= rows + 1)
    t1 = time.monotonic()
    out = {"s": t1 - t0, "cpu": tree_cpu(node.proc.pid) - cpu0, "pg": pg_cpu(pg) - pg0}
    worker.call("DELETE", "/connectors/cdc")
    return out


def loop_run(node: BrokerProcess, pg: PostgresServer, rows: int) -> dict[str, float]:
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
    insert(pg.dsn("bench"), "t_loop", 0, rows)  # written first: the loop drains a backlog
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
                for r in builder.feed(msg, pos, int(time.time() * 1000)):
                    if not r.topic.endswith("t_loop"):
                        continue
                    while True:
                        try:
                            p.produce(r.topic, key=key_conv.from_connect(r.topic, r.key_schema, r.key),
                                      value=value_conv.from_connect(r.topic, r.value_schema,
                                                                    r.value))
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
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--loop-only", action="store_true",
                        help="only the plain loop (no Connect worker, no Spark)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="cdc-bench-"))
    port = free_port()
    node = BrokerProcess(tmp / "data", settings={"connect.listeners": f"http://127.0.0.1:{port}",
                                                 "connect.spark.master": "local[2]"})
    node.start(timeout=120)
    results: list[tuple[str, dict[str, float]]] = []
    try:
        with running_postgres() as pg:
            import psycopg

            pg.create_database("bench")
            with psycopg.connect(pg.dsn("bench"), autocommit=True) as conn:
                for t in ("t_conn", "t_loop"):
                    conn.execute(f"CREATE TABLE {t} (id bigint PRIMARY KEY, name text, "
                                 "amount numeric(12,2), note text)")
                conn.execute("CREATE PUBLICATION bench_pub FOR TABLE t_conn, t_loop")
            results.append(("plain loop (peek + decode + Debezium JSON + confluent-kafka)",
                            loop_run(node, pg, args.rows)))
            print(results[-1], flush=True)
            if not args.loop_only:
                worker = NodeWorker(node, port).start()
                results.append(("PostgresConnector (Connect worker, Spark local[2])",
                               connector_run(worker, node, pg, args.rows)))
    finally:
        node.stop()
    load = os.getloadavg()
    m = machine()
    lines = [
        "# PostgreSQL CDC source (issue 19, bench/cdc_perf.py)", "",
        f"{args.rows:,} rows inserted in transactions of {TX} (id bigint key, text, "
        "numeric(12,2), a NULL text) read by logical decoding (pgoutput, SQL interface) into "
        "a 1-partition topic as Debezium change events (JsonConverter with schemas). "
        f"Revision {git_revision()}, {m.cores} cores ({m.cpu_model}), Python {m.python}, "
        f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} (`uptime` after the run; "
        "the machine is shared, so these are lower bounds).", "",
        "| reader | rows/s | reader CPU s per 1M rows | PostgreSQL CPU s per 1M rows |",
        "|---|---|---|---|"]
    lines += [f"| {name} | {args.rows / r['s']:,.0f} | {r['cpu'] / args.rows * 1e6:,.0f} | "
              f"{r['pg'] / args.rows * 1e6:,.0f} |" for name, r in results]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        RESULTS.write_text(text)


if __name__ == "__main__":
    main()
