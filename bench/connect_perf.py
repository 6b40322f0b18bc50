"""Connect sink benchmark (issue 19): records/s of a sink connector, end to end.

    python -m bench.connect_perf [--records 200000] [--write]

Starts a fresh `odradek serve` running its own Connect worker (`connect.listeners`, Spark
`local[2]`); for each sink (FileStreamSink; FileStreamSink through a Cast + InsertField +
ReplaceField chain; the JDBC sink upserting into a throwaway PostgreSQL) creates the
connector on its own topic, waits for one warm-up record to be committed (the Spark query's
start is not in the rate), then produces `--records` JsonConverter records (schema + payload
envelope, a struct of four fields) and times them to the last committed offset (GET
/offsets). The load average goes beside the figures. `--write` replaces
bench/RESULTS-connect2.md. The JDBC sink beside a plain Spark job doing the same upserts, with
CPU per record: bench/connect_mirror_perf.py.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.integration.connect_support import NodeWorker
from tests.support.broker import BrokerProcess, free_port
from tests.support.postgres import running_postgres

from bench.run import git_revision, machine

RESULTS = Path(__file__).parent / "RESULTS-connect2.md"
T = "org.apache.kafka.connect.transforms."
SCHEMA = {"type": "struct", "optional": False, "fields": [
    {"type": "int64", "optional": False, "field": "id"},
    {"type": "string", "optional": False, "field": "name"},
    {"type": "double", "optional": False, "field": "amount"},
    {"type": "string", "optional": True, "field": "note"}]}


def produce(bootstrap: str, topic: str, count: int, first: int = 0) -> None:
    from odradek.client import producer

    p = producer(bootstrap, {"linger.ms": 20, "compression.type": "lz4"})
    for i in range(first, first + count):
        key = json.dumps({"schema": {"type": "int64", "optional": False}, "payload": i})
        value = json.dumps({"schema": SCHEMA, "payload": {
            "id": i, "name": f"name-{i}", "amount": i * 0.5, "note": None}})
        while True:
            try:
                p.produce(topic, key=key.encode(), value=value.encode())
                break
            except BufferError:
                p.poll(0.1)
    assert p.flush(120) == 0


def committed(worker: NodeWorker, name: str) -> int:
    code, body = worker.call("GET", f"/connectors/{name}/offsets")
    if code != 200:
        return 0
    return sum(int(o["offset"]["kafka_offset"]) for o in body["offsets"])


def run_sink(worker: NodeWorker, bootstrap: str, name: str, config: dict[str, Any],
             count: int) -> dict[str, float]:
    """One warm-up record first (the Spark query's start is not counted), then `count`
    records produced while the connector runs, timed from the first produce to the last
    committed offset."""
    topic = f"bench-{name}"
    produce(bootstrap, topic, 1)
    created = time.monotonic()
    code, body = worker.call("POST", "/connectors", {"name": name, "config": {
        **config, "topics": topic}})
    assert code == 201, body
    deadline = created + 1800
    while committed(worker, name) < 1:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name} never started: {worker.log()[-3000:]}")
        time.sleep(0.2)
    started = time.monotonic()
    produce(bootstrap, topic, count, first=1)
    while committed(worker, name) < count + 1:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name} did not finish: {worker.log()[-3000:]}")
        time.sleep(0.2)
    end = time.monotonic()
    worker.call("DELETE", f"/connectors/{name}")
    return {"first_batch_s": started - created, "records_per_s": count / (end - started),
            "total_s": end - started}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="connect-bench-"))
    port = free_port()
    node = BrokerProcess(tmp / "data", settings={"connect.listeners": f"http://127.0.0.1:{port}",
                                                 "connect.spark.master": "local[2]"})
    node.start(timeout=120)
    rows: list[tuple[str, dict[str, float]]] = []
    try:
        worker = NodeWorker(node, port).start()
        base = {"tasks.max": "2"}
        rows.append(("FileStreamSink", run_sink(worker, node.bootstrap, "file", {
            **base, "connector.class": "FileStreamSink", "file": str(tmp / "out.txt")},
            args.records)))
        rows.append(("FileStreamSink + Cast, InsertField, ReplaceField", run_sink(
            worker, node.bootstrap, "file-smt", {
                **base, "connector.class": "FileStreamSink", "file": str(tmp / "smt.txt"),
                "transforms": "cast,insert,drop",
                "transforms.cast.type": T + "Cast$Value", "transforms.cast.spec": "amount:string",
                "transforms.insert.type": T + "InsertField$Value",
                "transforms.insert.offset.field": "offset",
                "transforms.drop.type": T + "ReplaceField$Value",
                "transforms.drop.exclude": "note"}, args.records)))
        with running_postgres() as pg:
            pg.create_database("bench")
            rows.append(("JdbcSink (upsert, pk.mode=record_key)", run_sink(worker, node.bootstrap, "jdbc", {
                **base, "connector.class": "JdbcSink",
                "connection.url": f"jdbc:postgresql://127.0.0.1:{pg.port}/bench",
                "connection.user": "postgres", "insert.mode": "upsert",
                "pk.mode": "record_key", "pk.fields": "id", "auto.create": "true"},
                args.records)))
    finally:
        node.stop()
    load = os.getloadavg()
    m = machine()
    lines = [
        "# Connect sinks (issue 19, bench/connect_perf.py)", "",
        f"{args.records} JsonConverter records (schema + payload, 4 fields) produced into one "
        "topic (1 partition) while the sink runs (after one warm-up record, so the Spark "
        "query's start is not in the rate), timed to the last committed offset; a node running its own worker (connect.listeners, Spark local[2]), "
        f"tasks.max=2. Revision {git_revision()}, {m.cores} cores ({m.cpu_model}), "
        f"Python {m.python}, load average "
        f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f} (`uptime` after the run; the machine is "
        "shared, so these are lower bounds).", "",
        "| sink | records/s (produced while running) | create to first committed record (s) "
        "| the records' time (s) |",
        "|---|---|---|---|"]
    lines += [f"| {name} | {r['records_per_s']:,.0f} | {r['first_batch_s']:.1f} | "
              f"{r['total_s']:.1f} |" for name, r in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        RESULTS.write_text(text)


if __name__ == "__main__":
    main()
