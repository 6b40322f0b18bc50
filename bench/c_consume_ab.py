"""Issue 23, point 5: the C consumer pair's consume row, odradek against Tansu, one row at a
time with librdkafka's statistics beside each run.

    python -m bench.c_consume_ab [--records 3000000] [--size 100] [--partitions 6] [--runs 3]
        [--systems odradek,tansu] [--before SRC] [--debug-fetch] [--perf] [--perf-stat]
        [--strace] [--shape] [-X key=value ...]

Both brokers run at once and are filled by the same C producer (bench/c/rdkafka_produce on
librdkafka 2.16, the pair's settings), then read by the same C consumer (bench/c/rdkafka_consume
on 2.16, odradek's shipped consumer settings) in interleaved rounds, so a machine whose load
drifts weighs on every entry alike. Each entry of --systems is a broker (`odradek`, `tansu`,
or `before`: an odradek node run from the source tree SRC given by --before, e.g. a `git
archive` of main, for a before/after of a node change in the same run), optionally with
consumer settings of its own after `+` (`odradek+max.partition.fetch.bytes=4194304`), where
`tool=PATH` is not a setting but another consumer binary (an older build of
bench/c/rdkafka_consume, for a before/after of the tool), and `cpus=LIST` runs the consumer
under `taskset -c LIST` (`cpus=0`: both of its threads on one core; `:` for `,` in LIST),
and `pin=A:L` puts the consumer's application thread on core A and librdkafka's threads on
core L (the tool's -C), and `env.NAME=VALUE` sets an environment variable of the consumer
(`env.GLIBC_TUNABLES=glibc.malloc.arena_max=1`). Ratios are each entry's rate over the
last entry's, per round.

Per run: records/s (the tool's own window, first record to last), the consumer's CPU per 1M
records, the node's CPU, and from librdkafka's statistics (every 100 ms, every run alike):
Fetch requests, MB and records per Fetch, the broker round trip (`rtt`: request written to
response read), the time per Fetch cycle (window / Fetches: round trip plus parsing, since
librdkafka keeps one Fetch in flight per broker), and how often the fetch queue was dry while
records were left (the consumer waiting for the broker) or full. With --debug-fetch, one more
run per entry with `debug=fetch`: how many partitions each Fetch carried; with --perf, one
under `perf record` (the consumer's hottest symbols); with --perf-stat, one under `perf stat`
(task clock, context switches, migrations, page faults); with --strace, one under `strace -c`
(its futex, poll and recvmsg calls). With --shape, one Fetch response from each broker is
described first (bench/fetch_shape.py: batches, records per batch, attributes, limits). The brokers' data (about 330 MB each at the defaults) is
removed at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import fetch_shape
from bench.compare import call, make_system
from bench.consume_ab import summarize
from bench.peers.c_tools import bundled_tool
from odradek.client.consumer_settings import SHIPPED

PAIR = {"odradek": "odradek-rdkafka-c-2.16", "before": "odradek-rdkafka-c-2.16",
        "tansu": "tansu-rdkafka-c-2.16"}
_FETCH_LINE = re.compile(r"Fetch (\d+)/(\d+)/(\d+) toppar")


@contextlib.contextmanager
def python_path(src: str | None) -> Iterator[None]:
    """PYTHONPATH set to `src` while a node starts: it then imports odradek from there."""
    old = os.environ.get("PYTHONPATH")
    if src is not None:
        os.environ["PYTHONPATH"] = src
    try:
        yield
    finally:
        if src is not None:
            if old is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = old


def command(endpoint: str, topic: str, expected: int, settings: dict[str, object],
            stats: Path, debug: bool = False, perf: Path | None = None,
            strace: Path | None = None, perf_stat: Path | None = None,
            ) -> tuple[list[str], dict[str, str]]:
    """The command line of one run of the C consumer and the environment it adds: an entry's
    settings are librdkafka's (`-X`) except `tool`, `cpus`, `pin` and `env.*` (module doc);
    under `perf record` into `perf`, `strace -c` into `strace` or `perf stat` into
    `perf_stat` (one of them)."""
    conf = dict(settings)
    tool, cpus, pin = conf.pop("tool", None), conf.pop("cpus", None), conf.pop("pin", None)
    env = {k[4:]: str(conf.pop(k)) for k in list(conf) if k.startswith("env.")}
    conf = {**conf, "statistics.interval.ms": 100, **({"debug": "fetch"} if debug else {})}
    xs = [a for k, v in conf.items() for a in ("-X", f"{k}={v}")]
    prefix = ["perf", "record", "-q", "-F", "2000", "-g", "-o", str(perf), "--"] if perf else []
    if strace is not None:
        prefix = ["strace", "-f", "-c", "-o", str(strace), "-e",
                  "trace=recvmsg,recvfrom,read,sendmsg,poll,ppoll,futex"]
    if perf_stat is not None:
        prefix = ["perf", "stat", "-o", str(perf_stat), "-e",
                  "task-clock,context-switches,cpu-migrations,page-faults", "--"]
    if cpus:
        prefix = ["taskset", "-c", str(cpus).replace(":", ","), *prefix]
    return [*prefix, str(tool or bundled_tool()), "-b", endpoint, "-t", topic, "-n",
            str(expected), "-T", "30", "-s", str(stats), *(["-C", str(pin)] if pin else []),
            *xs], env


def consume(endpoint: str, topic: str, expected: int, settings: dict[str, object],
            stats: Path, debug: bool = False, perf: Path | None = None,
            strace: Path | None = None, perf_stat: Path | None = None,
            ) -> tuple[dict[str, Any], str]:
    """One run of the C consumer (`command`): its JSON line and its stderr."""
    cmd, env = command(endpoint, topic, expected, settings, stats, debug, perf, strace,
                       perf_stat)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900,
                         env={**os.environ, **env})
    if not out.stdout.strip():
        raise RuntimeError(f"rdkafka_consume failed ({out.returncode}): {out.stderr[-2000:]}")
    return dict(json.loads(out.stdout.splitlines()[-1])), out.stderr


def fetch_partitions(stderr: str) -> str:
    """From a `debug=fetch` log: how many partitions the Fetches carried (count of each)."""
    counts: dict[int, int] = {}
    for m in _FETCH_LINE.finditer(stderr):
        n = int(m.group(1))
        if n:
            counts[n] = counts.get(n, 0) + 1
    total = sum(counts.values())
    mean = sum(k * v for k, v in counts.items()) / max(total, 1)
    return (f"{total} Fetches, {mean:.2f} partitions each ("
            + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) + ")")


def perf_top(data: Path, lines: int = 40) -> str:
    """The consumer's hottest symbols (self time) by thread name, from `perf report`."""
    out = subprocess.run(["perf", "report", "-i", str(data), "--no-children", "--stdio",
                          "--sort", "comm,dso,symbol", "-g", "none", "--percent-limit", "1"],
                         capture_output=True, text=True, timeout=300)
    rows = [ln for ln in out.stdout.splitlines() if ln.strip() and not ln.startswith("#")]
    return "\n".join("    " + ln.strip() for ln in rows[:lines])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=3_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--systems", default="odradek,tansu")
    ap.add_argument("--before", help="odradek source tree (its src/) for the `before` entry")
    ap.add_argument("--debug-fetch", action="store_true")
    ap.add_argument("--perf", action="store_true",
                    help="One more run per entry under `perf record`: the consumer's hot spots.")
    ap.add_argument("--perf-stat", action="store_true",
                    help="One more run per entry under `perf stat`: context switches, faults.")
    ap.add_argument("--shape", action="store_true",
                    help="Describe one Fetch response from each broker (bench.fetch_shape).")
    ap.add_argument("--strace", action="store_true",
                    help="One more run per entry under `strace -c`: the consumer's reads and "
                    "wake-ups per Fetch.")
    ap.add_argument("-X", action="append", default=[], metavar="key=value")
    a = ap.parse_args(argv)
    extra = dict(x.split("=", 1) for x in a.X)
    entries = []
    for item in a.systems.split(","):
        name, *kvs = item.split("+")
        if name not in PAIR:
            ap.error(f"unknown system {name!r}: one of {', '.join(PAIR)}")
        if name == "before" and not a.before:
            ap.error("`before` needs --before SRC")
        entries.append((item, name, {**SHIPPED, **extra, **dict(kv.split("=", 1) for kv in kvs)}))
    work = Path(tempfile.mkdtemp(prefix="c-consume-ab-"))
    names = list(dict.fromkeys(e[1] for e in entries))
    systems = {n: make_system(PAIR[n]) for n in names}
    print(f"uptime: {os.getloadavg()}; librdkafka tool {bundled_tool()}", flush=True)
    try:
        for n, s in systems.items():
            with python_path(a.before if n == "before" else None):
                s.start(work)
        topics: dict[str, tuple[str, int]] = {}
        for n, s in systems.items():
            topic = f"cab-{n}-{int(time.time())}"
            s.create(topic, a.partitions)
            ph = call(s.client, "produce", s.endpoint, topic, a.partitions, a.size, a.records,
                      600.0)
            topics[n] = (topic, ph.records)
            print(f"{n}: filled {ph.records:,} records ({ph.records_per_sec:,.0f}/s)", flush=True)
            if a.shape:
                print(f"{n}: one Fetch from offset 0\n" + fetch_shape.shape(
                    s.endpoint, topic, a.partitions), flush=True)
        rates: dict[str, list[float]] = {e[0]: [] for e in entries}
        extra_runs = [k for k, on in (("debug", a.debug_fetch), ("perf", a.perf),
                                      ("perf-stat", a.perf_stat), ("strace", a.strace)) if on]
        for run in range(a.runs + len(extra_runs)):
            kind = extra_runs[run - a.runs] if run >= a.runs else ""
            debug = kind == "debug"
            for i, (label, name, settings) in enumerate(entries):
                s = systems[name]
                topic, n = topics[name]
                stats = work / f"{label}-{run}.stats".replace("/", "_")
                os.sync()
                cpu0 = s.cpu_seconds()
                perf = work / f"{run}-{i}.perf.data" if kind == "perf" else None
                trace = work / f"{run}-{i}.strace" if kind == "strace" else None
                pstat = work / f"{run}-{i}.perf-stat" if kind == "perf-stat" else None
                r, err = consume(s.endpoint, topic, n, settings, stats, debug, perf, trace,
                                 pstat)
                node = s.cpu_seconds() - cpu0
                rate = r["records"] / max(r["seconds"], 1e-9)
                samples = [json.loads(line) for line in stats.read_text().splitlines()]
                st = summarize(samples)
                fetches = max(st.get("fetches", 0), 1)
                client = r["cpu_seconds"] / max(r["records"], 1) * 1e6
                head = (f"{label:>10} run {run}{f' ({kind})' if kind else ''}: "
                        f"{rate:>10,.0f} rec/s, client {client:.2f} CPU s/1M (app "
                        f"{r.get('cpu_app', 0):.2f} s, broker thread "
                        f"{r.get('cpu_rdk_broker', 0):.2f} s), node "
                        f"{node:.2f} CPU s; Fetches {st.get('fetches', 0)}, "
                        f"{st.get('rx_mb', 0) / fetches:.2f} MB and "
                        f"{st.get('rxmsgs', 0) / fetches:,.0f} records per Fetch, rtt "
                        f"{st.get('rtt_ms', 0):.2f} ms, cycle "
                        f"{r['seconds'] * 1000 / fetches:.2f} ms, partial {st.get('rxpartial', 0)}"
                        f", queue dry {st.get('dry', 0)} / full {st.get('full', 0)} of "
                        f"{st.get('samples', 0)} samples (median {st.get('queue_median', 0):,.0f}"
                        f"), load {os.getloadavg()[0]:.1f}")
                if debug:
                    head += "\n    " + fetch_partitions(err)
                elif perf is not None:
                    head += "\n" + perf_top(perf)
                elif pstat is not None:
                    head += "\n" + "\n".join("    " + ln.strip() for ln in
                                              pstat.read_text().splitlines()
                                              if ln.strip() and not ln.startswith("#"))
                elif trace is not None:
                    head += "\n" + "\n".join("    " + ln for ln in
                                              trace.read_text().splitlines()[:12])
                else:
                    rates[label].append(rate)
                if r["records"] < n:
                    head += f"\n    only {r['records']:,} of {n:,} records"
                print(head, flush=True)
        base = entries[-1][0]
        for label, _, _ in entries[:-1] if a.runs else ():
            ratios = [p / q for p, q in zip(rates[label], rates[base], strict=True)]
            print(f"{label} / {base} per round: " + ", ".join(f"{x:.2f}" for x in ratios)
                  + f"; median {statistics.median(ratios):.2f}", flush=True)
        print(f"uptime: {os.getloadavg()}", flush=True)
    finally:
        for s in systems.values():
            s.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
