"""Issue 23, point 5: why confluent-kafka consumes 100 B records slower from odradek than from
Tansu, with the same client and settings. Both brokers run at once, hold the same workload
(filled by the same confluent-kafka producer as `make bench`), and are read in interleaved
rounds (odradek, tansu, odradek, tansu ...), so a machine whose load drifts weighs on both.

    python -m bench.consume_ab [--records 1000000] [--size 100] [--partitions 6] [--runs 3]
                               [--producers 1] [--stats] [--shape] [-X key=value ...]
                               [--systems odradek,odradek+max.partition.fetch.bytes=4194304,tansu]

Each entry of --systems is a broker, or a broker and settings of its own after `+`; ratios are
each entry's rate over the last entry's, per round.

Per run (one child process, the loop of odradek.perf.confluent.consume_partitions, shipped
settings): records/s from the first record to the last, the time from the consumer's creation
to its first record, and the client's CPU per 1M records (whole process, every thread). With
--stats, one more run per broker with librdkafka statistics every 100 ms: Fetch requests,
records and bytes per Fetch, partial message sets (`rxpartial`), the broker round trip
(`rtt`), and how often the fetch queue was dry while records were left. With --shape, what
one Fetch of one partition (max.partition.fetch.bytes as shipped) answers on each broker:
batches, records per batch, bytes, a partial batch at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.compare import call, make_system
from odradek.client.consumer_settings import SHIPPED


def thread_cpu() -> dict[str, float]:
    """CPU seconds of this process's threads by role: the application thread (Python's
    main one), librdkafka's broker threads, the rest."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for task in os.listdir("/proc/self/task"):
        try:
            stat = Path(f"/proc/self/task/{task}/stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        role = ("app" if int(task) == os.getpid() else
                "rdk:broker" if name.startswith("rdk:broker") else "other")
        out[role] = out.get(role, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def app_sched() -> tuple[float, float]:
    """The application thread's time on a CPU and waiting in the run queue (schedstat), s."""
    run, wait, _ = Path(f"/proc/self/task/{os.getpid()}/schedstat").read_text().split()
    return int(run) / 1e9, int(wait) / 1e9


def consume_child(endpoint: str, topic: str, expected: int, stats: bool,
                  extra: dict[str, object]) -> dict[str, Any]:
    """consume_partitions' loop (shipped settings, batches of 10,000, GC paused), timed from
    the first record, plus what librdkafka's statistics say when `stats`."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    from odradek.perf.confluent import (
        DEFAULT_BATCH,
        _record_bytes,
        consumer_config,
        gc_paused,
        partitions_of,
    )

    samples: list[dict[str, Any]] = []
    conf = consumer_config(endpoint, {k: str(v) for k, v in extra.items()})
    if stats:
        conf["statistics.interval.ms"] = 100
        conf["stats_cb"] = lambda js: samples.append(json.loads(js))
    t0 = time.monotonic()
    consumer = Consumer(conf)
    try:
        parts = partitions_of(consumer, topic)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        count = nbytes = 0
        first = last = 0.0
        with gc_paused():
            threads0 = thread_cpu()
            sched0 = app_sched()
            cpu0 = time.process_time()
            consume = consumer.consume
            while count < expected:
                msgs = consume(num_messages=DEFAULT_BATCH, timeout=0.5)
                if not msgs:
                    if time.monotonic() - (last or t0) > 30:
                        break
                    continue
                if not first:
                    first = time.monotonic()
                nbytes += _record_bytes(msgs)
                count += len(msgs)
                last = time.monotonic()
            cpu = time.process_time() - cpu0
            threads = {k: v - threads0.get(k, 0.0) for k, v in thread_cpu().items()}
            sched = [b - a for a, b in zip(sched0, app_sched(), strict=True)]
        if stats:  # one more sample after the last record
            consumer.consume(num_messages=1, timeout=0.3)
    finally:
        consumer.close()
    out: dict[str, Any] = {"records": count, "bytes": nbytes, "seconds": last - first,
                           "to_first": first - t0, "cpu": cpu,
                           # the app thread's wall time from the first record on: running,
                           # runnable (waiting for a core), and asleep (waiting for records)
                           "app_run": sched[0], "app_runnable": sched[1],
                           "app_asleep": max(last - (first or last) - sched[0] - sched[1], 0.0),
                           **{f"cpu_{k}": v for k, v in threads.items()}}
    if stats and os.environ.get("CONSUME_AB_DUMP"):
        with open(os.environ["CONSUME_AB_DUMP"], "a") as dump:
            for sample in samples:
                dump.write(json.dumps(sample) + "\n")
    if stats:
        out.update(summarize(samples))
    return out


def mean_rtt_ms(samples: list[dict[str, Any]]) -> float:
    """The brokers' mean round trip over the whole run: librdkafka's `rtt` window restarts
    with every statistics sample, so its sums and counts are added up over all of them (the
    last sample's `avg` alone covers its last 100 ms)."""
    total = count = 0
    for s in samples:
        for b in s.get("brokers", {}).values():
            if b.get("nodeid", -1) >= 0:
                total += b["rtt"]["sum"]
                count += b["rtt"]["cnt"]
    return total / count / 1000 if count else 0.0


def summarize(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals from the last sample, and the queue's state over the samples taken while reading."""
    if not samples:
        return {}
    end = samples[-1]
    brokers = [b for b in end["brokers"].values() if b.get("nodeid", -1) >= 0]
    fetches = sum(b["req"].get("Fetch", 0) for b in brokers)
    rx = sum(b["rx"] for b in brokers)
    rxbytes = sum(b["rxbytes"] for b in brokers)
    rxpartial = sum(b.get("rxpartial", 0) for b in brokers)
    tparts = [p for t in end["topics"].values() for k, p in t["partitions"].items() if k != "-1"]
    rxmsgs = sum(p["rxmsgs"] for p in tparts)
    dry = full = reading = 0
    cnts: list[int] = []
    for s in samples:
        ps = [p for t in s.get("topics", {}).values() for k, p in t["partitions"].items()
              if k != "-1"]
        if not ps or s.get("rxmsgs", 0) == 0:
            continue
        to_app = sum(max(p["hi_offset"] - max(p["app_offset"], 0), 0) for p in ps
                     if p["hi_offset"] >= 0)
        to_fetch = sum(max(p["hi_offset"] - max(p["next_offset"], 0), 0) for p in ps
                       if p["hi_offset"] >= 0)
        if to_app == 0:
            continue
        reading += 1
        cnt = max(p["fetchq_cnt"] for p in ps)
        cnts.append(cnt)
        dry += cnt == 0 and to_fetch > 0
        full += cnt >= int(SHIPPED["queued.min.messages"])  # type: ignore[call-overload]
    return {"fetches": fetches, "responses": rx, "rx_mb": rxbytes / 1e6, "rxpartial": rxpartial,
            "rxmsgs": rxmsgs, "rtt_ms": mean_rtt_ms(samples),
            "samples": reading, "dry": dry, "full": full,
            "queue_median": statistics.median(cnts) if cnts else 0}


def shape(endpoint: str, topic: str, partition: int, part_max: int, fetches: int = 20
          ) -> dict[str, Any]:
    """What `fetches` consecutive Fetches of one partition answer (odradek's raw fetcher,
    Fetch v11, partition_max_bytes = part_max): batches, records, bytes, partial tail."""
    from odradek.client.fetcher import PartitionFetcher

    f = PartitionFetcher({"bootstrap.servers": endpoint}, topic, partition, read_committed=False,
                         max_bytes=52_428_800, partition_max_bytes=part_max, max_wait_ms=10)
    offset = 0
    per: list[tuple[int, int, int, int]] = []  # (bytes, batches, records, partial bytes)
    try:
        for _ in range(fetches):
            f.send(offset)
            got = f.receive()
            data = got.records
            pos = batches = records = 0
            while pos + 61 <= len(data):
                base, length = struct.unpack_from(">qi", data, pos)
                if pos + 12 + length > len(data):
                    break
                (n,) = struct.unpack_from(">i", data, pos + 57)
                batches += 1
                records += n
                offset = base + n
                pos += 12 + length
            per.append((len(data), batches, records, len(data) - pos))
            if not records:
                break
    finally:
        f.close()
    n = max(len(per), 1)
    return {"fetches": len(per), "bytes": sum(p[0] for p in per) / n,
            "batches": sum(p[1] for p in per) / n, "records": sum(p[2] for p in per) / n,
            "records_per_batch": sum(p[2] for p in per) / max(sum(p[1] for p in per), 1),
            "partial_bytes": sum(p[3] for p in per) / n}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--systems", default="odradek,tansu")
    ap.add_argument("--producers", type=int, default=1,
                    help="Producer processes for the fill (make bench's odradek rows use 2).")
    ap.add_argument("--stats", action="store_true")
    ap.add_argument("--shape", action="store_true")
    ap.add_argument("-X", action="append", default=[], metavar="key=value")
    a = ap.parse_args(argv)
    extra = dict(x.split("=", 1) for x in a.X)
    work = Path(tempfile.mkdtemp(prefix="consume-ab-"))
    # "name" or "name+key=value+...": a variant reads the same broker with settings of its own
    entries = []
    for item in a.systems.split(","):
        name, *kvs = item.split("+")
        entries.append((item, name, {**extra, **dict(kv.split("=", 1) for kv in kvs)}))
    systems = [make_system(n) for n in dict.fromkeys(e[1] for e in entries)]
    by_name = {s.name: s for s in systems}
    print(f"load: {os.getloadavg()}", flush=True)
    try:
        for s in systems:
            s.start(work)
        topics = {}
        for s in systems:
            topic = f"ab-{int(time.time())}"
            s.create(topic, a.partitions)
            ph = call(s.client, "produce", s.endpoint, topic, a.partitions, a.size, a.records,
                      600.0, *((a.producers,) if a.producers > 1 else ()))
            topics[s.name] = (topic, ph.records)
            print(f"{s.name}: filled {ph.records:,} records", flush=True)
        if a.shape:
            for s in systems:
                topic, _ = topics[s.name]
                sh = call("bench.consume_ab", "shape", s.endpoint, topic, 0,
                          int(SHIPPED["max.partition.fetch.bytes"]))  # type: ignore[call-overload]
                print(f"{s.name} shape: " + ", ".join(f"{k} {v:,.1f}" for k, v in sh.items()),
                      flush=True)
        rates: dict[str, list[float]] = {e[0]: [] for e in entries}
        for run in range(a.runs + (1 if a.stats else 0)):
            stats = a.stats and run == a.runs
            for label, name, settings in entries:
                s = by_name[name]
                topic, n = topics[s.name]
                cpu0 = s.cpu_seconds()
                r = call("bench.consume_ab", "consume_child", s.endpoint, topic, n, stats,
                         settings)
                node = s.cpu_seconds() - cpu0
                rate = r["records"] / max(r["seconds"], 1e-9)
                head = (f"{label:>8} run {run}{' (stats)' if stats else ''}: "
                        f"{rate:>10,.0f} rec/s, first record after {r['to_first']:.2f} s, "
                        f"client {r['cpu'] / max(r['records'], 1) * 1e6:.2f} CPU s/1M, "
                        f"(app {r.get('cpu_app', 0):.2f} s, broker thread "
                        f"{r.get('cpu_rdk:broker', 0):.2f} s); app thread asleep "
                        f"{100 * r['app_asleep'] / max(r['seconds'], 1e-9):.0f}%, runnable "
                        f"{100 * r['app_runnable'] / max(r['seconds'], 1e-9):.0f}%, "
                        f"node {node:.2f} CPU s, load {os.getloadavg()[0]:.1f}")
                if not stats:
                    rates[label].append(rate)
                else:
                    head += "\n    " + ", ".join(
                        f"{k} {v:,.2f}" if isinstance(v, float) else f"{k} {v:,}"
                        for k, v in r.items() if k not in ("records", "bytes"))
                print(head, flush=True)
        base = entries[-1][0]
        for label, _, _ in entries[:-1] if a.runs else ():
            ratios = [p / q for p, q in zip(rates[label], rates[base], strict=True)]
            print(f"{label} / {base} per round: " + ", ".join(f"{r:.2f}" for r in ratios)
                  + f"; median {statistics.median(ratios):.2f}", flush=True)
    finally:
        for s in systems:
            s.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
