"""`make bench`: a fresh node, the producer then the consumer benchmark, numbers into RESULTS.md.

    python -m bench.run [--num-records 1000000] [--record-size 100] [--partitions 6] [--acks 1]
                        [--producer-processes 1,2] [--consumer-processes 1,2] [--profile DIR]

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
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
from tests.support.broker import BrokerProcess

from odradek.client.admin import ensure_topic
from odradek.perf import confluent, results
from odradek.perf import runs as perf_runs

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


def _settings(values: dict[str, str]) -> str:
    return ", ".join(f"`{k}={v}`" for k, v in values.items()) or "none"


def _counts(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _per_gb(cpu: float, nbytes: int) -> float:
    return cpu / max(nbytes / GB, 1e-12)


def _procs(n: int) -> str:
    return f"{n} process" + ("es" if n > 1 else "")


class Profiler:
    """py-spy on the node for one phase: collapsed stacks of the thread holding the GIL (so a
    node preempted by its clients on a busy machine is not counted as busy) and the hottest
    frames as text."""

    def __init__(self, out_dir: Path | None, pid: int) -> None:
        self.out_dir = out_dir
        self.pid = pid
        self.proc: subprocess.Popen[bytes] | None = None
        self.raw: Path | None = None

    def start(self, name: str) -> None:
        if self.out_dir is None:
            return
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.raw = self.out_dir / f"{name}.txt"
        # raw (collapsed stacks): turned into an SVG and a top-frames table afterwards
        self.proc = subprocess.Popen(
            [str(Path(sys.executable).with_name("py-spy")), "record", "--pid", str(self.pid),
             "--format", "raw", "--output", str(self.raw), "--rate", "200", "--gil"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)  # py-spy attaches

    def stop(self) -> str:
        if self.proc is None or self.raw is None:
            return ""
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None
        return top_frames(self.raw)


def top_frames(raw: Path, n: int = 15) -> str:
    """Self time per frame from py-spy's collapsed stacks, idle waits left out."""
    own: dict[str, int] = {}
    total = 0
    try:
        lines = raw.read_text().splitlines()
    except OSError:
        return ""
    for line in lines:
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        leaf = stack.rsplit(";", 1)[-1]
        if any(idle in leaf for idle in ("select (selectors", "wait (threading", "_worker (")):
            continue
        own[leaf] = own.get(leaf, 0) + int(count)
        total += int(count)
    rows = sorted(own.items(), key=lambda kv: -kv[1])[:n]
    return "\n".join(f"{100 * c / max(total, 1):5.1f}%  {frame}" for frame, c in rows)


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
    parser.add_argument("--producer-processes", default="1,2", metavar="N[,N...]",
                        help="Produce runs, one per count of producer processes sharing the "
                             "records (each run into its own topic).")
    parser.add_argument("--consumer-processes", default="1,2", metavar="N[,N...]",
                        help="Consume runs (of the first produce run's topic), one per count "
                             "of consumer processes splitting the partitions.")
    parser.add_argument("--columnar-processes", default="1", metavar="N[,N...]",
                        help="Extra consume runs on odradek's own columnar Fetch client (not "
                             "confluent-kafka), one per count of processes; empty for none.")
    parser.add_argument("--consumer-batch", type=int, default=results.DEFAULT_BATCH,
                        help="consume(num_messages=...) per call.")
    parser.add_argument("--profile", type=Path, default=None, metavar="DIR",
                        help="Record the node with py-spy during every phase into DIR.")
    parser.add_argument("--no-write", action="store_true", help="Do not touch RESULTS.md.")
    args = parser.parse_args(argv)
    settings = dict(kv.split("=", 1) for kv in args.node_set)
    producer_extra = dict(kv.split("=", 1) for kv in args.producer_config)
    consumer_extra = dict(kv.split("=", 1) for kv in args.consumer_config)

    tee = Tee()
    load_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    produced: list[tuple[int, results.ProducerResult, float]] = []
    consumed: list[tuple[str, int, results.ConsumerResult, float]] = []
    profiles: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="odradek-bench-") as tmp:
        node = BrokerProcess(Path(tmp) / "data", settings=settings)
        node.start()
        try:
            proc = psutil.Process(node.proc.pid)  # type: ignore[union-attr]
            profiler = Profiler(args.profile, proc.pid)
            first_topic = ""
            for n in _counts(args.producer_processes):
                topic = f"{args.topic}-{n}p"
                first_topic = first_topic or topic
                ensure_topic(node.bootstrap, topic, args.partitions)
                profiler.start(f"produce-{n}p")
                cpu0 = cpu_seconds(proc)
                prod = perf_runs.run_producer(node.bootstrap, topic, args.num_records,
                                         args.record_size, args.acks, producer_extra, out=tee,
                                         processes=n)
                produced.append((n, prod, cpu_seconds(proc) - cpu0))
                if args.profile:
                    profiles.append((f"produce, {_procs(n)}", profiler.stop()))
            expected = produced[0][1].records
            runs = [(results.CONFLUENT, n) for n in _counts(args.consumer_processes)]
            runs += [(results.COLUMNAR, n) for n in _counts(args.columnar_processes)]
            for client, n in runs:
                profiler.start(f"consume-{client}-{n}p")
                cpu0 = cpu_seconds(proc)
                cons = perf_runs.run_consumer(node.bootstrap, first_topic, expected,
                                         extra=consumer_extra, out=tee, processes=n,
                                         batch=args.consumer_batch, client=client)
                consumed.append((client, n, cons, cpu_seconds(proc) - cpu0))
                if args.profile:
                    profiles.append((f"consume {client}, {_procs(n)}", profiler.stop()))
        finally:
            node.stop()
    load_end = " ".join(f"{x:.2f}" for x in os.getloadavg())
    for n, prod, cpu in produced:
        print(f"node CPU, produce with {_procs(n)}: {cpu:.2f} s "
              f"({_per_gb(cpu, prod.bytes):.2f} CPU s/GB)")
    for client, n, cons, cpu in consumed:
        print(f"node CPU, consume ({client}) with {_procs(n)}: {cpu:.2f} s "
              f"({_per_gb(cpu, cons.bytes):.2f} CPU s/GB); client CPU "
              f"{cons.cpu_per_million:.2f} s per 1M records")
    print(f"load average at start / end: {load_start} / {load_end}")
    for name, table in profiles:
        print(f"# node's busiest frames, {name}\n{table}")
    m = machine()
    rows = []
    for n, prod, cpu in produced:
        p = prod.percentiles_ms
        rows.append(f"| produce ({_procs(n)}) | {prod.records_per_sec:,.0f} | "
                    f"{prod.mb_per_sec:.1f} | {prod.avg_latency_ms:.1f} / {p['50']:.0f} / "
                    f"{p['99']:.0f} / {p['99.9']:.0f} / {prod.max_latency_ms:.0f} | {cpu:.2f} | "
                    f"{_per_gb(cpu, prod.bytes):.1f} | |")
    for client, n, cons, cpu in consumed:
        label = (f"consume, odradek's own columnar client, not confluent-kafka ({_procs(n)})"
                 if client == results.COLUMNAR else f"consume ({_procs(n)})")
        rows.append(f"| {label} | {cons.records_per_sec:,.0f} | "
                    f"{cons.mb_per_sec:.1f} | | {cpu:.2f} | {_per_gb(cpu, cons.bytes):.1f} | "
                    f"{cons.cpu_per_million:.2f} |")
    table = "\n".join(rows)
    consumer_conf = {k: v for k, v in confluent.consumer_config(None, consumer_extra).items()
                     if k not in ("bootstrap.servers", "group.id")}
    section = f"""## Issue 2: one node, confluent-kafka, {args.num_records:,} records of {args.record_size} B, {args.partitions} partitions, acks={args.acks}

- date: {dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")}, revision {git_revision()}
- node settings: {_settings(settings)}; producer overrides: {_settings(producer_extra)}; consumer settings: {_settings({k: str(v) for k, v in consumer_conf.items()})}, consume(num_messages={args.consumer_batch})
- machine: {m.cores} cores ({m.cpu_model}), Linux {m.kernel}, Python {m.python}; node, producers and consumers share the machine; load average at start / end: {load_start} / {load_end}
- bar for issue 2: >= 500,000 records/s produced, >= 1,000,000 records/s consumed
- N processes = N client processes, each with its own confluent-kafka client, started together; rate = all records / (barrier to last finish)
- "odradek's own columnar client" rows are not confluent-kafka: odradek.perf.columnar_consumer, one Fetch v11 connection per partition, record batches CRC-checked and decoded into numpy columns (no Python object per record); client CPU = CPU seconds of the client process(es), every thread, per million records consumed

| | records/s | MB/s | latency avg / p50 / p99 / p99.9 / max (ms) | node CPU s | node CPU s per GB | client CPU s per 1M records |
|---|---:|---:|---|---:|---:|---:|
{table}

Tool output:

```
{tee.text().rstrip()}
```
"""
    if not args.no_write:
        update_results(section)
        print(f"wrote {RESULTS}")
    failed = any(prod.errors for _, prod, _ in produced) or any(
        cons.records < expected or cons.errors for _, _, cons, _ in consumed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
