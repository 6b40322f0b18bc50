"""Issue 23: where `make bench`'s "N records not acknowledged" comes from.

    python -m bench.produce_acks [--systems odradek,tansu] [--sizes 100,1024] [--runs 2]

The produce-only phase as bench.compare runs it for odradek and Tansu (confluent-kafka perf
producer, 2 processes, at most 3M records or 3 s, acks=1, 6 partitions). The perf tool counts
a record "acknowledged" from the topic's high watermarks (ListOffsets latest, after minus
before) and prints "N records not acknowledged" for sent minus that. Here every phase is
checked three ways: records sent, delivery errors (the producers' delivery reports), the high
watermarks, and the records a consumer really reads back (bench/c/rdkafka_consume linked
against confluent-kafka's librdkafka 2.16: Debian's 2.0.2 cannot parse Tansu's ApiVersions v3
answer), partition by partition.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from bench.peers.odradek_rdkafka_c import bundled_tool, run_tool
from odradek.client.consumer_settings import SHIPPED
from odradek.perf.confluent import produce_records
from odradek.perf.parallel import _Pool, shares

PARTITIONS = 6


def watermarks(bootstrap: str, topic: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "acks-probe"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                for p in range(PARTITIONS)}
    finally:
        c.close()


def read_back(bootstrap: str, topic: str, partition: int, expected: int) -> int:
    """Records a plain consumer reads from one partition (until 5 s without one)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"acks-read-{os.getpid()}",
                  "enable.partition.eof": True, "fetch.queue.backoff.ms": 5})
    n = 0
    try:
        c.assign([TopicPartition(topic, partition, 0)])
        last = time.monotonic()
        while time.monotonic() - last < 5:
            msgs = c.consume(10000, 0.5)
            for m in msgs:
                if m.error() is None:
                    n += 1
                    last = time.monotonic()
                elif n >= expected:
                    return n  # partition EOF at or past what was expected
    finally:
        c.close()
    return n


def phase(system: object, size: int, seq: int) -> str:
    bootstrap = system.endpoint  # type: ignore[attr-defined]
    topic = f"acks-{size}-{seq}"
    system.create(topic, PARTITIONS)  # type: ignore[attr-defined]
    before = watermarks(bootstrap, topic)
    pool = _Pool()
    for count in shares(3_000_000, 2):
        pool.start(produce_records, (bootstrap, topic, count, size, "1", None, None, -1, 3.0), {})
    pool.release()
    runs = pool.collect(timeout=600)
    sent = sum(r.sent for r in runs)
    # The delivery report of every 16th record is kept (SAMPLE_EVERY): errors there are real
    # refusals or timeouts; none means librdkafka delivered every batch it was given.
    errors = sum(r.errors for r in runs)
    after = watermarks(bootstrap, topic)
    hw = sum(after[p] - before[p] for p in after)
    per_part = {p: read_back(bootstrap, topic, p, after[p] - before[p]) for p in after}
    got = sum(per_part.values())
    whole = run_tool(bootstrap, topic, sent, 5, SHIPPED, tool=bundled_tool())
    detail = ", ".join(f"p{p} {after[p] - before[p]:,}/{per_part[p]:,}" for p in after)
    return (f"| {system.name} | {size} B | {sent:,} | {errors} | {hw:,} | "  # type: ignore[attr-defined]
            f"{sent - hw:,} | {got:,} | {int(whole['records']):,} | {detail} | "
            f"{os.getloadavg()[0]:.1f} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--systems", default="odradek,tansu")
    ap.add_argument("--sizes", default="100,1024")
    ap.add_argument("--runs", type=int, default=2)
    args = ap.parse_args(argv)
    from bench.compare import make_system

    print("| system | size | sent | delivery errors (sampled) | high watermarks | "
          "\"not acknowledged\" (sent - watermarks) | read back per partition | read back "
          "(C tool) | per partition: watermark / read back | load 1m |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    seq = 0
    with tempfile.TemporaryDirectory() as tmp:
        systems = []
        for name in args.systems.split(","):
            s = make_system(name)
            s.start(Path(tmp))
            systems.append(s)
        try:
            for _ in range(args.runs):
                for size in (int(x) for x in args.sizes.split(",")):
                    for s in systems:  # A, B, A, B
                        seq += 1
                        print(phase(s, size, seq), flush=True)
        finally:
            for s in systems:
                s.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
