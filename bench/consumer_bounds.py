"""Issue 23: what bounds each consumer odradek ships, at the shipped settings.

    python -m bench.consumer_bounds [--records 3000000] [--cli-records 1000000] [--runs 2]
                                    [--consumers cli-text,cli-json,bench,columnar,c,c-bundled]
                                    [--node odradek,tansu] [--fill columnar|confluent]
                                    [--profile] [--before SRC_DIR]

One node (odradek via tests/support/broker.py, or Tansu via bench.peers.tansu), a 6-partition
topic of `--records` records of 100 B, then each consumer as a child process, in rounds (every
consumer once per round, so a machine whose load drifts weighs on each alike). For each run:

- the rate: records over the child's wall time (start-up included: what a user waits for),
  and the rate the tool prints itself where it prints one (`bench consume`, the C tool);
- the node's CPU while the consumer reads (the window the statistics show records left for
  the application; the whole run where they cover less than 0.3 s), as a share of one core:
  is the node the bound?
- the client's CPU per thread over the same window, as a share of one core: the application
  thread (Python's main
  thread, or the C program's) apart from librdkafka's broker threads (`rdk:broker*`) and the
  rest. A thread near 100% of a core is a bound;
- librdkafka's statistics every 100 ms (bench/stats_hook gives every confluent-kafka Consumer of
  the child a stats_cb, the C tool writes them with -s): the fetch queue (`fetchq_cnt`,
  `fetchq_size`; librdkafka reports the consumer's one shared queue under every partition, so
  it is read once, not summed), what is left to fetch (`hi_offset - next_offset`) and the
  `fetch_state`s. "dry" = the queue is empty while records are left to fetch (the application
  waits for librdkafka and the node); "full" = the queue is at `queued.min.messages` or
  `queued.max.messages.kbytes` (librdkafka waits for the application);
- with --profile, one more run per consumer under `py-spy record --native` (Python consumers
  only; not timed): the leaf frames with the most samples, and the share under chosen frames.

`--before SRC_DIR` adds, for the CLI consumers and `bench consume`, the same command run from another source tree
(PYTHONPATH=SRC_DIR, e.g. `git archive <rev> src | tar -x -C DIR`), for before/after rows.
The 1-minute load average is printed beside every figure.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from bench.cpu import walk
from odradek.client.consumer_settings import SHIPPED

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
HOOK = HERE / "stats_hook"
PY_SPY = str(Path(sys.executable).with_name("py-spy"))
TOPIC = "bounds"
PARTITIONS = 6
NMSG_SEC = re.compile(r", ([\d.]+), (\d+), ([\d.]+), 0, \d+, [\d.]+, [\d.]+$", re.M)


def odradek(*args: str) -> list[str]:
    return [sys.executable, "-m", "odradek.cli.main", *args]


def xs(settings: dict[str, object]) -> list[str]:
    return [a for k, v in settings.items() for a in ("-X", f"{k}={v}")]


@dataclass
class Consumer:
    name: str
    argv: list[str]  # {b} = bootstrap, {n} = records, {stats} = stats file (C tool)
    records: int
    python: bool = True
    pythonpath: str = ""


def consumers(args: argparse.Namespace) -> list[Consumer]:
    from bench.peers.odradek_rdkafka_c import C_SETTINGS, TOOL, bundled_tool

    n, cn = str(args.records), str(args.cli_records)
    out: list[Consumer] = []
    wanted = args.consumers.split(",")
    trees = [("", "")] + ([(" (before)", args.before)] if args.before else [])
    for suffix, tree in trees:
        if "cli-text" in wanted:
            out.append(Consumer("odradek consume -f '%v\\n'" + suffix,
                                odradek("consume", TOPIC, "--from-beginning", "-e", "-n", cn,
                                        "-f", "%v\\n", "-b", "{b}"), args.cli_records,
                                pythonpath=tree))
        if "cli-json" in wanted:
            out.append(Consumer("odradek consume (JSON lines)" + suffix,
                                odradek("consume", TOPIC, "--from-beginning", "-e", "-n", cn,
                                        "-b", "{b}"), args.cli_records, pythonpath=tree))
        if "bench" in wanted:
            out.append(Consumer("odradek bench consume" + suffix,
                                odradek("bench", "consume", "-t", TOPIC, "-n", n, "-b", "{b}"),
                                args.records, pythonpath=tree))
    if "columnar" in wanted:
        out.append(Consumer("odradek bench consume --client columnar",
                            odradek("bench", "consume", "--client", "columnar", "-t", TOPIC,
                                    "-n", n, "-b", "{b}"), args.records))
    if "c" in wanted:
        out.append(Consumer("C, Debian librdkafka 2.0.2, make bench's queue",
                            [str(TOOL), "-b", "{b}", "-t", TOPIC, "-n", n, "-T", "10", "-s",
                             "{stats}", *xs(C_SETTINGS)], args.records, python=False))
    if "c-shipped" in wanted:
        out.append(Consumer("C, Debian librdkafka 2.0.2, shipped settings",
                            [str(TOOL), "-b", "{b}", "-t", TOPIC, "-n", n, "-T", "10", "-s",
                             "{stats}", *xs(SHIPPED)], args.records, python=False))
    if "c-bundled" in wanted:
        out.append(Consumer("C, confluent-kafka's librdkafka 2.16, shipped settings",
                            [str(bundled_tool()), "-b", "{b}", "-t", TOPIC, "-n", n, "-T", "10",
                             "-s", "{stats}", *xs(SHIPPED)], args.records, python=False))
    return out


def _sched(task: str) -> tuple[int, int]:
    """A thread's (ns on a CPU, ns runnable but waiting for one) from schedstat (finer than
    the 10 ms ticks of /proc/.../stat). On a loaded machine the second is what a thread that
    never sleeps loses to the others: on-CPU + waiting near 100% means it is the bound."""
    try:
        run, wait = Path(f"{task}/schedstat").read_text().split()[:2]
        return int(run), int(wait)
    except (OSError, ValueError):
        return 0, 0


def _cpu_ns(task: str) -> int:
    return _sched(task)[0]


def node_cpu(ps: psutil.Process) -> float:
    try:
        tids = os.listdir(f"/proc/{ps.pid}/task")
    except OSError:
        return 0.0
    return sum(_cpu_ns(f"/proc/{ps.pid}/task/{tid}") for tid in tids) / 1e9


def _threads(pid: int) -> dict[int, tuple[str, float]]:
    """tid -> (name, CPU seconds) for every thread of pid and of its children."""
    out: dict[int, tuple[str, float]] = {}
    for proc in walk([pid]):
        try:
            tids = os.listdir(f"/proc/{proc}/task")
        except OSError:
            continue  # it ended
        for tid in tids:
            task = f"/proc/{proc}/task/{tid}"
            try:
                name = Path(f"{task}/comm").read_text().strip()
            except OSError:
                continue
            ns, wait = _sched(task)
            if ns:
                role = "app" if int(tid) == proc else name
                out[int(tid)] = (role, ns / 1e9)
                out[-int(tid)] = (role + " wait", wait / 1e9)
    return out


class Sampler(threading.Thread):
    """The node's CPU and the client's per-thread CPU, every 50 ms while the client runs
    (threads that end keep their last reading)."""

    def __init__(self, node: psutil.Process, client_pid: int) -> None:
        super().__init__(daemon=True)
        self.node = node
        self.pid = client_pid
        self.threads: dict[int, tuple[str, float]] = {}
        self.done = threading.Event()
        # (monotonic time, node CPU s, client CPU s by role) every 50 ms
        self.series: list[tuple[float, float, dict[str, float]]] = []

    def sample(self) -> None:
        self.threads.update(_threads(self.pid))
        self.series.append((time.monotonic(), node_cpu(self.node), self.by_role()))

    def run(self) -> None:
        self.sample()
        while not self.done.wait(0.05):
            self.sample()
        self.sample()

    def by_role(self) -> dict[str, float]:
        roles: dict[str, float] = collections.defaultdict(float)
        for role, cpu in self.threads.values():
            wait = " wait" if role.endswith(" wait") else ""
            role = role.removesuffix(" wait")
            key = "rdk:broker" if role.startswith("rdk:broker") else \
                role if role in ("app", "rdk:main") else "other"
            roles[key + wait] += cpu
        return dict(roles)

    def over(self, t0: float, t1: float) -> tuple[float, dict[str, float]]:
        """Node CPU and client CPU by role over [t0, t1], as shares of one core (the samples
        nearest inside the window)."""
        inside = [x for x in self.series if t0 <= x[0] <= t1] or self.series
        (a, na, ra), (b, nb, rb) = inside[0], inside[-1]
        span = max(b - a, 1e-9)
        return (nb - na) / span, {k: (v - ra.get(k, 0.0)) / span for k, v in rb.items()}


@dataclass
class Stats:
    samples: int = 0
    dry: int = 0
    full: int = 0
    max_cnt: int = 0
    max_mb: float = 0.0
    mean_mb: float = 0.0
    states: collections.Counter[str] = field(default_factory=collections.Counter)
    first: float = 0.0  # CLOCK_MONOTONIC seconds (librdkafka's ts) of the first and last sample
    last: float = 0.0

    def text(self) -> str:
        if not self.samples:
            return "no statistics"
        st = ", ".join(f"{k} {v * 100 // max(sum(self.states.values()), 1)}%"
                       for k, v in self.states.most_common())
        return (f"{self.samples} samples: dry {100 * self.dry / self.samples:.0f}%, "
                f"full {100 * self.full / self.samples:.0f}%; queue max {self.max_cnt:,} "
                f"records / {self.max_mb:.1f} MB, mean {self.mean_mb:.1f} MB; fetch_state {st}")


def read_stats(files: list[Path], settings: dict[str, object]) -> Stats:
    """Samples while reading: from the first with a record received to the last with
    records still left for the application."""
    min_msgs = int(settings.get("queued.min.messages", 100_000))  # type: ignore[call-overload]
    max_bytes = int(settings.get("queued.max.messages.kbytes", 65_536)) * 1024  # type: ignore[call-overload]
    st = Stats()
    sizes: list[float] = []
    for path in files:
        for line in path.read_text().splitlines():
            try:
                d = json.loads(line)
            except ValueError:
                continue
            parts = [p for t in d.get("topics", {}).values()
                     for k, p in t.get("partitions", {}).items() if k != "-1"]
            if not parts or d.get("rxmsgs", 0) == 0:
                continue
            to_fetch = sum(max(p["hi_offset"] - max(p["next_offset"], 0), 0) for p in parts
                           if p["hi_offset"] >= 0)
            to_app = sum(max(p["hi_offset"] - max(p["app_offset"], 0), 0) for p in parts
                         if p["hi_offset"] >= 0)
            if to_app == 0:
                continue
            ts = d["ts"] / 1e6
            st.first = st.first or ts
            st.last = ts
            # one shared queue, reported under every partition
            cnt = max(p["fetchq_cnt"] for p in parts)
            size = max(p["fetchq_size"] for p in parts)
            st.samples += 1
            st.dry += cnt == 0 and to_fetch > 0
            st.full += cnt >= min_msgs or size >= max_bytes
            st.max_cnt = max(st.max_cnt, cnt)
            st.max_mb = max(st.max_mb, size / 1e6)
            sizes.append(size / 1e6)
            st.states.update(p["fetch_state"] for p in parts)
    st.mean_mb = statistics.fmean(sizes) if sizes else 0.0
    return st


@dataclass
class Run:
    rate: float
    tool_rate: float | None
    wall: float
    node_core: float  # over the window the statistics show reading (else the whole run)
    roles: dict[str, float]
    stats: Stats
    load: float
    client_cpu: float = 0.0  # CPU s per 1M records, every thread of the client, whole run


def tool_rate(text: str) -> float | None:
    m = NMSG_SEC.search(text)
    if m is not None:
        return float(m.group(3))
    for line in reversed(text.splitlines()):
        if line.startswith("{") and '"records"' in line:
            d = json.loads(line)
            return float(d["records"]) / float(d["seconds"]) if d["seconds"] else None
    return None


def settings_of(c: Consumer) -> dict[str, object]:
    got = dict(SHIPPED)
    for i, a in enumerate(c.argv):
        if a == "-X" and "=" in c.argv[i + 1]:
            k, v = c.argv[i + 1].split("=", 1)
            got[k] = v
    return got


def env_for(c: Consumer, stats_dir: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    path = [str(HOOK)] if stats_dir is not None else []
    if c.pythonpath:
        path.append(c.pythonpath)
    path += [str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    env["PYTHONPATH"] = os.pathsep.join(path)
    if stats_dir is not None:
        env["ODRADEK_STATS_DIR"] = str(stats_dir)
    return env


def run_once(c: Consumer, bootstrap: str, node: psutil.Process, work: Path) -> Run:
    stats_dir = Path(tempfile.mkdtemp(dir=work))
    argv = [a.format(b=bootstrap, n=c.records, stats=stats_dir / "c.jsonl") for a in c.argv]
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE if not c.name.startswith("odradek "
                                                                                  "consume")
                            else subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=env_for(c, stats_dir), cwd=ROOT)
    sampler = Sampler(node, proc.pid)
    sampler.start()
    out, err = proc.communicate(timeout=900)
    wall = time.monotonic() - start
    sampler.done.set()
    sampler.join()
    if proc.returncode != 0:
        raise RuntimeError(f"{c.name} failed ({proc.returncode}):\n{err[-2000:]}")
    stats = read_stats(sorted(stats_dir.glob("*.jsonl")), settings_of(c))
    if stats.last - stats.first >= 0.3:
        node_core, roles = sampler.over(stats.first, stats.last)
    else:
        node_core, roles = sampler.over(0, float("inf"))
    cpu = sum(v for k, v in sampler.by_role().items() if not k.endswith(" wait"))
    return Run(c.records / wall, tool_rate(out or ""), wall, node_core, roles, stats,
               os.getloadavg()[0], cpu * 1e6 / c.records)


def profile(c: Consumer, bootstrap: str, work: Path, top: int) -> str:
    raw = work / f"spy-{abs(hash(c.name))}.txt"
    argv = [a.format(b=bootstrap, n=c.records, stats="") for a in c.argv]
    subprocess.run([PY_SPY, "record", "--native", "-r", "100", "-f", "raw", "-o", str(raw),
                    "--", *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                   env=env_for(c, None), cwd=ROOT, check=True, timeout=900)
    leaf: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        frames = stack.split(";")
        total += int(n)
        leaf[frames[-1]] += int(n)
        for f in set(frames):
            incl[f] += int(n)
    lines = [f"py-spy --native, {total} samples of the main thread; leaf frames:"]
    lines += [f"  {100 * n / total:5.1f}%  {f[:110]}" for f, n in leaf.most_common(top)]
    lines.append("  under (inclusive):")
    ours = [(f, n) for f, n in incl.most_common()
            if ("odradek/" in f or "cimpl" in f or "Consumer_consume" in f
                or "gc_collect" in f or "json" in f) and "cli/main.py" not in f
            and "_main" not in f]
    lines += [f"  {100 * n / total:5.1f}%  {f[:110]}" for f, n in ours[:top]]
    return "\n".join(lines)


def fill(args: argparse.Namespace, bootstrap: str) -> None:
    from bench.peers.tansu import log_end
    from odradek.client.admin import ensure_topic

    ensure_topic(bootstrap, TOPIC, PARTITIONS)
    client = ["--client", "columnar"] if args.fill == "columnar" else []
    # Not check=True: against Tansu the perf producer's count from the high watermarks is
    # short (bench.peers.tansu) and it exits 1; the true log end is checked instead.
    subprocess.run(odradek("bench", "produce", *client, "-t", TOPIC, "-n", str(args.records),
                           "-s", "100", "-p", str(PARTITIONS), "-b", bootstrap),
                   capture_output=True, timeout=900, cwd=ROOT)
    held = sum(log_end(bootstrap, TOPIC).values())
    if held != args.records:
        raise RuntimeError(f"{bootstrap} holds {held} records of {TOPIC}, not {args.records}")


def start_node(kind: str, work: Path) -> tuple[Any, str, psutil.Process]:
    if kind == "tansu":
        from bench.peers.tansu import TansuSystem

        sys_ = TansuSystem()
        sys_.start(work)
        assert sys_.server is not None and sys_.server.proc is not None
        return sys_, sys_.endpoint, psutil.Process(sys_.server.proc.pid)
    from tests.support.broker import BrokerProcess

    node = BrokerProcess(work / "data")
    node.start()
    assert node.proc is not None
    return node, node.bootstrap, psutil.Process(node.proc.pid)


def fmt_roles(roles: dict[str, float]) -> str:
    """`app 40% (+55% waiting for a CPU)`: on-CPU share of a core, then run-queue wait."""
    order = ["app", "rdk:broker", "rdk:main", "other"]
    return ", ".join(f"{k} {100 * roles[k]:.0f}% (+{100 * roles.get(k + ' wait', 0):.0f}%)"
                     for k in order if k in roles)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=3_000_000)
    ap.add_argument("--cli-records", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--consumers", default="cli-text,cli-json,bench,columnar,c,c-bundled",
                    help="cli-text, cli-json, bench, columnar, c (make bench's settings), "
                         "c-shipped (Debian's 2.0.2 with the shipped ones), c-bundled")
    ap.add_argument("--node", default="odradek",
                    help="odradek, tansu, or both (odradek,tansu: each consumer reads one, then "
                         "the other, in every round)")
    ap.add_argument("--fill", default="columnar", choices=("columnar", "confluent"))
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--before", default="", metavar="SRC_DIR")
    ap.add_argument("--top", type=int, default=8)
    args = ap.parse_args(argv)
    kinds = args.node.split(",")
    if "tansu" in kinds and args.fill == "columnar":
        args.fill = "confluent"  # the same producer for both nodes: same batches to read
    chosen = consumers(args)
    print(f"# node {args.node}, {args.records:,} x 100 B in {PARTITIONS} partitions "
          f"({args.fill} producer); shipped: {SHIPPED}; load {os.getloadavg()[0]:.2f}",
          flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        nodes = []
        try:
            for kind in kinds:
                (work / kind).mkdir()
                nodes.append((kind, *start_node(kind, work / kind)))
                fill(args, nodes[-1][2])
            runs: dict[str, list[Run]] = collections.defaultdict(list)
            for rnd in range(args.runs):
                for c in chosen:
                    for kind, _, bootstrap, ps in nodes:  # A, B, A, B
                        name = f"{c.name} <- {kind}" if len(nodes) > 1 else c.name
                        r = run_once(c, bootstrap, ps, work)
                        runs[name].append(r)
                        tr = f", tool {r.tool_rate / 1e3:,.0f}k/s" if r.tool_rate else ""
                        print(f"round {rnd + 1} | {name} | {r.rate / 1e3:,.0f}k/s{tr} "
                              f"({r.wall:.1f} s) | client {r.client_cpu:.2f} CPU s/1M | "
                              f"node {100 * r.node_core:.0f}% of a core | "
                              f"client {fmt_roles(r.roles)} | {r.stats.text()} | "
                              f"load {r.load:.2f}", flush=True)
            print("\n| consumer | records/s (wall, start-up incl.) | tool's own figure | client CPU "
                  "s per 1M records (all threads, start-up incl.) | node CPU "
                  "(share of a core) | client CPU by thread, share of a core on CPU (+ runnable, "
                  "waiting for one), last run | fetch queue (librdkafka stats), last run "
                  "| load 1m |")
            print("|---|---|---|---|---|---|---|---|")
            for name, rs in runs.items():
                tools = [r.tool_rate for r in rs if r.tool_rate]
                print(f"| {name} | {', '.join(f'{r.rate / 1e3:,.0f}k' for r in rs)} | "
                      f"{', '.join(f'{t / 1e3:,.0f}k' for t in tools) or '-'} | "
                      f"{', '.join(f'{r.client_cpu:.2f}' for r in rs)} | "
                      f"{', '.join(f'{100 * r.node_core:.0f}%' for r in rs)} | "
                      f"{fmt_roles(rs[-1].roles)} | {rs[-1].stats.text()} | "
                      f"{', '.join(f'{r.load:.1f}' for r in rs)} |", flush=True)
            if args.profile:
                for c in chosen:
                    if c.python:
                        print(f"\n### {c.name} (load {os.getloadavg()[0]:.2f})\n")
                        print(profile(c, nodes[0][2], work, args.top), flush=True)
        finally:
            for _, node, _, _ in nodes:
                node.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
