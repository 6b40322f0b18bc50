"""Issue 3, what bounds it: CPU seconds per record on the client side and on the node side.

    python -m bench.bounds [--records 2000000] [--kb-records N] [--runs 1] [--processes 1]
                           [--write] [--profile [--profile-dir DIR]] [--quick]

One odradek node (tests/support/broker.py) and, per workload, the `odradek bench produce|consume`
tool as a child process, 6-partition topics, acks=1. For every workload the client's CPU and the
node's CPU over the same interval are divided by the records moved; `cores / (client + node CPU
per record)` is then the most this machine could do if both sides had every core to themselves,
which is compared with the issue's target. Whichever side takes more of that budget bounds it.

Client CPU: the figure the tool prints ("client CPU", process_time over its measured window, all
threads and child processes) where it prints one; else (confluent-kafka producer) the child's
whole-process CPU (rusage from wait4: every thread and every reaped child process) minus the
same for a no-op run of the same command (-n 1), which takes away imports and start-up; both
client figures are shown. Node CPU (schedstat of every thread, sampled): over the window the
consumers print (start.time to end.time), else over the run minus over the no-op run.

--profile runs each workload a second time (so py-spy's own cost stays out of the figures) under
py-spy (raw collapsed stacks, --nonblocking; --native cannot be combined with it) on the client
and on the node, and prints the top leaf frames by share of busy samples for each.
"""

from __future__ import annotations

import argparse
import bisect
import datetime as dt
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from tests.support.broker import BrokerProcess

from bench import compare
from bench.run import git_revision, machine
from odradek.client.admin import ensure_topic

HERE = Path(__file__).parent
RESULTS = HERE / "RESULTS.md"
BEGIN = "<!-- issue-3 bounds: begin (written by `python -m bench.bounds --write`) -->"
BEGIN_PREFIX = "<!-- issue-3 bounds: begin"
END = "<!-- issue-3 bounds: end -->"
PARTITIONS = 6
GB = 1e9
_SCRIPT = Path(sys.executable).with_name("odradek")
# the installed entry point, as a user runs it; the module where it is not installed
ODRADEK = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "odradek.cli.main"]
PY_SPY = str(Path(sys.executable).with_name("py-spy"))
CLIENT_TIMEOUT_S = 600.0
# leaf frames of a thread waiting, not working (py-spy shows Python frames only: a blocking C
# call appears as the Python frame that made it, e.g. EpollSelector.select, Condition.wait)
IDLE = ("select (", "poll (", "sleep (", "wait (", "acquire (")
IMPORTS = "(imports, all frames under an import)"


@dataclass(frozen=True)
class Workload:
    kind: str  # produce | consume
    client: str  # confluent-kafka | columnar
    size: int
    target: float | None  # records/s at 100 B, record bytes/s at 1 KB
    target_text: str

    @property
    def name(self) -> str:
        size = "1 KB" if self.size >= 1024 else f"{self.size} B"
        return f"{self.kind} {size}, {self.client}"

    @property
    def per_gb(self) -> bool:
        return self.size >= 1024


WORKLOADS = (
    Workload("produce", "confluent-kafka", 100, 1_000_000, "1,000,000 records/s"),
    Workload("produce", "columnar", 100, 1_000_000, "1,000,000 records/s"),
    Workload("consume", "confluent-kafka", 100, 2_000_000, "2,000,000 records/s"),
    Workload("consume", "columnar", 100, 2_000_000, "2,000,000 records/s"),
    Workload("produce", "confluent-kafka", 1024, 800e6, "800 MB/s"),
    Workload("produce", "columnar", 1024, 800e6, "800 MB/s"),
    Workload("consume", "columnar", 1024, None, "none (reported)"),
)


class NodeSampler(threading.Thread):
    """The node's CPU seconds every few ms, so its CPU over a window the tool printed (the
    consumers' start.time/end.time) can be read afterwards."""

    def __init__(self, ps: psutil.Process, interval: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.ps = ps
        self.interval = interval
        self.times: list[float] = []
        self.cpu: list[float] = []
        self._done = threading.Event()  # not _stop: Thread has one

    def sample(self) -> None:
        self.times.append(time.time())
        self.cpu.append(_node_cpu(self.ps))

    def run(self) -> None:
        while not self._done.wait(self.interval):
            self.sample()

    def __enter__(self) -> NodeSampler:
        self.sample()
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self.join()
        self.sample()

    @property
    def total(self) -> float:
        return self.cpu[-1] - self.cpu[0]

    def at(self, t: float) -> float:
        """CPU seconds at wall-clock time t, linear between the samples around it."""
        i = bisect.bisect_left(self.times, t)
        if i <= 0:
            return self.cpu[0]
        if i >= len(self.times):
            return self.cpu[-1]
        t0, t1 = self.times[i - 1], self.times[i]
        c0, c1 = self.cpu[i - 1], self.cpu[i]
        return c0 + (c1 - c0) * (t - t0) / max(t1 - t0, 1e-9)

    def between(self, t0: float, t1: float) -> float:
        return self.at(t1) - self.at(t0)


@dataclass
class ClientRun:
    """One run of the bench tool: what it printed and the CPU it and the node used."""

    stdout: str
    tree_cpu: float  # the child and every child it reaped, all threads
    node_cpu: float
    seconds: float
    node: NodeSampler
    node_user_sys: tuple[float, float] = (0.0, 0.0)  # psutil, 10 ms ticks, over the whole run

    def window(self) -> tuple[float, float] | None:
        """The consumers' measured window (kafka-consumer-perf-test's start.time, end.time,
        local time to the ms); producers print none."""
        m = re.search(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d+), "
                      r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d+),", self.stdout, re.M)
        if not m:
            return None
        fmt = "%Y-%m-%d %H:%M:%S:%f"
        return tuple(dt.datetime.strptime(g, fmt).timestamp() for g in m.groups())  # type: ignore[return-value]

    @property
    def rate(self) -> float:
        """records/s as the tool printed it."""
        m = re.search(r"([\d.]+) records/sec", self.stdout)
        if m:
            return float(m.group(1))
        # consumers print kafka-consumer-perf-test's CSV: nMsg.sec is the 6th column
        for line in self.stdout.splitlines():
            cells = [c.strip() for c in line.split(",")]
            if len(cells) >= 6 and re.fullmatch(r"[\d.]+", cells[5]):
                return float(cells[5])
        raise ValueError(f"no rate in the tool's output:\n{self.stdout}")

    def tool_cpu(self, records: int) -> float | None:
        """The client CPU the tool printed; from its per-1M figure when it has one, which has
        more digits than the seconds (0.06 s of a short run is +-10%)."""
        m = re.search(r"client CPU ([\d.]+) s \(([\d.]+) CPU s per 1M records\)", self.stdout)
        if m:
            return float(m.group(2)) * records / 1e6
        m = re.search(r"client CPU ([\d.]+) s", self.stdout)
        return float(m.group(1)) if m else None


@dataclass
class Result:
    workload: Workload
    records: int
    rate: float  # records/s
    client_cpu: float  # net, the figure used
    client_source: str
    client_tree_net: float  # whole process minus no-op, shown beside the tool's figure
    node_cpu: float
    node_source: str
    cores: int
    profiles: dict[str, str] = field(default_factory=dict)
    runs: int = 1
    total_range: tuple[float, float] | None = None  # per unit, over the runs
    # of the node's CPU over the whole run, the kernel's part (system calls, page cache, TCP)
    node_sys_share: float = 0.0

    @property
    def units(self) -> float:
        """Millions of records, or GB of record bytes at 1 KB."""
        if self.workload.per_gb:
            return self.records * self.workload.size / GB
        return self.records / 1e6

    @property
    def unit(self) -> str:
        return "GB" if self.workload.per_gb else "1M records"

    @property
    def client_per_unit(self) -> float:
        return self.client_cpu / self.units

    @property
    def node_per_unit(self) -> float:
        return self.node_cpu / self.units

    @property
    def total_per_unit(self) -> float:
        return self.client_per_unit + self.node_per_unit

    @property
    def client_share(self) -> float:
        return self.client_cpu / max(self.client_cpu + self.node_cpu, 1e-12)

    @property
    def ceiling(self) -> float:
        """records/s (or bytes/s at 1 KB) with every core busy on this workload alone."""
        per_record = (self.client_cpu + self.node_cpu) / max(self.records, 1)
        records_per_s = self.cores / max(per_record, 1e-15)
        return records_per_s * self.workload.size if self.workload.per_gb else records_per_s

    @property
    def measured(self) -> float:
        return self.rate * self.workload.size if self.workload.per_gb else self.rate

    def verdict(self) -> str:
        w = self.workload
        side = "client" if self.client_share >= 0.5 else "node"
        share = self.client_share if side == "client" else 1 - self.client_share
        line = (f"{w.name}: the {side} takes {share:.0%} of the CPU per record; ceiling "
                f"{_rate(self.ceiling, w)} on {self.cores} cores (measured "
                f"{_rate(self.measured, w)})")
        if w.target is None:
            return line + " (no target)"
        holds = "can hold" if self.ceiling >= w.target else "cannot hold"
        return line + f" vs target {w.target_text}: {holds} on this CPU budget"


def _rate(value: float, w: Workload) -> str:
    return f"{value / 1e6:,.0f} MB/s" if w.per_gb else f"{value:,.0f} records/s"


# ---------------------------------------------------------------- running the tool

def _node_cpu(ps: psutil.Process) -> float:
    """CPU seconds of every live thread, in nanoseconds from schedstat: psutil's figure moves in
    10 ms ticks, which is most of what the node spends serving a short consume run."""
    total = 0
    try:
        for task in Path(f"/proc/{ps.pid}/task").iterdir():
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue  # the thread ended between the listing and the read
    except OSError:
        total = 0
    if total:
        return total / 1e9
    t = ps.cpu_times()
    return t.user + t.system


def run_client(cmd: list[str], node: psutil.Process, timeout: float = CLIENT_TIMEOUT_S) -> ClientRun:
    """Run `cmd` to its end; its CPU comes from wait4's rusage, which counts every thread and
    every child process it waited for (the tool's --processes workers), not just the samples a
    poller happened to catch."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            NodeSampler(node) as sampler:
        times0 = node.cpu_times()
        start = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err)
        deadline = start + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.02)
        seconds = time.monotonic() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # already reaped: Popen must not
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited with {proc.returncode}:\n{stdout}\n"
                               f"{err.read().decode(errors='replace')[-4000:]}")
    times1 = node.cpu_times()
    return ClientRun(stdout, usage.ru_utime + usage.ru_stime, sampler.total, seconds, sampler,
                     (times1.user - times0.user, times1.system - times0.system))


def tool_command(w: Workload, bootstrap: str, topic: str, records: int,
                 processes: int = 1) -> list[str]:
    common = ["-t", topic, "-n", str(records), "--client", w.client, "--processes", str(processes),
              "-b", bootstrap]
    if w.kind == "produce":
        return [*ODRADEK, "bench", "produce", *common, "-s", str(w.size), "--acks", "1",
                "-p", str(PARTITIONS)]
    return [*ODRADEK, "bench", "consume", *common, "--timeout", "10"]


# ---------------------------------------------------------------- profiles

@dataclass
class Leaves:
    busy_samples: int
    rows: list[tuple[str, float]]


def top_leaves(raw: Path, n: int = 8) -> Leaves:
    """Share of busy samples per leaf frame in py-spy's raw output ("frame;...;leaf count");
    samples whose leaf is a wait, or that hold no Python frame at all, are left out."""
    own: dict[str, int] = {}
    try:
        lines = raw.read_text(errors="replace").splitlines()
    except OSError:
        return Leaves(0, [])
    for line in lines:
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        leaf = stack.rsplit(";", 1)[-1]
        # --subprocesses prefixes each stack with 'process PID:"cmd"'; alone it is no frame
        if leaf.startswith("process ") or any(idle in leaf for idle in IDLE):
            continue
        # start-up (imports) is one line of its own: it is not what a longer run pays per record
        if "_find_and_load (<frozen importlib._bootstrap>" in stack:
            leaf = IMPORTS
        own[leaf] = own.get(leaf, 0) + int(count)
    busy = sum(own.values())
    rows = sorted(own.items(), key=lambda kv: -kv[1])[:n]
    return Leaves(busy, [(frame, c / busy) for frame, c in rows])


def _leaf_table(title: str, leaves: Leaves) -> str:
    lines = [f"{title}, {leaves.busy_samples} busy samples:", "",
             "| share of busy samples | leaf frame |", "|---:|---|"]
    lines += ([f"| {share:.1%} | `{frame}` |" for frame, share in leaves.rows]
              or ["| — | no samples |"])
    return "\n".join(lines)


def profile_run(cmd: list[str], node: psutil.Process, workdir: Path, name: str) -> dict[str, str]:
    """The same command again, under py-spy, with a second py-spy on the node."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    client_raw = workdir / f"{slug}-client.txt"
    node_raw = workdir / f"{slug}-node.txt"
    spy = [PY_SPY, "record", "--format", "raw", "--nonblocking", "--rate", "200"]
    node_spy = subprocess.Popen([*spy, "--pid", str(node.pid), "-o", str(node_raw)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)  # py-spy attaches
        subprocess.run([*spy, "--subprocesses", "-o", str(client_raw), "--", *cmd],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=CLIENT_TIMEOUT_S, check=False)
    finally:
        node_spy.send_signal(signal.SIGINT)
        try:
            node_spy.wait(30)
        except subprocess.TimeoutExpired:
            node_spy.kill()
            node_spy.wait()
    return {"client": _leaf_table(f"{name}: client (py-spy)", top_leaves(client_raw)),
            "node": _leaf_table(f"{name}: node (py-spy)", top_leaves(node_raw))}


# ---------------------------------------------------------------- measuring

@dataclass
class Settings:
    records: int = 2_000_000
    kb_records: int = 400_000
    processes: int = 1
    profile: bool = False
    runs: int = 1


def measure(node: BrokerProcess, settings: Settings, workdir: Path,
            log: Callable[[str], None] = print,
            workloads: tuple[Workload, ...] = WORKLOADS) -> list[Result]:
    """Every workload settings.runs times, the runs interleaved (so a slow spell of a busy
    machine hits every workload); each figure is the median over the runs."""
    assert node.proc is not None
    ps = psutil.Process(node.proc.pid)
    cores = os.cpu_count() or 1
    # record size -> a topic holding records of it, and one holding a single record (which a
    # no-op consume reads: it must not fetch a full response of real data)
    produced: dict[int, tuple[str, str]] = {}
    runs: dict[int, list[Result]] = {i: [] for i in range(len(workloads))}
    for run_no in range(1, settings.runs + 1):
        for i, w in enumerate(workloads):
            records = settings.kb_records if w.per_gb else settings.records
            if w.kind == "produce":
                topic = f"bounds-{i}-{w.client}-{w.size}-run{run_no}"
                noop_topic = f"bounds-{i}-noop"
                for t in (topic, noop_topic):
                    ensure_topic(node.bootstrap, t, PARTITIONS)
                produced.setdefault(w.size, (topic, noop_topic))
            else:
                if w.size not in produced:
                    raise ValueError(f"{w.name}: no produce workload of {w.size} B before it")
                topic, noop_topic = produced[w.size]
            result = measure_once(w, node.bootstrap, ps, topic, noop_topic, records, settings,
                                  cores)
            if settings.profile and run_no == 1:
                prof_topic = topic if w.kind == "consume" else topic + "-profile"
                if w.kind == "produce":
                    ensure_topic(node.bootstrap, prof_topic, PARTITIONS)
                result.profiles = profile_run(
                    tool_command(w, node.bootstrap, prof_topic, records, settings.processes),
                    ps, workdir, w.name)
            runs[i].append(result)
            log(f"run {run_no}: {w.name}: {result.rate:,.0f} records/s, client "
                f"{result.client_per_unit:.2f} + node {result.node_per_unit:.2f} CPU s per "
                f"{result.unit} (client: {result.client_source}, node: {result.node_source}, "
                f"{result.node_sys_share:.0%} in the kernel; "
                f"client whole process - no-op: {result.client_tree_net / result.units:.2f}); "
                f"{result.verdict()}")
            for text in result.profiles.values():
                log(text)
    return [median_result(runs[i]) for i in range(len(workloads))]


def measure_once(w: Workload, bootstrap: str, ps: psutil.Process, topic: str, noop_topic: str,
                 records: int, settings: Settings, cores: int) -> Result:
    noop = run_client(tool_command(w, bootstrap, noop_topic, 1, settings.processes), ps)
    run = run_client(tool_command(w, bootstrap, topic, records, settings.processes), ps)
    tree_net = run.tree_cpu - noop.tree_cpu
    tool = run.tool_cpu(records)
    window = run.window()
    node_net = run.node_cpu - noop.node_cpu
    if window is not None:
        node_cpu, node_source = run.node.between(*window), "tool's window"
    elif node_net > 0:
        node_cpu, node_source = node_net, "whole run - no-op run"
    else:  # the no-op run's noise outweighed the work (a loaded machine): no net figure
        node_cpu, node_source = run.node_cpu, "whole run (no-op run cost more: noise)"
    return Result(
        w, records, run.rate,
        client_cpu=tool if tool is not None else tree_net,
        client_source="tool's own figure" if tool is not None else "whole process - no-op run",
        client_tree_net=tree_net,
        node_cpu=node_cpu, node_source=node_source,
        cores=cores, node_sys_share=run.node_user_sys[1] / max(sum(run.node_user_sys), 1e-9))


def median_result(runs: list[Result]) -> Result:
    """Each figure's median over the runs; the range of the total per unit beside it."""
    first = runs[0]
    totals = [r.total_per_unit for r in runs]
    return Result(
        first.workload, first.records, statistics.median(r.rate for r in runs),
        client_cpu=statistics.median(r.client_cpu for r in runs),
        client_source=first.client_source,
        client_tree_net=statistics.median(r.client_tree_net for r in runs),
        node_cpu=statistics.median(r.node_cpu for r in runs), node_source=first.node_source,
        cores=first.cores, profiles=first.profiles, runs=len(runs),
        total_range=(min(totals), max(totals)),
        node_sys_share=statistics.median(r.node_sys_share for r in runs))


# ---------------------------------------------------------------- output

def table(results: list[Result]) -> str:
    cores = results[0].cores if results else os.cpu_count()
    lines = [
        "| workload | records/s (MB/s) | unit | client CPU s | client CPU from | "
        "client, whole process - no-op | node CPU s | node CPU from | node in kernel | "
        f"total core-s | client share | ceiling on {cores} cores | target |",
        "|---|---:|---|---:|---|---:|---:|---|---:|---:|---:|---:|---|",
    ]
    for r in results:
        w = r.workload
        measured = f"{r.rate:,.0f} ({r.rate * w.size / 1e6:,.0f} MB/s)"
        target = "—" if w.target is None else (
            f"{w.target_text}: {'holds' if r.ceiling >= w.target else 'no'}")
        lines.append(
            f"| {w.name} | {measured} | per {r.unit} | {r.client_per_unit:.2f} | "
            f"{r.client_source} | {r.client_tree_net / r.units:.2f} | {r.node_per_unit:.2f} | "
            f"{r.node_source} | {r.node_sys_share:.0%} | {_total(r)} | {r.client_share:.0%} | {_rate(r.ceiling, w)} | "
            f"{target} |")
    return "\n".join(lines)


def _total(r: Result) -> str:
    if r.total_range is None or r.runs < 2:
        return f"{r.total_per_unit:.2f}"
    low, high = r.total_range
    return f"{r.total_per_unit:.2f} ({low:.2f}-{high:.2f})"


def render(results: list[Result], meta: dict[str, str]) -> str:
    lines = [
        "## Issue 3: what bounds it (CPU per record, client and node)",
        "",
        f"- date: {meta['date']}, revision {meta['revision']}; machine: {meta['machine']}",
        f"- load average at start / end: {meta['load_start']} / {meta['load_end']}",
        f"- one node, topics of {PARTITIONS} partitions, acks=1, `odradek bench produce|consume` "
        f"as a child process, {meta['processes']} client process(es); {meta['records']}; "
        f"each figure the median of {meta['runs']} run(s), the runs interleaved (total: median "
        "and range)",
        "- client CPU: the tool's own \"client CPU\" figure (its measured window, all threads) "
        "where it prints one, else the child's whole-process CPU (wait4 rusage, threads and "
        "reaped children) minus a no-op run (-n 1) of the same command; node CPU (every "
        "thread's schedstat, sampled every 20 ms): over the window the consumers print "
        "(start.time to end.time), else over the run minus over the no-op run; node in "
        "kernel: system / (user + system) CPU of the node over the whole run (psutil)",
        "- ceiling = cores / (client + node CPU per record): the rate if both sides had every "
        "core to themselves; the side with the larger share bounds it",
        "",
        table(results),
        "",
        "Verdicts:",
        "",
        *[f"- {r.verdict()}" for r in results],
    ]
    for r in results:
        for text in r.profiles.values():
            lines += ["", text]
    return "\n".join(lines) + "\n"


def update_results(section: str, path: Path = RESULTS) -> None:
    """Replace this module's section, or put it right after the side-by-side section."""
    block = f"{BEGIN}\n{section.rstrip()}\n{END}"
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    if BEGIN_PREFIX in text and END in text:
        start = text.index(BEGIN_PREFIX)
        stop = text.index(END) + len(END)
        text = text[:start] + block + text[stop:]
    elif compare.END in text:
        at = text.index(compare.END) + len(compare.END)
        text = text[:at] + "\n\n" + block + text[at:]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    path.write_text(text)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    doc = __doc__ or ""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000,
                        help="records per 100 B workload")
    parser.add_argument("--kb-records", type=int, default=None,
                        help="records per 1 KB workload (default: --records / 5)")
    parser.add_argument("--processes", type=int, default=1, help="client processes")
    parser.add_argument("--runs", type=int, default=1,
                        help="runs of every workload, interleaved; figures are medians")
    parser.add_argument("--profile", action="store_true",
                        help="run each workload again under py-spy (client and node)")
    parser.add_argument("--profile-dir", type=Path, default=None,
                        help="keep py-spy's raw stacks here (default: a temp dir, removed)")
    parser.add_argument("--quick", action="store_true",
                        help="check the harness: 500k records at 100 B, 200k at 1 KB (enough "
                             "that the no-op subtraction is not all noise)")
    parser.add_argument("--write", action="store_true",
                        help="write the section into bench/RESULTS.md")
    args = parser.parse_args(argv)
    if args.quick:
        args.records, args.kb_records = 500_000, 200_000
    if args.kb_records is None:
        args.kb_records = max(1, args.records // 5)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    settings = Settings(args.records, args.kb_records, args.processes, args.profile, args.runs)
    load_start = compare.load_average()
    print(f"load average {load_start}", flush=True)
    with tempfile.TemporaryDirectory(prefix="odradek-bounds-") as tmp:
        node = BrokerProcess(Path(tmp) / "data")
        node.start()
        try:
            spy_dir = args.profile_dir or Path(tmp)
            spy_dir.mkdir(parents=True, exist_ok=True)
            results = measure(node, settings, spy_dir, log=lambda s: print(s, flush=True))
        finally:
            node.stop()
    m = machine()
    meta = {
        "date": dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        # read only when writing: a plain run touches nothing outside its temp dir
        "revision": git_revision() if args.write else "not read (no --write)",
        "machine": f"{m.cores} cores ({m.cpu_model}), Linux {m.kernel}, Python {m.python}",
        "load_start": load_start,
        "load_end": compare.load_average(),
        "processes": str(args.processes),
        "runs": str(args.runs),
        "records": f"{args.records:,} records per 100 B workload, {args.kb_records:,} per 1 KB",
    }
    section = render(results, meta)
    print(section)
    if args.write:
        update_results(section)
        print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
