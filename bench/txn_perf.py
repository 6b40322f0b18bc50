"""Idempotent and transactional produce benchmark, and read_committed end-to-end latency.

    python -m bench.txn_perf [--num-records 300000] [--record-size 100]
    python -m bench.txn_perf --write-results     # also append the "Issue 6" section

A fresh node (tests/support/broker.py), confluent-kafka, 6 partitions, acks=all throughout
(idempotence forces it, so the plain run uses it too for a fair comparison).

- plain vs idempotent: N records of S bytes, records/s and MB/s from first send to flush.
- transactional: the same N records in transactions of 100 and of 10,000 records
  (begin, produce, commit), records/s and transactions/s.
- end-to-end latency: a read_committed consumer reads transactions of 100 records while
  they are produced at a moderate rate; latency = time the record is read - time its
  transaction began committing (its records become visible with the commit marker).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from tests.support.broker import BrokerProcess

from odradek.client import consumer_settings

RESULTS = Path(__file__).with_name("RESULTS.md")
PARTITIONS = 6


def create(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(30)


def produce_run(bootstrap: str, topic: str, n: int, size: int, conf: dict[str, object],
                txn_size: int = 0) -> tuple[float, int]:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "batch.num.messages": 10000, "queue.buffering.max.messages": 1000000,
                  **conf})
    payload = b"x" * size
    txns = 0
    if txn_size:
        p.init_transactions(30)
    began = time.perf_counter()
    sent = 0
    while sent < n:
        chunk = min(txn_size or n, n - sent)
        if txn_size:
            p.begin_transaction()
        for _ in range(chunk):
            while True:
                try:
                    p.produce(topic, payload)
                    break
                except BufferError:
                    p.poll(0.01)
        sent += chunk
        if txn_size:
            p.commit_transaction(60)
            txns += 1
    p.flush(120)
    return time.perf_counter() - began, txns


def e2e_latency(bootstrap: str, topic: str, txns: int, per_txn: int, size: int,
                batch_consume: bool = False) -> tuple[list[float], list[float]]:
    """(end-to-end latencies, commit_transaction call durations), in ms.

    The consumer reads with poll(), which returns as soon as one record is there.
    `batch_consume` uses consume(1000, 0.1) as the first version of this benchmark did:
    librdkafka's batch consume waits until it has 1000 records or the 100 ms pass, so with
    100-record transactions it measures that wait, not the broker (p50 ~57 ms).
    """
    commit_started: dict[int, float] = {}
    commit_calls: list[float] = []
    lat: list[float] = []
    done = threading.Event()

    def consume() -> None:
        c = Consumer(consumer_settings(bootstrap, group_id="lat",
                                       isolation_level="read_committed",
                                       auto_offset_reset="earliest", fetch_wait_max_ms=10,
                                       enable_auto_commit=False))
        c.subscribe([topic])
        seen = 0
        while seen < txns * per_txn and not done.is_set():
            if batch_consume:
                msgs = c.consume(1000, 0.1)
            else:
                one = c.poll(0.1)
                msgs = [] if one is None else [one]
            for m in msgs:
                if m.error():
                    continue
                now = time.perf_counter()
                t = int(m.value()[:10])
                if t in commit_started:
                    lat.append((now - commit_started[t]) * 1000)
                seen += 1
        c.close()

    th = threading.Thread(target=consume)
    th.start()
    time.sleep(3)  # the consumer joins its group first
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "lat", "linger.ms": 1})
    p.init_transactions(30)
    for t in range(txns):
        p.begin_transaction()
        value = b"%010d" % t + b"x" * max(0, size - 10)
        for _ in range(per_txn):
            p.produce(topic, value)
        p.flush(30)
        commit_started[t] = began = time.perf_counter()
        p.commit_transaction(30)
        commit_calls.append((time.perf_counter() - began) * 1000)
        time.sleep(0.02)
    th.join(60)
    done.set()
    return lat, commit_calls


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--num-records", type=int, default=300000)
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--write-results", action="store_true")
    ap.add_argument("--latency-only", action="store_true", help="only the read_committed latency")
    ap.add_argument("--batch-consume", action="store_true",
                    help="consumer uses consume(1000, 0.1) (the first version's way)")
    args = ap.parse_args()
    n, size = args.num_records, args.record_size
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        node = BrokerProcess(Path(tmp) / "data").start()
        try:
            b = node.bootstrap
            runs = [("plain (acks=all)", {}, 0), ("idempotent", {"enable.idempotence": True}, 0),
                    ("transactional, 100 records/txn", {"transactional.id": "b100"}, 100),
                    ("transactional, 10000 records/txn", {"transactional.id": "b10k"}, 10000)]
            for i, (label, conf, txn) in enumerate([] if args.latency_only else runs):
                topic = f"bench-{i}"
                create(b, topic)
                count = n if txn != 100 else min(n, 100000)
                secs, txns = produce_run(b, topic, count, size, conf, txn)
                line = (f"{label}: {count} records in {secs:.2f} s = {count / secs:,.0f} records/s "
                        f"({count * size / secs / 1e6:.2f} MB/s)")
                if txns:
                    line += f", {txns / secs:,.1f} transactions/s"
                print(line, flush=True)
                lines.append(line)
            create(b, "bench-lat")
            lat, calls = e2e_latency(b, "bench-lat", 200, 100, size, args.batch_consume)
            how = "consume(1000, 0.1)" if args.batch_consume else "poll()"
            for what, values in ((f"read_committed end-to-end latency (commit begun -> record "
                                  f"read, consumer {how}), 200 txns x 100", lat),
                                 ("commit_transaction() call (flush + EndTxn round trip)", calls)):
                line = (f"{what}: p50 {pct(values, 0.5):.1f} ms, p95 {pct(values, 0.95):.1f} ms, "
                        f"p99 {pct(values, 0.99):.1f} ms, "
                        f"max {max(values) if values else float('nan'):.1f} ms, "
                        f"mean {statistics.fmean(values) if values else float('nan'):.1f} ms")
                print(line, flush=True)
                lines.append(line)
        finally:
            node.stop()
    if args.write_results:
        with RESULTS.open("a") as f:
            f.write("\n\n## Issue 6: idempotent and transactional produce\n\n"
                    f"`python -m bench.txn_perf --num-records {n} --record-size {size}` "
                    "(one node, 6 partitions, confluent-kafka, acks=all):\n\n```\n"
                    + "\n".join(lines) + "\n```\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
