"""Consumer-group benchmark: rebalance time of a 3-member group and 3-member group throughput.

    python -m bench.group_perf [--num-records 1000000] [--record-size 100] [--rounds 3]
    python -m bench.group_perf --write-results     # also append the "Issue 4" section

A fresh node (tests/support/broker.py) with group.initial.rebalance.delay.ms=0 (Kafka's
default of 3000 ms would add 3 s to the first classic rebalance of a new group, by design).
Each member is its own process running confluent-kafka.

- Rebalance time: three members subscribe at the same moment to a 6-partition topic that
  already holds records; the time from the subscribe calls to the moment the last of them
  receives its first record (so join, sync/assignment and the first fetch are all in it).
  Classic eager (range), classic cooperative-sticky and KIP-848 (group.protocol=consumer).
- Throughput: three members of one group read N records of S bytes over 6 partitions with
  auto commit; records/s from the first subscribe to the last record.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from tests.support.broker import BrokerProcess

from odradek.client import consumer_settings

RESULTS = Path(__file__).with_name("RESULTS.md")
MEMBERS = 3
PARTITIONS = 6


def member(bootstrap: str, topic: str, group: str, conf: dict[str, Any], start_at: float,
           want: int, out: Any) -> None:
    c = Consumer(consumer_settings(bootstrap, conf, group_id=group, auto_offset_reset="earliest",
                                   enable_auto_commit=True, fetch_max_bytes=1048576,
                                   max_partition_fetch_bytes=262144))
    while time.time() < start_at:
        time.sleep(0.001)
    began = time.time()
    c.subscribe([topic])
    first = None
    count = 0
    last = began
    idle_since = time.time()
    while True:
        msgs = c.consume(num_messages=10000, timeout=0.2)
        now = time.time()
        good = [m for m in msgs if m.error() is None]
        if good:
            if first is None:
                first = now
            count += len(good)
            last = now
            idle_since = now
        if want == 0 and first is not None:
            break
        if want and now - idle_since > 3.0 and first is not None:
            break
        if now - began > 120:
            break
    out.put((began, first, last, count))
    c.close()


def run_group(bootstrap: str, topic: str, group: str, conf: dict[str, Any],
              want: int) -> list[tuple[float, float | None, float, int]]:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    start_at = time.time() + 2.0  # after every process has imported confluent-kafka
    procs = [ctx.Process(target=member, args=(bootstrap, topic, group, conf, start_at, want, q))
             for _ in range(MEMBERS)]
    for p in procs:
        p.start()
    results = [q.get(timeout=180) for _ in procs]
    for p in procs:
        p.join(30)
    return results


def produce(bootstrap: str, topic: str, n: int, size: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1048576,
                  "acks": 1})
    value = b"x" * size
    for i in range(n):
        while True:
            try:
                p.produce(topic, value=value, partition=i % PARTITIONS)
                break
            except BufferError:
                p.poll(0.01)
    p.flush(120)


PROTOCOLS = {
    "classic eager (range)": {"partition.assignment.strategy": "range",
                              "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000},
    "classic cooperative-sticky": {"partition.assignment.strategy": "cooperative-sticky",
                                   "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000},
    "KIP-848 (group.protocol=consumer)": {"group.protocol": "consumer"},
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-records", type=int, default=1_000_000)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--write-results", action="store_true")
    args = parser.parse_args(argv)
    lines: list[str] = []

    def say(s: str = "") -> None:
        print(s, flush=True)
        lines.append(s)

    with tempfile.TemporaryDirectory() as tmp:
        node = BrokerProcess(Path(tmp) / "data", settings={
            "group.initial.rebalance.delay.ms": "0", "group.consumer.heartbeat.interval.ms": "1000"})
        node.start()
        try:
            admin = AdminClient({"bootstrap.servers": node.bootstrap})
            admin.create_topics([NewTopic("gperf", PARTITIONS, 1)])["gperf"].result(30)
            time.sleep(0.5)
            produce(node.bootstrap, "gperf", args.num_records, args.record_size)
            say(f"{args.num_records} records of {args.record_size} B over {PARTITIONS} "
                f"partitions; {MEMBERS} member processes per group")
            say()
            say("| protocol | rebalance time, median of "
                f"{args.rounds} (ms) | min / max (ms) |")
            say("|---|---:|---|")
            for name, conf in PROTOCOLS.items():
                times = []
                for r in range(args.rounds):
                    res = run_group(node.bootstrap, "gperf", f"rb-{len(times)}-{r}-{name[:7]}",
                                    conf, 0)
                    began = min(b for b, _, _, _ in res)
                    firsts = [f for _, f, _, _ in res]
                    if any(f is None for f in firsts):
                        continue
                    times.append((max(firsts) - began) * 1000)  # type: ignore[type-var]
                if times:
                    say(f"| {name} | {statistics.median(times):.0f} | "
                        f"{min(times):.0f} / {max(times):.0f} |")
                else:
                    say(f"| {name} | no result | |")
            say()
            say("| protocol | records consumed | records/s | MB/s |")
            say("|---|---:|---:|---:|")
            for name, conf in PROTOCOLS.items():
                if "cooperative" in name:
                    continue
                res = run_group(node.bootstrap, "gperf", f"tp-{name[:7]}", conf,
                                args.num_records)
                began = min(b for b, _, _, _ in res)
                end = max(last for _, _, last, _ in res)
                total = sum(c for _, _, _, c in res)
                secs = max(end - began, 1e-9)
                say(f"| {name} | {total:,} | {total / secs:,.0f} | "
                    f"{total * args.record_size / secs / 1e6:.1f} |")
        finally:
            node.stop()
    if args.write_results:
        with RESULTS.open("a") as f:
            f.write("\n## Issue 4: consumer groups (`python -m bench.group_perf`)\n\n")
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
