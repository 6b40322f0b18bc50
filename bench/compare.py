"""`make bench`: odradek side by side with the event stores a user could run instead.

    python -m bench.compare [--runs 3]
        [--systems odradek,odradek-columnar,odradek-rdkafka-c,odradek-rdkafka-c-2.16,tansu,
                   tansu-rdkafka-c-2.16,redis,nats,rabbitmq]
                            [--max-records 3000000] [--max-seconds 3] [--no-write]
    python -m bench.compare --quick      # 100k records, one run: checks the harness

Every system is installed when missing (Debian packages), started on loopback with its own
temp data dir, driven by its own client in child processes, and stopped. Workloads: 100 B and
1 KB records, 1 and 6 partitions (streams, for the peers), produce-only then consume-only,
produce and consume together, and end-to-end latency at fixed rates and at the maximum. odradek
runs under several clients per run: `odradek` with confluent-kafka (librdkafka in C, one Python object per
record) and `odradek-columnar` with odradek's own columnar client (record batches built from
and decoded into numpy columns), so the node's figures are shown apart from the client's;
`odradek-rdkafka-c` adds rows driven by librdkafka's C API with no Python in between:
bench/c/rdkafka_produce (acks=1, linger.ms=5, 1 MiB batches, one process) and
bench/c/rdkafka_consume (the shipped consumer settings, with the 2 GB queue 2.0.2 needs), built by `make bench-tools` against
Debian's librdkafka 2.0.2. `tansu` is Tansu 0.6, a Kafka-protocol peer driven by the same
confluent-kafka clients as `odradek`. The C clients drive both brokers too:
`odradek-rdkafka-c-2.16` and `tansu-rdkafka-c-2.16` are the same two programs linked against
confluent-kafka's bundled librdkafka 2.16 (Debian's 2.0.2 cannot talk to Tansu) with the same
settings, so their produce and consume rows (100 B and 1 KB) and node CPU per GB differ only
by the broker; they are compared with each other only (bench.compare_pairs), with a table of
issue 23's rows for the pair (and for `odradek` / `tansu`). Tansu keeps records in memory
only, odradek writes a durable log: Tansu's figures have no disk in them. Every
figure is the median of --runs runs with min and max; odradek's ratio to each peer is taken
from the same run. The physical limits (loopback TCP, sequential disk write) are measured in
the same run. Results go to bench/compare.json, the plot to bench/compare.png, and the
"Issue 3" section of bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import multiprocessing as mp
import os
import shutil
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import limits as limits_mod
from bench.compare_pairs import pair_table, ratio_by_run, ratio_pairs
from bench.peers.base import Phase
from bench.rows import aggregate, rate_label
from bench.run import git_revision, machine

HERE = Path(__file__).parent
RESULTS = HERE / "RESULTS.md"
JSON_OUT = HERE / "compare.json"
PNG_OUT = HERE / "compare.png"
BEGIN = "<!-- issue-3 results: begin (written by `python -m bench.compare`) -->"
END = "<!-- issue-3 results: end -->"
GB = 1e9
CTX = mp.get_context("spawn")

SYSTEM_NAMES = ("odradek", "odradek-columnar", "odradek-rdkafka-c", "odradek-rdkafka-c-2.16",
                "tansu", "tansu-rdkafka-c-2.16", "redis", "nats", "rabbitmq")
# odradek under each client; the rest are peers
OURS = ("odradek", "odradek-columnar", "odradek-rdkafka-c", "odradek-rdkafka-c-2.16")


def make_system(name: str, args: argparse.Namespace | None = None) -> Any:
    if name == "odradek":
        from bench.peers.odradek_node import OdradekSystem
        procs = args.odradek_processes if args is not None else (1, 1)
        return OdradekSystem(producer_processes=procs[0], consumer_processes=procs[1])
    if name == "odradek-columnar":
        from bench.peers.odradek_columnar import OdradekColumnarSystem
        procs = args.columnar_processes if args is not None else (1, 1)
        return OdradekColumnarSystem(producer_processes=procs[0], consumer_processes=procs[1])
    if name == "odradek-rdkafka-c":
        from bench.peers.odradek_rdkafka_c import OdradekRdkafkaCSystem
        return OdradekRdkafkaCSystem()
    if name == "tansu":
        from bench.peers.tansu import TansuSystem
        procs = args.odradek_processes if args is not None else (1, 1)
        return TansuSystem(producer_processes=procs[0], consumer_processes=procs[1])
    if name == "odradek-rdkafka-c-2.16":
        from bench.peers.odradek_rdkafka_c_bundled import OdradekRdkafkaCBundledSystem
        return OdradekRdkafkaCBundledSystem()
    if name == "tansu-rdkafka-c-2.16":
        from bench.peers.tansu_rdkafka_c import TansuRdkafkaCSystem
        return TansuRdkafkaCSystem()
    if name == "redis":
        from bench.peers.redis_streams import RedisSystem
        return RedisSystem()
    if name == "nats":
        from bench.peers.nats_jetstream import NatsSystem
        return NatsSystem()
    if name == "rabbitmq":
        from bench.peers.rabbitmq_streams import RabbitSystem
        return RabbitSystem()
    raise ValueError(f"unknown system {name!r}; known: {', '.join(SYSTEM_NAMES)}")


# ---------------------------------------------------------------- client calls in child processes

def _child(module: str, fn: str, args: tuple[Any, ...], out: Any, armed: Any, go: Any) -> None:
    try:
        func = getattr(importlib.import_module(module), fn)
        if armed is not None:
            armed.set()
            go.wait()
        out.put(("ok", func(*args)))
    except BaseException:
        out.put(("error", traceback.format_exc()))


class Call:
    """One client function in its own process; `armed` is set once it is imported and it then
    waits for `go` (so two clients can start together), unless go is None."""

    def __init__(self, module: str, fn: str, args: tuple[Any, ...], go: Any = None) -> None:
        self.out = CTX.Queue()
        self.armed = CTX.Event() if go is not None else None
        # not a daemon: odradek's multi-process perf tools start client processes of their own
        self.proc = CTX.Process(target=_child, args=(module, fn, args, self.out, self.armed, go))
        self.proc.start()

    def wait_armed(self, timeout: float = 120) -> None:
        self._wait(self.armed, timeout, "import its client")

    def _wait(self, event: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not event.wait(0.05):
            if not self.proc.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"client process did not {what}: {self.result(1)}")

    def result(self, timeout: float = 600) -> Any:
        try:
            status, value = self.out.get(timeout=timeout)
        finally:
            self.proc.join(10)
            if self.proc.is_alive():
                self.proc.kill()
        if status != "ok":
            raise RuntimeError(f"client failed:\n{value}")
        return value


def call(module: str, fn: str, *args: Any, timeout: float = 600) -> Any:
    return Call(module, fn, args).result(timeout)


# ---------------------------------------------------------------- workloads

class Runner:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rows: list[dict[str, Any]] = []
        self.seq = 0

    def fresh(self, system: Any, partitions: int) -> str:
        # Every phase starts with no dirty pages left by the one before: otherwise the
        # kernel's writeback of earlier phases' gigabytes (its CPU and disk) lands on
        # whichever phase and system come next, and the latency phases most of all.
        os.sync()
        self.seq += 1
        stream = f"bench-{self.seq}-{int(time.time())}"
        system.create(stream, partitions)
        return stream

    def add(self, system: str, workload: str, run: int, size: int, partitions: int,
            phase: Phase | None = None, cpu: float | None = None, **extra: Any) -> None:
        row: dict[str, Any] = {"system": system, "workload": workload, "run": run,
                               "size": size, "partitions": partitions, **extra}
        if phase is not None:
            row.update(records=phase.records, bytes=phase.bytes, seconds=phase.seconds,
                       records_per_sec=phase.records_per_sec, mb_per_sec=phase.mb_per_sec)
            if cpu is not None and phase.bytes:
                row.update(cpu_s=cpu, cpu_s_per_gb=cpu / (phase.bytes / GB))
        self.rows.append(row)
        self.report(row)

    @staticmethod
    def report(row: dict[str, Any]) -> None:
        head = (f"{row['system']:>16} {row['workload']:<17} {row['size']:>5} B "
                f"{row['partitions']}p run {row['run']}: ")
        if "p99_ms" in row:
            print(head + f"{row['records_per_sec']:>11,.0f} rec/s  p50 {row['p50_ms']:.2f} "
                  f"p99 {row['p99_ms']:.2f} p99.9 {row['p999_ms']:.2f} ms", flush=True)
        else:
            cpu = f"  server {row['cpu_s_per_gb']:.1f} CPU s/GB" if "cpu_s_per_gb" in row else ""
            print(head + f"{row['records_per_sec']:>11,.0f} rec/s {row['mb_per_sec']:8.1f} MB/s"
                  + cpu, flush=True)

    def throughput(self, system: Any, run: int, size: int, partitions: int) -> None:
        a = self.args
        client = system.client
        ep = system.endpoint
        stream = self.fresh(system, partitions)
        cpu0 = system.cpu_seconds()
        nprod = getattr(system, "producer_processes", 1)
        ncons = getattr(system, "consumer_processes", 1)
        prod = call(client, "produce", ep, stream, partitions, size, a.max_records, a.max_seconds,
                    *((nprod,) if nprod > 1 else ()))
        cpu1 = system.cpu_seconds()
        cons = call(client, "consume", ep, stream, partitions, size, prod.records, None, None,
                    None, a.idle_timeout, *((ncons,) if ncons > 1 else ()))
        cpu2 = system.cpu_seconds()
        self.add(system.name, "produce", run, size, partitions, prod, cpu1 - cpu0)
        self.add(system.name, "consume", run, size, partitions, cons, cpu2 - cpu1)
        if cons.records < prod.records:
            print(f"  warning: {system.name} consumed {cons.records} of {prod.records}",
                  flush=True)

        if not getattr(system, "together", True):
            return
        # Produce and consume together: both clients imported and connected, then go.
        stream = self.fresh(system, partitions)
        go = CTX.Event()
        ready = CTX.Event()
        total = CTX.Value("q", -1)
        consumer = Call(client, "consume", (ep, stream, partitions, size, a.max_records, total,
                                            ready, go, a.idle_timeout), go=None)
        producer = Call(client, "produce", (ep, stream, partitions, size, a.max_records,
                                            a.max_seconds), go=go)
        consumer._wait(ready, 120, "connect")
        producer.wait_armed()
        cpu0 = system.cpu_seconds()
        go.set()
        prod = producer.result()
        total.value = prod.records
        cons = consumer.result()
        cpu1 = system.cpu_seconds()
        self.add(system.name, "together-produce", run, size, partitions, prod, cpu1 - cpu0)
        self.add(system.name, "together-consume", run, size, partitions, cons)

    def latency(self, system: Any, run: int, rate: float) -> None:
        a = self.args
        size, partitions = 100, a.e2e_partitions
        stream = self.fresh(system, partitions)
        expected = CTX.Value("q", -1)
        ready = CTX.Event()
        consumer = Call(system.client, "e2e_consume",
                        (system.endpoint, stream, partitions, expected, a.idle_timeout, ready))
        consumer._wait(ready, 120, "connect")
        sent, seconds = call(system.client, "e2e_produce", system.endpoint, stream, partitions,
                             size, rate, a.e2e_seconds, a.warmup)
        expected.value = sent
        count, latencies = consumer.result()
        latencies.sort()
        n = len(latencies)

        def pct(q: float) -> float:
            return latencies[min(n - 1, int(q * n))] if n else float("nan")

        phase = Phase(n, n * size, seconds)
        label = f"e2e@{rate_label(rate)}"
        self.add(system.name, label, run, size, partitions, phase, rate=rate,
                 p50_ms=pct(0.5), p99_ms=pct(0.99), p999_ms=pct(0.999), lost=sent - count)

    def native(self, system: Any, run: int) -> None:
        """A peer's own benchmark tool (redis-benchmark), as a system of its own."""
        for size in self.args.sizes:
            for workload, phase in system.native_benchmark(size, self.args.max_records):
                self.add(f"{system.name}-benchmark", workload, run, size, 1, phase)


# ---------------------------------------------------------------- RESULTS.md

def fmt_rate(agg: dict[str, Any] | None, field: str = "records_per_sec") -> str:
    if not agg or field not in agg:
        return "—"
    v = agg[field]
    if agg.get("runs", 1) == 1:
        return f"{v['median']:,.0f}"
    return f"{v['median']:,.0f} ({v['min']:,.0f}-{v['max']:,.0f})"


def fmt_ms(agg: dict[str, Any] | None) -> str:
    if not agg or "p99_ms" not in agg:
        return "—"
    return (f"{agg['p50_ms']['median']:.2f} / {agg['p99_ms']['median']:.2f} / "
            f"{agg['p999_ms']['median']:.2f}")


def _process_line(a: dict[str, Any]) -> str:
    procs = a.get("odradek_processes") or (1, 1)
    columnar = a.get("columnar_processes")
    more = (f"; odradek-columnar produce-only {columnar[0]}, consume-only {columnar[1]} "
            "(no together or end-to-end phases)" if columnar and
            "odradek-columnar" in a.get("systems", ()) else "")
    return (f"- client processes: odradek produce-only {procs[0]}, consume-only {procs[1]} "
            "(each its own confluent-kafka client, started together, rate = all records / "
            f"(start barrier to last finish)){more}; every other phase and every peer: one "
            "producer and one consumer process")


def _ratio_cell(rows: list[dict[str, Any]], agg: dict[tuple[str, str, int, int], dict[str, Any]],
                ours: str, peer: str, workload: str, size: int, partitions: int) -> str:
    if peer.endswith("-benchmark"):
        # a peer's own tool ran once per run on one stream: medians against medians
        mine = agg.get((ours, workload, size, partitions))
        theirs = agg.get((peer, workload, size, 1))
        rs = ([mine["records_per_sec"]["median"] / theirs["records_per_sec"]["median"]]
              if mine and theirs and theirs["records_per_sec"]["median"] else [])
    else:
        rs = ratio_by_run(rows, peer, workload, size, partitions, "records_per_sec", ours)
    return f"{statistics.median(rs):.2f}x" if rs else "—"


def render(data: dict[str, Any]) -> str:
    rows = data["rows"]
    agg = aggregate(rows)
    systems = [s for s in data["systems_order"] if any(r["system"] == s for r in rows)]
    peers = [s for s in systems if s not in OURS]
    ours = [s for s in systems if s in OURS]
    pairs = ratio_pairs(ours, peers)
    lim = data["limits"]
    a = data["args"]
    lines = [
        f"## Issue 3: side by side, {data['runs']} run(s) per figure",
        "",
        f"- date: {data['date']}, revision {data['revision']}; "
        f"machine: {data['machine']}",
        f"- **{data['note']}**" if data.get("note") else "",
        f"- load average at start / end: {data['load_start']} / {data['load_end']}; "
        f"whole comparison took {data['elapsed_s'] / 60:.1f} min",
        f"- per phase: at most {a['max_records']:,} records or {a['max_seconds']} s; "
        f"end to end: {a['e2e_seconds']} s measured after {a['warmup']} s warm-up, 100 B, "
        f"{a['e2e_partitions']} partitions; every phase starts after a `sync` (no dirty pages "
        "left by the phase before)",
        "- each cell: median (min-max) over the runs; ratios: odradek (under each client) / "
        "peer, median of the per-run ratios",
        _process_line(a),
        "- physical limits, same run: " + "; ".join(lim["lines"]),
        "",
        "![throughput and latency per system](compare.png)",
        "",
        "Systems:",
        "",
        *[f"- `{s}`: {data['descriptions'].get(s, '')}" for s in systems],
        "",
        "### Throughput, records/s",
        "",
        "| workload | size | partitions | "
        + " | ".join([*systems, *(f"{o} / {p}" for o, p in pairs)]) + " |",
        "|---|---:|---:|" + "---:|" * (len(systems) + len(pairs)),
    ]
    workloads = ["produce", "consume", "together-produce", "together-consume"]
    for workload in workloads:
        for size in a["sizes"]:
            for partitions in a["partitions"]:
                cells = []
                for s in systems:
                    part = partitions
                    if s.endswith("-benchmark"):
                        part = 1
                    cells.append(fmt_rate(agg.get((s, workload, size, part))))
                ratios = [_ratio_cell(rows, agg, o, p, workload, size, partitions)
                          for o, p in pairs]
                lines.append(f"| {workload} | {size} B | {partitions} | "
                             + " | ".join([*cells, *ratios]) + " |")
    lines += ["", "### Throughput, MiB/s (record bytes)", "",
              "| workload | size | partitions | " + " | ".join(systems) + " |",
              "|---|---:|---:|" + "---:|" * len(systems)]
    for workload in ("produce", "consume"):
        for size in a["sizes"]:
            for partitions in a["partitions"]:
                cells = [fmt_rate(agg.get((s, workload, size,
                                           1 if s.endswith("-benchmark") else partitions)),
                                  "mb_per_sec") for s in systems]
                lines.append(f"| {workload} | {size} B | {partitions} | " + " | ".join(cells) + " |")
    lat_systems = [s for s in systems if not s.endswith("-benchmark")]
    lines += ["", "### End-to-end latency, ms: p50 / p99 / p99.9 (median over runs), and the "
              "rate reached", "",
              "| rate | " + " | ".join(lat_systems) + " |",
              "|---|" + "---|" * len(lat_systems)]
    for rate in a["rates"]:
        label = f"e2e@{rate_label(rate)}"
        cells = []
        for s in lat_systems:
            g = agg.get((s, label, 100, a["e2e_partitions"]))
            cells.append(f"{fmt_ms(g)} at {fmt_rate(g)}/s" if g else "—")
        lines.append(f"| {rate_label(rate)} | " + " | ".join(cells) + " |")
    cpu_pairs = [(o, p) for o, p in pairs if not p.endswith("-benchmark")]
    lines += ["", "### Server CPU seconds per GB of record bytes (median; ratios: odradek's CPU "
              "/ the peer's, below 1 means odradek used less)", "",
              "| workload | size | partitions | "
              + " | ".join([*lat_systems, *(f"{o} / {p}" for o, p in cpu_pairs)]) + " |",
              "|---|---:|---:|" + "---:|" * (len(lat_systems) + len(cpu_pairs))]
    for workload in ("produce", "consume"):
        for size in a["sizes"]:
            for partitions in a["partitions"]:
                cells = []
                for s in lat_systems:
                    g = agg.get((s, workload, size, partitions))
                    cells.append(f"{g['cpu_s_per_gb']['median']:.1f}"
                                 if g and "cpu_s_per_gb" in g else "—")
                for o, p in cpu_pairs:
                    rs = ratio_by_run(rows, p, workload, size, partitions, "cpu_s_per_gb", o)
                    cells.append(f"{statistics.median(rs):.2f}x" if rs else "—")
                lines.append(f"| {workload} | {size} B | {partitions} | " + " | ".join(cells) + " |")
    for o, p in pairs:
        if p == o.replace("odradek", "tansu", 1):  # the Kafka peer under the same clients
            lines += ["", *pair_table(rows, o, p, max(a["partitions"]))]
    lines += ["", "### Issue 3 targets (2-core machine)", "", *targets(agg, rows, peers, ours), ""]
    return "\n".join(line for line in lines if line is not None) + "\n"


def targets(agg: dict[tuple[str, str, int, int], dict[str, Any]], rows: list[dict[str, Any]],
            peers: list[str], ours: list[str] | None = None) -> list[str]:
    """One row per target, one column per client odradek was driven by."""
    ours = ours or ["odradek"]

    def med(key: tuple[str, str, int, int], field: str = "records_per_sec") -> float | None:
        g = agg.get(key)
        return g[field]["median"] if g and field in g else None

    def shown(value: float | None, ok: bool | None, unit: str) -> str:
        if value is None:
            return "not measured"
        text = f"{value:,.2f}{unit}" if value < 100 else f"{value:,.0f}{unit}"
        return text if ok is None else f"{text} ({'holds' if ok else 'no'})"

    out = ["| target | " + " | ".join(f"`{o}`" for o in ours) + " |",
           "|---|" + "---:|" * len(ours)]
    # each client's best peer is among the peers driven by the same client (ratio_pairs): a C
    # client's rows meet only the peer the same C programs drive
    def best_v(o: str) -> float | None:
        best = [med((p, "produce", 100, 1 if p.endswith("-benchmark") else 6))
                for mine, p in ratio_pairs([o], peers) if mine == o]
        return max((b for b in best if b), default=None)

    def produce(o: str) -> tuple[float | None, bool | None]:
        v = med((o, "produce", 100, 6))
        return v, None if v is None else v >= 1_000_000

    def ratio(o: str) -> tuple[float | None, bool | None]:
        v, b = med((o, "produce", 100, 6)), best_v(o)
        r = v / b if v and b else None
        return r, None if r is None else r >= 2.5

    def consume(o: str) -> tuple[float | None, bool | None]:
        v = med((o, "consume", 100, 6))
        return v, None if v is None else v >= 2_000_000

    def kb(o: str) -> tuple[float | None, bool | None]:
        v = med((o, "produce", 1024, 6), "mb_per_sec")
        v = None if v is None else v * 1.048576  # MiB/s -> MB/s
        return v, None if v is None else v >= 800

    def e2e(o: str) -> tuple[float | None, bool | None]:
        v = med((o, "e2e@100k", 100, 6), "p99_ms")
        return v, None if v is None else v <= 5

    def cpu(o: str) -> tuple[float | None, bool | None]:
        return med((o, "produce", 100, 6), "cpu_s_per_gb"), None

    for name, fn, unit in (
            ("produce 100 B, 6 partitions, acks=1 >= 1,000,000 records/s", produce, ""),
            ("produce 100 B >= 2.5x the best peer under the same client, same run", ratio, "x"),
            ("consume 100 B >= 2,000,000 records/s", consume, ""),
            ("produce 1 KB >= 800 MB/s", kb, " MB/s"),
            ("end to end at 100k records/s: p99 <= 5 ms", e2e, " ms"),
            ("node CPU per GB produced (100 B, 6 partitions), reported", cpu, " CPU s/GB")):
        out.append(f"| {name} | " + " | ".join(shown(*fn(o), unit) for o in ours) + " |")
    return out


def update_results(section: str, path: Path = RESULTS) -> None:
    block = f"{BEGIN}\n{section.rstrip()}\n{END}\n"
    text = path.read_text() if path.exists() else "# Benchmark results\n\n"
    if BEGIN in text and END in text:
        start = text.index(BEGIN)
        stop = text.index(END) + len(END)
        text = text[:start] + block.rstrip("\n") + text[stop:]
    else:
        text = text.rstrip() + "\n\n" + block
    path.write_text(text)


# ---------------------------------------------------------------- main

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="Runs per figure (median, min, max).")
    parser.add_argument("--systems", default=",".join(SYSTEM_NAMES))
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--partitions", default="1,6")
    parser.add_argument("--rates", default="10000,100000,0",
                        help="End-to-end latency rates, records/s (0 = the maximum).")
    # 3M: at 1-4M records/s the columnar client needs that many for a phase of a second or more
    parser.add_argument("--max-records", type=int, default=3_000_000)
    parser.add_argument("--max-seconds", type=float, default=3.0)
    parser.add_argument("--e2e-seconds", type=float, default=3.0)
    parser.add_argument("--e2e-partitions", type=int, default=6)
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument("--idle-timeout", type=float, default=5.0,
                        help="A consumer stops after this many seconds without a record.")
    parser.add_argument("--odradek-processes", default="2,1", metavar="PRODUCERS,CONSUMERS",
                        help="Client processes for odradek's produce-only and consume-only "
                             "phases (each its own confluent-kafka client).")
    parser.add_argument("--columnar-processes", default="1,2", metavar="PRODUCERS,CONSUMERS",
                        help="Client processes for odradek-columnar's produce-only and "
                             "consume-only phases.")
    parser.add_argument("--no-native", action="store_true", help="Skip redis-benchmark.")
    parser.add_argument("--note", default="",
                        help="A line for RESULTS.md, e.g. that the machine was busy.")
    parser.add_argument("--quick", action="store_true",
                        help="Check the harness: 100k records, 1 run, 2 s phases.")
    parser.add_argument("--no-write", action="store_true", help="Leave RESULTS.md alone.")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument("--render-only", action="store_true",
                        help="Measure nothing: rewrite RESULTS.md and the plot from compare.json.")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs = 1
        args.max_records = 100_000
        args.max_seconds = 2.0
        args.e2e_seconds = 1.5
    args.sizes = [int(s) for s in args.sizes.split(",")]
    args.partitions = [int(s) for s in args.partitions.split(",")]
    args.rates = [float(s) for s in args.rates.split(",")]
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    args.odradek_processes = _pair(args.odradek_processes)
    args.columnar_processes = _pair(args.columnar_processes)
    return args


def _pair(text: str) -> tuple[int, int]:
    first, _, second = text.partition(",")
    return int(first), int(second or first)


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run_system(runner: Runner, name: str, workdir: Path, run: int,
               log: Callable[[str], None]) -> str:
    a = runner.args
    system = make_system(name, a)
    log(f"# {name}, run {run}: starting")
    # Each system's run gets its own directory, removed after the run: a full comparison
    # writes tens of GB, and a full disk fails the runs after it (KAFKA_STORAGE_ERROR).
    workdir = Path(tempfile.mkdtemp(prefix=f"{name}-{run}-", dir=workdir))
    system.start(workdir)
    try:
        for size in a.sizes:
            for partitions in a.partitions:
                runner.throughput(system, run, size, partitions)
        for rate in a.rates if getattr(system, "latency", True) else ():
            runner.latency(system, run, rate)
        if hasattr(system, "native_benchmark") and not a.no_native:
            runner.native(system, run)
    finally:
        system.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return getattr(system, "description", name)


def render_only() -> int:
    data = json.loads(JSON_OUT.read_text())
    from bench import plot

    plot.plot(data, PNG_OUT)
    update_results(render(data))
    print(f"wrote {RESULTS}, {PNG_OUT.name} from {JSON_OUT.name}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render_only:
        return render_only()
    for name in args.systems:
        make_system(name)  # unknown names fail before anything runs
    started = time.monotonic()
    load_start = load_average()
    runner = Runner(args)
    descriptions: dict[str, str] = {}
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="odradek-compare-") as tmp:
        workdir = Path(tmp)
        print("# physical limits", flush=True)
        lim = limits_mod.measure(workdir)
        for line in lim.lines():
            print(line, flush=True)
        # Runs interleave the systems so a slow spell of the machine hits all of them.
        for run in range(1, args.runs + 1):
            for name in args.systems:
                try:
                    descriptions[name] = run_system(runner, name, workdir, run, print)
                except Exception:
                    failures.append(f"{name}, run {run}: {traceback.format_exc()}")
                    print(failures[-1], file=sys.stderr, flush=True)
    if "redis" in args.systems and not args.no_native:
        descriptions["redis-benchmark"] = ("redis-benchmark (Redis' own C tool) against the same "
                                           "redis-server: XADD, pipelined, one stream; consume = "
                                           "XRANGE COUNT 100 records per request")
    m = machine()
    data = {
        "date": dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "revision": git_revision(),
        "machine": f"{m.cores} cores ({m.cpu_model}), Linux {m.kernel}, Python {m.python}",
        "note": args.note,
        "runs": args.runs,
        "load_start": load_start,
        "load_end": load_average(),
        "elapsed_s": time.monotonic() - started,
        "args": {k: v for k, v in vars(args).items()},
        "limits": {"loopback_mb_per_sec": lim.loopback_mb_per_sec,
                   "disk_buffered_mb_per_sec": lim.disk_buffered_mb_per_sec,
                   "disk_fsync_mb_per_sec": lim.disk_fsync_mb_per_sec, "lines": lim.lines()},
        "systems_order": [*args.systems[:1],
                          *(["redis-benchmark"] if "redis" in args.systems else []),
                          *args.systems[1:]] if args.systems else [],
        "descriptions": descriptions,
        "rows": runner.rows,
        "failures": failures,
    }
    # odradek first, then each peer with its native tool right after it.
    order = []
    for s in args.systems:
        order.append(s)
        if s == "redis" and not args.no_native:
            order.append("redis-benchmark")
    data["systems_order"] = order
    section = render(data)
    print(section)
    if not args.no_write:
        JSON_OUT.write_text(json.dumps(data, indent=1, default=str) + "\n")
        if not args.no_plot:
            try:
                from bench import plot

                plot.plot(data, PNG_OUT)
            except Exception:
                failures.append(f"plot: {traceback.format_exc()}")
                print(failures[-1], file=sys.stderr, flush=True)
        update_results(section)
        print(f"wrote {RESULTS}, {JSON_OUT.name}, {PNG_OUT.name}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
