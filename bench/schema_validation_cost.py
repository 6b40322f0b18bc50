"""The produce cost of broker-side schema ID validation (issue 17), on vs off, in one run.

    python -m bench.schema_validation_cost [--records 300000] [--rounds 3] [--write]

One `odradek serve` with its Schema Registry; topic `sv-on` has
confluent.value.schema.validation=true, `sv-off` has not. Every record's value is in the
Confluent wire format with a registered id (100 B in all), so both topics take every record:
the difference is the validation itself (decoding each record, one cached lookup per record).
Rounds alternate off/on with one confluent-kafka producer (acks=all, linger 5 ms, lz4 off),
and report records/s and the node's CPU seconds per 1M records (psutil on the node process).
The load average is printed beside the figures. `--write` writes bench/RESULTS-validation.md.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from tests.support.broker import BrokerProcess, free_port

from bench.run import git_revision, machine

RESULTS = Path(__file__).parent / "RESULTS-validation.md"


def _register(url: str) -> int:
    body = json.dumps({"schema": json.dumps({"type": "bytes"})}).encode()
    req = urllib.request.Request(f"{url}/subjects/sv-on-value/versions", data=body,
                                 method="POST",
                                 headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return int(json.loads(resp.read())["id"])


def _wait_registry(url: str) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(f"{url}/subjects", timeout=5).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _run(bootstrap: str, topic: str, value: bytes, n: int, node: psutil.Process) -> tuple[float, float]:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
                  "batch.num.messages": 10000, "queue.buffering.max.messages": 1_000_000})
    failed = 0

    def report(err: object, msg: object) -> None:
        nonlocal failed
        if err is not None:
            failed += 1

    cpu0 = sum(node.cpu_times()[:2])
    t0 = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value, on_delivery=report)
                break
            except BufferError:
                p.poll(0.01)
    p.flush(120)
    seconds = time.perf_counter() - t0
    cpu = sum(node.cpu_times()[:2]) - cpu0
    if failed:
        raise RuntimeError(f"{failed} records failed on {topic}")
    return n / seconds, cpu / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    url = f"http://127.0.0.1:{free_port()}"
    with tempfile.TemporaryDirectory() as tmp:
        node = BrokerProcess(Path(tmp) / "data", settings={"schema.registry.listeners": url})
        node.start(timeout=120)
        try:
            _wait_registry(url)
            admin = AdminClient({"bootstrap.servers": node.bootstrap})
            futures = admin.create_topics([
                NewTopic("sv-on", 1, 1, config={"confluent.value.schema.validation": "true"}),
                NewTopic("sv-off", 1, 1)])
            for f in futures.values():
                f.result(30)
            schema_id = _register(url)
            value = b"\x00" + struct.pack(">I", schema_id) + os.urandom(95)
            proc = psutil.Process(node.proc.pid)  # type: ignore[union-attr]
            _run(node.bootstrap, "sv-on", value, 20_000, proc)  # warm: the id in the cache
            rows: dict[str, list[tuple[float, float]]] = {"off": [], "on": []}
            for _ in range(args.rounds):
                for mode in ("off", "on"):
                    rows[mode].append(_run(node.bootstrap, f"sv-{mode}", value, args.records,
                                           proc))
        finally:
            node.stop()
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    lines = ["| validation | records/s (median of rounds) | all rounds | node CPU s per 1M records |",
             "|---|---|---|---|"]
    for mode in ("off", "on"):
        rates = sorted(r for r, _ in rows[mode])
        cpus = sorted(c for _, c in rows[mode])
        lines.append(f"| {mode} | {rates[len(rates) // 2]:,.0f} | "
                     f"{', '.join(f'{r:,.0f}' for r, _ in rows[mode])} | "
                     f"{cpus[len(cpus) // 2]:.2f} |")
    text = (f"Broker-side schema ID validation, one node, one partition per topic, "
            f"{args.records:,} records of 100 B per round, {args.rounds} rounds alternating, "
            f"confluent-kafka acks=all; {machine()}; load average {load}; git {git_revision()}; "
            f"`python -m bench.schema_validation_cost --records {args.records} "
            f"--rounds {args.rounds}`.\n\n" + "\n".join(lines) + "\n")
    print(text)
    if args.write:
        RESULTS.write_text(text)


if __name__ == "__main__":
    main()
