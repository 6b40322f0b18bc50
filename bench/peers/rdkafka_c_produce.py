"""The produce rows of the C client systems: bench/c/rdkafka_produce, a librdkafka C producer of
our own (`make bench-tools` builds it against Debian's librdkafka-dev; `bundled_tool` links it
against confluent-kafka's bundled librdkafka 2.16 on first use, as for the C consumer:
bench.peers.c_tools).

    python -m bench.peers.rdkafka_c_produce [--brokers odradek,tansu] [--sizes 100,1024]
        [--partitions 6] [--records 3000000] [--seconds 3] [--runs 1] [--library 2.16|debian]

runs the batch-size sweep that chose PRODUCER_SETTINGS: each setting of SWEEP against each
broker, with the producer's records/s and MB/s, the node's CPU per GB and per produce request,
and the batches librdkafka actually sent (its statistics' `batchsize`/`batchcnt`).

Settings: acks=1 and linger.ms=5, as the Python clients of bench.compare
(odradek.perf.confluent.producer_config); the batch and queue sizes are what a Kafka user
tunes for throughput, chosen by the sweep (bench/RESULTS.md).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.peers.base import Phase
from bench.peers.c_tools import PRODUCE_TOOL, bundled_tool

BASE: dict[str, object] = {"acks": "1", "linger.ms": 5, "compression.type": "none"}
# Throughput tuning as Kafka's docs advise: larger batches and a local queue that never blocks
# the application. A record batch stays under the brokers' message.max.bytes (1,048,588 by
# default, odradek's too): librdkafka caps a batch at min(batch.size, message.max.bytes).
_BIG_QUEUE: dict[str, object] = {"batch.num.messages": 100_000,
                                  "queue.buffering.max.messages": 2_000_000,
                                  "queue.buffering.max.kbytes": 2 * 1024 * 1024}
SWEEP: dict[str, dict[str, object]] = {
    # batch.size 1,000,000, batch.num.messages 10,000, queue 100,000 records / 1 GB
    "librdkafka defaults": {},
    "batch.size 64 KiB": {**_BIG_QUEUE, "batch.size": 64 * 1024},
    "batch.size 256 KiB": {**_BIG_QUEUE, "batch.size": 256 * 1024},
    # exactly the batch and queue settings of the Python clients (producer_config)
    "batch.size 1 MiB": {**_BIG_QUEUE, "batch.size": 1024 * 1024,
                         "message.max.bytes": 2 * 1024 * 1024},
    # the same batches with librdkafka's local queue (100,000 records / 1 GB)
    "batch.size 1 MiB, default queue": {"batch.size": 1024 * 1024, "batch.num.messages": 100_000,
                                        "message.max.bytes": 2 * 1024 * 1024},
}
SHIPPED = "batch.size 1 MiB, default queue"
PRODUCER_SETTINGS: dict[str, object] = {**BASE, **SWEEP[SHIPPED]}


def run_producer(endpoint: str, stream: str, size: int, max_records: int, max_seconds: float,
                 tool: Path, settings: dict[str, object] | None = None,
                 stats: Path | None = None) -> dict[str, Any]:
    """One run of the C producer; its JSON line (records acknowledged, bytes, seconds, ...)."""
    xs = [a for k, v in (PRODUCER_SETTINGS if settings is None else settings).items()
          for a in ("-X", f"{k}={v}")]
    cmd = [str(tool), "-b", endpoint, "-t", stream, "-n", str(max_records), "-S", str(size),
           "-d", str(max_seconds), *xs, *(["-s", str(stats)] if stats else [])]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=max_seconds + 600)
    if not out.stdout.strip():
        raise RuntimeError(f"rdkafka_produce failed ({out.returncode}): {out.stderr}")
    res = dict(json.loads(out.stdout.splitlines()[-1]))
    if res["errors"] or res["records"] < res["sent"]:
        print(f"rdkafka_produce: {res['records']} of {res['sent']} records acknowledged, "
              f"{res['errors']} delivery errors: {out.stderr.strip()[:500]}", flush=True)
    return res


def phase(res: dict[str, Any]) -> Phase:
    return Phase(int(res["records"]), int(res["bytes"]), float(res["seconds"]))


def produce_debian(endpoint: str, stream: str, size: int, max_records: int,
                   max_seconds: float) -> Phase:
    """The producer on Debian's librdkafka (`make bench-tools`)."""
    if not PRODUCE_TOOL.exists():
        raise RuntimeError(f"{PRODUCE_TOOL} is missing: run `make bench-tools`")
    return phase(run_producer(endpoint, stream, size, max_records, max_seconds, PRODUCE_TOOL))


def produce_bundled(endpoint: str, stream: str, size: int, max_records: int,
                    max_seconds: float) -> Phase:
    """The producer on confluent-kafka's bundled librdkafka 2.16."""
    return phase(run_producer(endpoint, stream, size, max_records, max_seconds,
                              bundled_tool(PRODUCE_TOOL)))


# ---------------------------------------------------------------- the sweep

def batch_stats(path: Path, topic: str) -> dict[str, float]:
    """From librdkafka's statistics lines: the topic's mean batch (bytes and records, weighted
    by the batches of each window) and the produce requests sent to the brokers."""
    nbytes = nrecs = batches = 0.0
    last: dict[str, Any] = {}
    for line in path.read_text().splitlines():
        last = json.loads(line)
        t = last.get("topics", {}).get(topic, {})
        n = t.get("batchcnt", {}).get("cnt", 0)
        batches += n
        nbytes += t.get("batchsize", {}).get("avg", 0) * n
        nrecs += t.get("batchcnt", {}).get("avg", 0) * n
    requests = sum(b.get("req", {}).get("Produce", 0) for b in last.get("brokers", {}).values())
    return {"batch_bytes": nbytes / batches if batches else 0.0,
            "batch_records": nrecs / batches if batches else 0.0,
            "produce_requests": float(requests)}


def sweep(args: argparse.Namespace) -> None:
    from bench.peers.odradek_node import OdradekSystem
    from bench.peers.tansu import TansuSystem

    tool = PRODUCE_TOOL if args.library == "debian" else bundled_tool(PRODUCE_TOOL)
    systems = {"odradek": OdradekSystem, "tansu": TansuSystem}
    print("| broker | size | setting | records/s | MB/s | node CPU s/GB | node CPU ms/request "
          "| mean batch (KiB / records) |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="odradek-c-produce-") as tmp:
        work = Path(tmp)
        for name in args.brokers.split(","):
            system = systems[name]()
            system.start(work)
            try:
                for run in range(args.runs):
                    for size in (int(s) for s in args.sizes.split(",")):
                        for label, setting in SWEEP.items():
                            stream = f"sweep-{run}-{size}-{len(label)}-{time.monotonic_ns()}"
                            system.create(stream, args.partitions)
                            stats = work / f"{stream}.stats"
                            cpu0 = system.cpu_seconds()
                            res = run_producer(system.endpoint, stream, size, args.records,
                                               args.seconds, tool, {**BASE, **setting}, stats)
                            cpu = system.cpu_seconds() - cpu0
                            st = batch_stats(stats, stream)
                            p = phase(res)
                            per_req = (f"{cpu * 1000 / st['produce_requests']:.2f}"
                                       if st["produce_requests"] else "—")
                            print(f"| {name} | {size} B | {label} | {p.records_per_sec:,.0f} | "
                                  f"{p.bytes / max(p.seconds, 1e-9) / 1e6:,.0f} | "
                                  f"{cpu / max(p.bytes / 1e9, 1e-9):.2f} | {per_req} | "
                                  f"{st['batch_bytes'] / 1024:,.0f} / "
                                  f"{st['batch_records']:,.0f} |", flush=True)
            finally:
                system.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="The C producer's batch-size sweep.")
    parser.add_argument("--brokers", default="odradek,tansu")
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--records", type=int, default=3_000_000)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--library", choices=("2.16", "debian"), default="2.16")
    sweep(parser.parse_args(argv))


if __name__ == "__main__":
    main()
