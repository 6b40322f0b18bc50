"""Issue 23: choosing the consumer fetch settings odradek ships, by measurement.

    python -m bench.consumer_settings [--records 3000000] [--runs 2] [--idle-seconds 60]
                                      [--only sweep,focus,cli,stall,idle]

One odradek node (tests/support/broker.py), a 6-partition topic of `--records` records of
100 B written with the columnar producer, then, each in its own child process:

- sweep: `odradek bench consume` (confluent-kafka, consume(num_messages=10000)) with the
  shipped settings and one or two keys changed: `fetch.queue.backoff.ms` 1/5/20/100/1000 on
  librdkafka's default queue and on the shipped one, the queue size (`queued.max.messages.kbytes`,
  `queued.min.messages`), and `fetch.max.bytes`/`max.partition.fetch.bytes`;
- focus: a second round around the best rows of the first (librdkafka's sizes, short backoffs);
- cli: `odradek consume -e -n N` to /dev/null, raw values (`-f '%v\\n'`) and JSON lines (the
  default), with the shipped settings and with librdkafka's defaults (via -X);
- c: bench/c/rdkafka_consume (`make bench-tools`), shipped settings, librdkafka's defaults, and
  the shipped ones with the biggest queue (the only fix before librdkafka 2.3);
- stall: one consumer with librdkafka's defaults and one with the shipped settings, counting
  the "Fetch backoff" lines of `debug=fetch` and the largest fetch queue the statistics show;
- idle: consumers assigned to an empty topic for `--idle-seconds`, one per backoff, side by
  side: their CPU seconds and context switches (wake-ups) from /proc, per minute.

The machine's 1-minute load average is printed beside every figure: a loaded machine lowers
them all, so compare rows of one run, not runs.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.support.broker import BrokerProcess

from odradek.client.consumer_settings import LIBRDKAFKA_DEFAULTS, SHIPPED

ODRADEK = [sys.executable, "-m", "odradek.cli.main"]
TOPIC = "settings"
NMSG_SEC = re.compile(r", ([\d.]+), (\d+), ([\d.]+), 0, \d+, [\d.]+, [\d.]+$", re.M)

DEFAULT_QUEUE = {k: v for k, v in LIBRDKAFKA_DEFAULTS.items() if k != "fetch.queue.backoff.ms"}
SWEEP: list[tuple[str, dict[str, object]]] = [
    *[(f"librdkafka queue, backoff {b}", {**DEFAULT_QUEUE, "fetch.queue.backoff.ms": b})
      for b in (1, 5, 20, 100, 1000)],
    *[(f"shipped queue, backoff {b}", {"fetch.queue.backoff.ms": b})
      for b in (1, 5, 20, 100, 1000)],
    *[(f"backoff 5, kbytes {kb}, min {mn}",
       {"queued.max.messages.kbytes": kb, "queued.min.messages": mn})
      for kb, mn in ((16_384, 1_000_000), (65_536, 100_000), (65_536, 1_000_000),
                     (131_072, 1_000_000), (524_288, 1_000_000))],
    *[(f"backoff 5, fetch {fb // 1048576} MB / partition {pb // 1048576} MB",
       {"fetch.max.bytes": fb, "max.partition.fetch.bytes": pb})
      for fb, pb in ((52_428_800, 1_048_576), (67_108_864, 4_194_304),
                     (67_108_864, 8_388_608), (104_857_600, 33_554_432))],
]

# The second round: librdkafka's default queue and fetch sizes (the best rows of the first
# round) around the short backoffs, and the queue size on top of them.
LIB = dict(LIBRDKAFKA_DEFAULTS)
FOCUS: list[tuple[str, dict[str, object]]] = [
    *[(f"librdkafka sizes, backoff {b}", {**LIB, "fetch.queue.backoff.ms": b})
      for b in (1, 5, 20, 100, 1000)],
    *[(f"librdkafka sizes, backoff 5, kbytes {kb}, min {mn}",
       {**LIB, "fetch.queue.backoff.ms": 5, "queued.max.messages.kbytes": kb,
        "queued.min.messages": mn})
      for kb, mn in ((16_384, 100_000), (262_144, 100_000), (65_536, 1_000_000))],
    ("shipped", {}),
    *[(f"librdkafka sizes, backoff 5, fetch {fb // 1048576} MB / partition {pb // 1024} KB",
       {**LIB, "fetch.queue.backoff.ms": 5, "fetch.max.bytes": fb,
        "max.partition.fetch.bytes": pb})
      for fb, pb in ((52_428_800, 65_536), (52_428_800, 262_144), (52_428_800, 4_194_304))],
]


def load() -> str:
    return f"{os.getloadavg()[0]:.2f}"


def xs(settings: dict[str, object]) -> list[str]:
    return [a for k, v in settings.items() for a in ("-X", f"{k}={v}")]


def bench_consume(bootstrap: str, records: int, settings: dict[str, object]) -> float:
    out = subprocess.run([*ODRADEK, "bench", "consume", "-t", TOPIC, "-n", str(records),
                          "-b", bootstrap, *xs(settings)],
                         capture_output=True, text=True, timeout=900, check=True).stdout
    m = NMSG_SEC.search(out)
    if m is None or int(m.group(2)) < records:
        raise RuntimeError(f"bench consume read too little:\n{out}")
    return float(m.group(3))


def cli_consume(bootstrap: str, records: int, fmt: list[str],
                settings: dict[str, object]) -> float:
    start = time.monotonic()
    subprocess.run([*ODRADEK, "consume", TOPIC, "--from-beginning", "-e", "-n", str(records),
                    *fmt, "-b", bootstrap, *xs(settings)],
                   stdout=subprocess.DEVNULL, timeout=900, check=True)
    return records / (time.monotonic() - start)


IDLE_CHILD = """
import sys, time
from confluent_kafka import Consumer, TopicPartition, OFFSET_END
from odradek.client import consumer_settings
c = Consumer(consumer_settings(sys.argv[1], {"fetch.queue.backoff.ms": sys.argv[2]},
                               group_id="idle"))
c.assign([TopicPartition("idle", p, OFFSET_END) for p in range(6)])
end = time.monotonic() + float(sys.argv[3])
print("ready", flush=True)
while time.monotonic() < end:
    c.consume(num_messages=10000, timeout=0.5)
c.close()
"""


def _proc_stats(pid: int) -> tuple[float, int]:
    """(CPU seconds, voluntary + involuntary context switches) over every thread of pid."""
    tick = os.sysconf("SC_CLK_TCK")
    cpu = 0.0
    switches = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu += (int(fields[11]) + int(fields[12])) / tick
        for line in Path(f"/proc/{pid}/task/{tid}/status").read_text().splitlines():
            if line.endswith("ctxt_switches") or "ctxt_switches:" in line:
                switches += int(line.split()[1])
    return cpu, switches


def idle_cost(bootstrap: str, seconds: float) -> list[tuple[int, float, float]]:
    subprocess.run([*ODRADEK, "topic", "create", "idle", "-p", "6", "-b", bootstrap],
                   check=True, capture_output=True)
    backoffs = (1, 5, 1000)
    kids = [subprocess.Popen([sys.executable, "-c", IDLE_CHILD, bootstrap, str(b),
                              str(seconds + 15)], stdout=subprocess.PIPE, text=True)
            for b in backoffs]
    for kid in kids:
        assert kid.stdout is not None and kid.stdout.readline().strip() == "ready"
    time.sleep(10)  # connected, fetch sessions set up: measure the steady idle state
    before = [_proc_stats(k.pid) for k in kids]
    time.sleep(seconds)
    after = [_proc_stats(k.pid) for k in kids]
    for kid in kids:
        kid.wait(60)
    per_min = 60 / seconds
    return [(b, (a[0] - s[0]) * per_min, (a[1] - s[1]) * per_min)
            for b, s, a in zip(backoffs, before, after, strict=True)]


STALL_CHILD = """
import json, logging, sys, time
from confluent_kafka import Consumer, TopicPartition, OFFSET_BEGINNING
from odradek.client import consumer_settings
lines, fetchq = [], []
class H(logging.Handler):
    def emit(self, r):
        m = r.getMessage()
        if "Fetch backoff" in m:
            lines.append(m)
log = logging.getLogger("stall"); log.addHandler(H()); log.setLevel(logging.DEBUG)
def stats(js):
    # one queue for the whole consumer, reported under every partition: read it once
    for t in json.loads(js).get("topics", {}).values():
        fetchq.append(max([p.get("fetchq_size", 0) for k, p in t["partitions"].items()
                           if k != "-1"] or [0]))
c = Consumer(consumer_settings(sys.argv[1], {"debug": "fetch", "logger": log,
             "statistics.interval.ms": 500, "stats_cb": stats},
             librdkafka_defaults=sys.argv[3] == "defaults", group_id="stall"))
c.assign([TopicPartition(sys.argv[2], p, OFFSET_BEGINNING) for p in range(6)])
n, want, t0 = 0, int(sys.argv[4]), time.monotonic()
while n < want:
    n += sum(1 for m in c.consume(10000, 0.5) if m.error() is None)
secs = time.monotonic() - t0
c.close()
print(json.dumps({"records": n, "seconds": secs, "backoff_lines": len(lines),
                  "example": lines[0] if lines else "", "max_fetchq_mb": max(fetchq or [0]) / 1e6}))
"""


def stall(bootstrap: str, records: int, which: str) -> dict[str, object]:
    import json

    out = subprocess.run([sys.executable, "-c", STALL_CHILD, bootstrap, TOPIC, which,
                          str(records)], capture_output=True, text=True, check=True, timeout=900)
    return dict(json.loads(out.stdout.splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=3_000_000)
    ap.add_argument("--cli-records", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--idle-seconds", type=float, default=60)
    ap.add_argument("--only", default="sweep,focus,cli,stall,idle",
                    help="Comma-separated parts: sweep, focus, backoff (the backoff rows of "
                         "focus alone), cli, c (bench/c/rdkafka_consume), stall, idle.")
    args = ap.parse_args(argv)
    parts = set(args.only.split(","))
    print(f"# shipped: {SHIPPED}")
    with tempfile.TemporaryDirectory() as tmp:
        node = BrokerProcess(Path(tmp) / "data")
        node.start()
        try:
            b = node.bootstrap
            subprocess.run([*ODRADEK, "bench", "produce", "--client", "columnar", "-t", TOPIC,
                            "-n", str(args.records), "-s", "100", "-p", "6", "-b", b],
                           check=True, capture_output=True, timeout=900)
            for part, rows in (("sweep", SWEEP), ("focus", FOCUS), ("backoff", FOCUS[:5])):
                if part not in parts:
                    continue
                print(f"\n## bench consume ({part}), {args.records} x 100 B, "
                      f"median of {args.runs}\n")
                print("| settings (changed from shipped) | records/s | runs | load 1m per run |")
                print("|---|---|---|---|")
                # Rounds over every row (not every run of a row in turn), so a machine whose
                # load drifts during the sweep weighs on each row alike.
                rates: dict[str, list[float]] = {label: [] for label, _ in rows}
                loads: dict[str, list[str]] = {label: [] for label, _ in rows}
                for _ in range(args.runs):
                    for label, settings in rows:
                        rates[label].append(bench_consume(b, args.records, settings))
                        loads[label].append(load())
                for label, _ in rows:
                    rs = rates[label]
                    print(f"| {label} | {statistics.median(rs) / 1e6:.2f}M | "
                          f"{', '.join(f'{r / 1e6:.2f}M' for r in rs)} | "
                          f"{', '.join(loads[label])} |", flush=True)
            if "cli" in parts:
                print(f"\n## odradek consume -n {args.cli_records} to /dev/null\n")
                print("| format | settings | records/s | runs | load 1m |")
                print("|---|---|---|---|---|")
                for fmt_label, fmt in (("values (-f '%v\\n')", ["-f", "%v\\n"]),
                                       ("JSON lines (default)", [])):
                    for s_label, settings in (("shipped", {}),
                                              ("librdkafka defaults", LIBRDKAFKA_DEFAULTS)):
                        rates = [cli_consume(b, args.cli_records, fmt, settings)
                                 for _ in range(args.runs)]
                        print(f"| {fmt_label} | {s_label} | "
                              f"{statistics.median(rates) / 1e3:.0f}k | "
                              f"{', '.join(f'{r / 1e3:.0f}k' for r in rates)} | {load()} |",
                              flush=True)
            if "c" in parts:
                from bench.peers.odradek_rdkafka_c import run_tool

                big = {**SHIPPED, "queued.max.messages.kbytes": 2_097_151,
                       "queued.min.messages": 10_000_000}
                rows_c = (("shipped", dict(SHIPPED)), ("librdkafka defaults", LIBRDKAFKA_DEFAULTS),
                          ("shipped + 2 GB / 10M queue", big))
                got: dict[str, list[float]] = {label: [] for label, _ in rows_c}
                lib = ""
                for _ in range(args.runs):
                    for label, settings in rows_c:
                        r = run_tool(b, TOPIC, args.records, 10, settings)
                        lib = str(r["librdkafka"])
                        got[label].append(float(r["records"]) / float(r["seconds"]))
                print(f"\n## bench/c/rdkafka_consume (librdkafka {lib}), {args.records} x 100 B\n")
                print("| settings | records/s | runs | load 1m |")
                print("|---|---|---|---|")
                for label, _ in rows_c:
                    rs = got[label]
                    print(f"| {label} | {statistics.median(rs) / 1e6:.2f}M | "
                          f"{', '.join(f'{r / 1e6:.2f}M' for r in rs)} | {load()} |", flush=True)
            if "stall" in parts:
                print(f"\n## how the stall shows: debug=fetch and statistics, {args.records}"
                      " records\n")
                print("| settings | records/s | 'Fetch backoff' lines | max fetch queue MB "
                      "(stats fetchq_size) | load 1m |")
                print("|---|---|---|---|---|")
                for which in ("defaults", "shipped"):
                    r = stall(b, args.records, which)
                    rate = float(r["records"]) / float(r["seconds"])  # type: ignore[arg-type]
                    print(f"| {which} | {rate / 1e6:.2f}M | {r['backoff_lines']} | "
                          f"{float(r['max_fetchq_mb']):.0f} | {load()} |", flush=True)  # type: ignore[arg-type]
                    if r["example"]:
                        print(f"\n    {r['example']}\n", flush=True)
            if "idle" in parts:
                print(f"\n## idle consumer, {args.idle_seconds:.0f} s, per minute\n")
                print("| fetch.queue.backoff.ms | CPU s/min | context switches/min | load 1m |")
                print("|---|---|---|---|")
                for backoff, cpu, sw in idle_cost(b, args.idle_seconds):
                    print(f"| {backoff} | {cpu:.3f} | {sw:.0f} | {load()} |", flush=True)
        finally:
            node.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
