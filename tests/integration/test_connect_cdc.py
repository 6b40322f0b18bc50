"""Issue 19's "CDC end to end": Debezium's PostgreSQL connector reads one database (snapshot,
then logical decoding with pgoutput) into Debezium-shaped topics, and Confluent's JDBC sink
writes them into a second database, which ends equal to the first row for row: inserts,
updates, deletes, a primary-key change and a schema change (ALTER TABLE ADD COLUMN, evolved
by the sink). Then the worker is killed with SIGKILL mid-stream and started again: the second
database is equal again, nothing missing (the connector is at-least-once: repeats allowed).

The worker is the Connect modules' shared node's own (`connect.listeners`,
tests/support/connect.py), with their PostgreSQL: the kill is of that child, which the node
starts again and which reads its connectors back from the Connect topics.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from typing import Any

import pytest

from tests.integration.connect_support import NodeWorker, wait_for
from tests.support.broker import BrokerProcess
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.timeout(900)  # Spark starting on a loaded 2-core machine

PG_CONNECTOR = "io.debezium.connector.postgresql.PostgresConnector"
TABLES = ("customers", "orders")
CONNECTORS = ["pg-cdc", "pg-sink"]


def rows(dsn: str, table: str) -> list[tuple[Any, ...]] | None:
    import psycopg

    try:
        with psycopg.connect(dsn) as conn:
            return conn.execute(f'SELECT * FROM "{table}" ORDER BY 1').fetchall()
    except psycopg.errors.UndefinedTable:
        return None


def topic_records(bootstrap: str, topic: str) -> list[tuple[Any, Any]]:
    """Every record of `topic`, partition by partition: (key, value) as JSON (None for a
    tombstone)."""
    from confluent_kafka import TopicPartition

    from odradek.client import consumer

    c = consumer(bootstrap)
    try:
        partitions = sorted(c.list_topics(topic, timeout=30).topics[topic].partitions)
        out: list[tuple[Any, Any]] = []
        for p in partitions:
            _, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            c.assign([TopicPartition(topic, p, 0)])
            seen = 0
            while seen < high:
                msg = c.poll(10)
                if msg is None:
                    pytest.fail(f"{topic}[{p}]: read {seen} of {high} records")
                if msg.error():
                    continue
                seen += 1
                key, value = msg.key(), msg.value()
                out.append((json.loads(key) if key else None,
                            json.loads(value) if value else None))
        return out
    finally:
        c.close()


def test_cdc_end_to_end_through_the_jdbc_sink_and_a_killed_worker(
        connect_node: BrokerProcess, connect_postgres: PostgresServer,
        connect: NodeWorker) -> None:
    import psycopg

    node, postgres, worker = connect_node, connect_postgres, connect

    src = postgres.create_database("cdc_src")
    dst = postgres.create_database("cdc_dst")
    with psycopg.connect(src, autocommit=True) as conn:
        conn.execute("CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, "
                     "balance numeric(10,2), active boolean)")
        conn.execute("CREATE TABLE orders (id bigint PRIMARY KEY, customer int, note text)")
        conn.execute("INSERT INTO customers SELECT i, 'c' || i, i * 1.25, i % 2 = 0 "
                     "FROM generate_series(1, 20) i")
        conn.execute("INSERT INTO orders SELECT i, i % 20 + 1, 'first' FROM "
                     "generate_series(1, 30) i")

    try:
        code, body = worker.call("POST", "/connectors", {"name": "pg-cdc", "config": {
            "connector.class": PG_CONNECTOR, "database.hostname": "127.0.0.1",
            "database.port": str(postgres.port), "database.user": "postgres",
            "database.dbname": "cdc_src", "topic.prefix": "cdc", "plugin.name": "pgoutput",
            "slot.name": "cdc_slot", "publication.name": "cdc_pub",
            "table.include.list": r"public\.(customers|orders)", "snapshot.mode": "initial",
            "tombstones.on.delete": "true", "max.batch.size": "500"}})
        assert code == 201, body
        code, body = worker.call("POST", "/connectors", {"name": "pg-sink", "config": {
            "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
            "topics": "cdc.public.customers,cdc.public.orders",
            "connection.url": f"jdbc:postgresql://127.0.0.1:{postgres.port}/cdc_dst",
            "connection.user": "postgres", "insert.mode": "upsert", "pk.mode": "record_key",
            "delete.enabled": "true", "auto.create": "true", "auto.evolve": "true",
            "transforms": "after,route",
            "transforms.after.type": "org.apache.kafka.connect.transforms.ExtractField$Value",
            "transforms.after.field": "after",
            "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
            "transforms.route.regex": r"cdc\.public\.(.*)",
            "transforms.route.replacement": "$1"}})
        assert code == 201, body

        def equal() -> bool:
            for name in ("pg-cdc", "pg-sink"):
                code, status = worker.call("GET", f"/connectors/{name}/status")
                failed = [t.get("trace", "") for t in (status.get("tasks", []) if code == 200
                                                       else []) if t["state"] == "FAILED"]
                if failed:
                    pytest.fail(f"{name} failed: {failed[0][-6000:]}")
            return all(rows(src, t) == rows(dst, t) for t in TABLES)

        def state() -> str:
            tables = {t: (rows(src, t), rows(dst, t)) for t in TABLES}
            return f"{tables}\n{worker.log()}"

        wait_for("the snapshot in the sink database", equal, 400, state)

        with psycopg.connect(src, autocommit=True) as conn:
            conn.execute("INSERT INTO customers VALUES (21, 'new', 3.50, true)")
            conn.execute("UPDATE customers SET name = 'renamed', balance = NULL WHERE id = 2")
            conn.execute("DELETE FROM customers WHERE id = 3")
            conn.execute("UPDATE customers SET id = 100 WHERE id = 4")  # a key change
            with conn.transaction():
                conn.execute("UPDATE orders SET note = 'second' WHERE id <= 10")
                conn.execute("DELETE FROM orders WHERE id > 25")
            conn.execute("ALTER TABLE customers ADD COLUMN email text")
            conn.execute("INSERT INTO customers VALUES (22, 'mailed', 1.00, false, 'm@x')")
            conn.execute("UPDATE customers SET email = 'one@x' WHERE id = 1")
        wait_for("the changes and the new column in the sink database", equal, 300, state)
        assert [r[0] for r in rows(dst, "customers") or []][-3:] == [21, 22, 100]

        # What the topic holds is Debezium's: snapshot reads, c/u/d, tombstones, the envelope.
        records = topic_records(node.bootstrap, "cdc.public.customers")
        ops = [(k["payload"]["id"] if k else None, v["payload"]["op"] if v else None)
               for k, v in records]
        assert ops[:20] == [(i, "r") for i in range(1, 21)]
        assert ops[20:] == [(21, "c"), (2, "u"), (3, "d"), (3, None), (4, "d"), (4, None),
                            (100, "c"), (22, "c"), (1, "u")]
        key, value = records[27]
        assert key["schema"]["name"] == "cdc.public.customers.Key"
        assert value["schema"]["name"] == "cdc.public.customers.Envelope"
        payload = value["payload"]
        assert payload["after"] == {"id": 22, "name": "mailed", "balance": "ZA==",
                                    "active": False, "email": "m@x"}
        assert payload["source"]["connector"] == "postgresql"
        assert payload["source"]["db"] == "cdc_src" and payload["source"]["table"] == "customers"
        assert isinstance(payload["source"]["lsn"], int) and payload["source"]["txId"] > 0
        assert records[19][1]["payload"]["source"]["snapshot"] in ("true", "last")
        offsets = [v for k, v in topic_records(node.bootstrap, "connect-offsets")
                   if k == ["pg-cdc", {"server": "cdc"}]]
        assert offsets and {"lsn", "txId", "ts_usec"} <= set(offsets[-1])

        # A stream of changes; the worker is killed (SIGKILL) while it flows, then restarted.
        stop = threading.Event()
        written: list[int] = []

        def write() -> None:
            with psycopg.connect(src, autocommit=True) as conn:
                i = 1000
                while not stop.is_set() and i < 3000:
                    conn.execute("INSERT INTO orders VALUES (%s, %s, 'stream')", (i, i % 20))
                    if i % 3 == 0:
                        conn.execute("UPDATE orders SET note = 'touched' WHERE id = %s",
                                     (i - 1,))
                    if i % 7 == 0:
                        conn.execute("DELETE FROM orders WHERE id = %s", (i - 2,))
                    written.append(i)
                    i += 1
                    stop.wait(0.01)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()

        def streamed() -> int:
            return sum(1 for r in rows(dst, "orders") or [] if r[0] >= 1000)

        wait_for("some of the stream in the sink", lambda: streamed() >= 20, 300, worker.log)
        first = worker.pids()
        os.kill(first[-1], signal.SIGKILL)
        # The node starts another worker on the same listener, which reads its connectors
        # back from the Connect topics and runs them from their stored offsets.
        wait_for("a new worker child", lambda: len(worker.pids()) == len(first) + 1, 180,
                 worker.log)
        wait_for("the new worker answering with the connectors", lambda: worker.answers()
                 and worker.call("GET", "/connectors") == (200, CONNECTORS), 180, worker.log)
        at_restart = len(written)
        wait_for("the writer to go on after the restart",
                 lambda: len(written) >= at_restart + 50 or not writer.is_alive(), 120)
        stop.set()
        writer.join(60)
        wait_for("the sink equal again after the SIGKILL", equal, 400, state)
        # Nothing lost: every streamed insert reached the topic (repeats are allowed).
        created = {k["payload"]["id"] for k, v in topic_records(node.bootstrap,
                                                                "cdc.public.orders")
                   if v and v["payload"]["op"] == "c"}
        assert set(written) <= created
    finally:
        for name in CONNECTORS:
            worker.call("DELETE", f"/connectors/{name}")
