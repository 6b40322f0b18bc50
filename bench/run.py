"""`make bench`: a fresh node, the producer then the consumer benchmark, numbers into RESULTS.md.

    python -m bench.run [--num-records 1000000] [--record-size 100] [--partitions 6] [--acks 1]

The node runs as its own process (tests/support/broker.py); its CPU seconds are read with
psutil before and after each phase and reported per GB of record bytes moved.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import os
import platform
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import psutil
from tests.support.broker import BrokerProcess

from bench import consumer_perf, producer_perf
from bench.topics import ensure_topic

RESULTS = Path(__file__).with_name("RESULTS.md")
BEGIN = "<!-- issue-2 results: begin (written by `python -m bench.run`) -->"
END = "<!-- issue-2 results: end -->"
GB = 1e9


class Tee(io.TextIOBase):
    """Print to stdout and keep a copy for RESULTS.md."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def write(self, s: str) -> int:
        sys.stdout.write(s)
        self.lines.append(s)
        return len(s)

    def flush(self) -> None:
        sys.stdout.flush()

    def text(self) -> str:
        return "".join(self.lines)


def cpu_seconds(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system + t.children_user + t.children_system


@dataclass
class Machine:
    cores: int
    cpu_model: str
    python: str
    kernel: str


def machine() -> Machine:
    model = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return Machine(os.cpu_count() or 0, model, platform.python_version(), platform.release())


def git_revision() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=True, cwd=Path(__file__).parent)
        dirty = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True,
                               cwd=Path(__file__).parent).stdout.strip()
        return out.stdout.strip() + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def update_results(section: str, path: Path = RESULTS) -> None:
    block = f"{BEGIN}\n{section.rstrip()}\n{END}\n"
    text = path.read_text() if path.exists() else "# Benchmark results\n\n"
    if BEGIN in text and END in text:
        text = re.sub(re.escape(BEGIN) + r".*?" + re.escape(END) + r"\n?", lambda _: block, text,
                      flags=re.S)
    else:
        text = text.rstrip() + "\n\n" + block
    path.write_text(text)


def _multi_row(multi: consumer_perf.ConsumerResult | None, processes: int, cpu: float) -> str:
    if multi is None:
        return ""
    gb = multi.bytes / GB
    return (f"| consume ({processes} processes) | {multi.records_per_sec:,.0f} | "
            f"{multi.mb_per_sec:.1f} | | {cpu:.2f} | {cpu / max(gb, 1e-12):.1f} |")


def _settings(values: dict[str, str]) -> str:
    return ", ".join(f"`{k}={v}`" for k, v in values.items()) or "none"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-records", type=int, default=1_000_000)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--acks", default="1")
    parser.add_argument("--topic", default="perf")
    parser.add_argument("--node-set", action="append", default=[], metavar="KEY=VALUE",
                        help="A config for the node, as `odradek serve --set` (repeatable).")
    parser.add_argument("--producer-config", action="append", default=[], metavar="KEY=VALUE",
                        help="A librdkafka producer setting for the benchmark (repeatable).")
    parser.add_argument("--consumer-config", action="append", default=[], metavar="KEY=VALUE",
                        help="A librdkafka consumer setting for the benchmark (repeatable).")
    parser.add_argument("--consumer-processes", type=int, default=2,
                        help="After the one-process consumer run, also read with this many "
                             "consumer processes splitting the partitions (1: skip).")
    parser.add_argument("--no-write", action="store_true", help="Do not touch RESULTS.md.")
    args = parser.parse_args(argv)
    settings = dict(kv.split("=", 1) for kv in args.node_set)
    producer_extra = dict(kv.split("=", 1) for kv in args.producer_config)
    consumer_extra = dict(kv.split("=", 1) for kv in args.consumer_config)

    tee = Tee()
    with tempfile.TemporaryDirectory(prefix="odradek-bench-") as tmp:
        node = BrokerProcess(Path(tmp) / "data", settings=settings)
        node.start()
        try:
            proc = psutil.Process(node.proc.pid)  # type: ignore[union-attr]
            ensure_topic(node.bootstrap, args.topic, args.partitions)
            cpu0 = cpu_seconds(proc)
            prod = producer_perf.run(node.bootstrap, args.topic, args.num_records,
                                     args.record_size, args.acks, producer_extra, out=tee)
            cpu1 = cpu_seconds(proc)
            cons = consumer_perf.run(node.bootstrap, args.topic, prod.records,
                                     extra=consumer_extra, out=tee)
            cpu2 = cpu_seconds(proc)
            multi = None
            if args.consumer_processes > 1:
                print(f"# {args.consumer_processes} consumer processes", file=tee)
                multi = consumer_perf.run(node.bootstrap, args.topic, prod.records,
                                          extra=consumer_extra, out=tee,
                                          processes=args.consumer_processes)
            cpu3 = cpu_seconds(proc)
        finally:
            node.stop()
    produced_gb = prod.records * args.record_size / GB
    consumed_gb = cons.bytes / GB
    produce_cpu = cpu1 - cpu0
    consume_cpu = cpu2 - cpu1
    m = machine()
    summary = (
        f"node CPU: produce {produce_cpu:.2f} s ({produce_cpu / max(produced_gb, 1e-12):.1f} "
        f"CPU s/GB), consume {consume_cpu:.2f} s "
        f"({consume_cpu / max(consumed_gb, 1e-12):.1f} CPU s/GB)"
    )
    print(summary)
    section = f"""## Issue 2: one node, confluent-kafka, {args.num_records:,} records of {args.record_size} B, {args.partitions} partitions, acks={args.acks}

- date: {dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")}, revision {git_revision()}
- node settings: {_settings(settings)}; producer overrides: {_settings(producer_extra)}; consumer overrides: {_settings(consumer_extra)}
- machine: {m.cores} cores ({m.cpu_model}), Linux {m.kernel}, Python {m.python}; node, producer and consumer share the machine
- bar for issue 2: >= 500,000 records/s produced, >= 1,000,000 records/s consumed

| | records/s | MB/s | latency avg / p50 / p99 / p99.9 / max (ms) | node CPU s | node CPU s per GB |
|---|---:|---:|---|---:|---:|
| produce | {prod.records_per_sec:,.0f} | {prod.mb_per_sec:.1f} | {prod.avg_latency_ms:.1f} / {prod.percentiles_ms['50']:.0f} / {prod.percentiles_ms['99']:.0f} / {prod.percentiles_ms['99.9']:.0f} / {prod.max_latency_ms:.0f} | {produce_cpu:.2f} | {produce_cpu / max(produced_gb, 1e-12):.1f} |
| consume (1 process) | {cons.records_per_sec:,.0f} | {cons.mb_per_sec:.1f} | | {consume_cpu:.2f} | {consume_cpu / max(consumed_gb, 1e-12):.1f} |
{_multi_row(multi, args.consumer_processes, cpu3 - cpu2)}

Tool output:

```
{tee.text().rstrip()}
```
"""
    if not args.no_write:
        update_results(section)
        print(f"wrote {RESULTS}")
    failed = prod.errors or cons.records < prod.records or (
        multi is not None and multi.records < prod.records)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
