"""Log cleaner benchmark (issue 5): cleaner throughput, and produce throughput while it runs.

    python -m bench.cleaner_perf [--records 1000000] [--keys 10000] [--no-write]

1. In process: a compacted log of `--records` keyed records of 100 B (every key updated
   records/keys times) is cleaned by one `LogCleaner` pass; MB/s of log cleaned (bytes of the
   segments rewritten over wall time) for uncompressed and lz4 batches.
2. Against a live node: producer throughput (bench.producer_perf, acks=1) into a delete-policy
   topic, first with the cleaner off, then while the cleaner compacts a large dirty topic on the
   same node. The node's own log line for the pass gives the cleaner's MB/s there.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import re
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from tests.support.background import create_topic
from tests.support.broker import BrokerProcess

from bench import producer_perf
from bench.run import RESULTS, git_revision, machine
from odradek.client.admin import ensure_topic
from odradek.protocol.records import BatchHeader, Compression, Record, build_batch
from odradek.storage.cleaner.log_cleaner import CleanerConfig, CleanStats, LogCleaner
from odradek.storage.config import LogConfig
from odradek.storage.log import Log

BEGIN = "<!-- issue-5 results: begin -->"
END = "<!-- issue-5 results: end -->"
BATCH = 200


def build_log(path: Path, records: int, keys: int, codec: int) -> Log:
    config = LogConfig(segment_bytes=64 * 1024 * 1024, cleanup_policy="compact",
                       min_cleanable_dirty_ratio=0.01)
    log = Log.open(path, config)
    value = b"v" * 90
    ts = int(time.time() * 1000)
    for start in range(0, records, BATCH):
        recs = [Record(-1, ts, b"key-%06d" % ((start + i) % keys), value, ())
                for i in range(min(BATCH, records - start))]
        raw = memoryview(build_batch(recs, compression=codec))
        log.append(raw, BatchHeader.parse(raw), 0)
    log.roll()
    return log


def storage_bench(records: int, keys: int, out: io.StringIO) -> list[tuple[str, CleanStats]]:
    results = []
    for name, codec in (("none", Compression.NONE), ("lz4", Compression.LZ4)):
        with tempfile.TemporaryDirectory(prefix="odradek-cleaner-") as tmp:
            log = build_log(Path(tmp) / "bench-0", records, keys, codec)
            cleaner = LogCleaner(Path(tmp), lambda log=log: [log], CleanerConfig())
            stats = cleaner.clean_log(log)
            log.close()
        line = (f"codec={name}: cleaned {stats.bytes_read / 1e6:.1f} MB -> "
                f"{stats.bytes_written / 1e6:.2f} MB in {stats.elapsed_s:.2f} s = "
                f"{stats.mb_per_s():.1f} MB/s, {stats.records_read / stats.elapsed_s:,.0f} records/s, "
                f"{stats.records_kept} of {stats.records_read} records kept")
        print(line, file=out, flush=True)
        print(line)
        results.append((name, stats))
    return results


def fill_dirty_topic(bootstrap: str, topic: str, records: int, keys: int) -> None:
    create_topic(bootstrap, topic, 1, {"cleanup.policy": "compact", "segment.bytes": "8388608",
                                       "min.cleanable.dirty.ratio": "0.01"})
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1 << 20,
                  "queue.buffering.max.messages": 2_000_000})
    value = b"v" * 90
    for i in range(records):
        while True:
            try:
                p.produce(topic, key=b"key-%06d" % (i % keys), value=value, partition=0)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(120) == 0


def node_bench(records: int, keys: int, perf_records: int, out: io.StringIO) -> dict[str, object]:
    res: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="odradek-cleaner-node-") as tmp:
        data = Path(tmp) / "data"
        node = BrokerProcess(data, settings={"log.cleaner.enable": "false"})
        node.start()
        port = node.port
        try:
            ensure_topic(node.bootstrap, "perf", 6)
            fill_dirty_topic(node.bootstrap, "dirty", records, keys)
            print("# produce, cleaner off", file=out)
            res["baseline"] = producer_perf.run(node.bootstrap, "perf", perf_records, 100, "1",
                                                out=out)
        finally:
            node.stop()
        node = BrokerProcess(data, port=port, settings={"log.cleaner.backoff.ms": "100"})
        node.start()
        try:
            part = data / "dirty-0"
            deadline = time.monotonic() + 30
            while not any(p.name.endswith(".cleaned") for p in part.iterdir()):
                if time.monotonic() > deadline:
                    raise RuntimeError("the cleaner did not start")
                time.sleep(0.005)
            print("# produce while the cleaner compacts 'dirty'", file=out)
            res["during"] = producer_perf.run(node.bootstrap, "perf", perf_records, 100, "1",
                                              out=out)
            res["cleaning_at_end"] = any(p.name.endswith(".cleaned") for p in part.iterdir())
            deadline = time.monotonic() + 300
            lines: list[str] = []
            while time.monotonic() < deadline:
                lines = [x for x in node.log().splitlines() if "cleaned dirty-0" in x]
                if lines:
                    break
                time.sleep(0.5)
            res["node_lines"] = lines
        finally:
            node.stop()
    return res


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--node-records", type=int, default=1_000_000)
    parser.add_argument("--perf-records", type=int, default=500_000)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    out = io.StringIO()
    print(f"# storage: one pass over {args.records:,} records, {args.keys:,} keys", file=out)
    storage = storage_bench(args.records, args.keys, out)
    node = node_bench(args.node_records, args.keys, args.perf_records, out)
    base = node["baseline"]
    during = node["during"]
    node_mb = ""
    for line in node["node_lines"]:  # type: ignore[attr-defined]
        m = re.search(r"([\d.]+) MB/s", line)
        if m:
            node_mb = m.group(1)
        print(line, file=out)
    m = machine()
    rows = "\n".join(
        f"| in process, {name} batches | {s.bytes_read / 1e6:.1f} | {s.bytes_written / 1e6:.2f} | "
        f"{s.elapsed_s:.2f} | {s.mb_per_s():.1f} | {s.records_read / s.elapsed_s:,.0f} |"
        for name, s in storage
    )
    section = f"""## Issue 5: log cleaner

- date: {dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")}, revision {git_revision()}
- machine: {m.cores} cores ({m.cpu_model}), Linux {m.kernel}, Python {m.python}
- `python -m bench.cleaner_perf --records {args.records} --keys {args.keys} --node-records {args.node_records} --perf-records {args.perf_records}`

Cleaner throughput (one pass, 100 B records, every key updated {args.records // args.keys} times):

| | MB read | MB written | seconds | MB/s cleaned | records/s |
|---|---:|---:|---:|---:|---:|
{rows}
| in the node (its log line), {args.node_records:,} records, none | | | | {node_mb or "?"} | |

Produce throughput (bench.producer_perf, {args.perf_records:,} records of 100 B, 6 partitions, acks=1) on the same node:

| | records/s | MB/s | latency p50 / p99 / max (ms) |
|---|---:|---:|---|
| cleaner off | {base.records_per_sec:,.0f} | {base.mb_per_sec:.1f} | {base.percentiles_ms['50']:.0f} / {base.percentiles_ms['99']:.0f} / {base.max_latency_ms:.0f} |
| while the cleaner compacts a {args.node_records:,}-record topic | {during.records_per_sec:,.0f} | {during.mb_per_sec:.1f} | {during.percentiles_ms['50']:.0f} / {during.percentiles_ms['99']:.0f} / {during.max_latency_ms:.0f} |

(cleaner still working when the produce run ended: {node["cleaning_at_end"]})

Tool output:

```
{out.getvalue().rstrip()}
```
"""
    print(section)
    if not args.no_write:
        text = RESULTS.read_text()
        block = f"{BEGIN}\n{section.rstrip()}\n{END}\n"
        if BEGIN in text and END in text:
            text = re.sub(re.escape(BEGIN) + r".*?" + re.escape(END) + r"\n?", lambda _: block,
                          text, flags=re.S)
        else:
            text = text.rstrip() + "\n\n" + block
        RESULTS.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
