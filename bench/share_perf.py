"""Share-group benchmark (issue 20, KIP-932): delivery rate with 1, 4 and 16 share
consumers on one partition, the acknowledgement cost per record, and the redelivery
latency after an acquisition lock runs out.

    python -m bench.share_perf [--num-records 20000] [--record-size 100]

A fresh node (tests/support/broker.py). Consumers are confluent-kafka ShareConsumers, each
in its own thread (librdkafka does its I/O in its own threads).

- Delivery rate: N records already in one partition; k members of a new group
  (share.auto.offset.reset=earliest, implicit acknowledgement) read until all N were
  delivered; records/s from the subscribe calls to the last record.
- Acknowledgement cost: one member in explicit mode acknowledging every record (accept)
  and committing after each poll, against one in implicit mode; and the share-partition
  state machine alone (acquire + accept per record, in process).
- Redelivery latency: member A acquires a record and never acknowledges it; member B
  waits; the time from A's lock running out (A's receipt + share.record.lock.duration.ms)
  to B's receipt.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from tests.support.broker import BrokerProcess

from odradek.coordinator.share.partition import AckBatch, SharePartition

LOCK_MS = 1000


def _group(admin: AdminClient, group: str, **configs: str) -> None:
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
        for k, v in {"share.auto.offset.reset": "earliest", **configs}.items()])
    for f in admin.incremental_alter_configs([res]).values():
        f.result()


def _fill(bootstrap: str, topic: str, n: int, size: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 262144})
    value = b"x" * size
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value, partition=0)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0


def delivery_rate(bootstrap: str, topic: str, group: str, members: int, n: int,
                  explicit: bool = False) -> float:
    total = [0]
    lock = threading.Lock()
    done = threading.Event()
    began = time.perf_counter()
    finished = [0.0]

    def run() -> None:
        conf = {"bootstrap.servers": bootstrap, "group.id": group}
        if explicit:
            conf["share.acknowledgement.mode"] = "explicit"
        c = ShareConsumer(conf)
        c.subscribe([topic])
        try:
            while not done.is_set():
                msgs = [m for m in list(c.poll(0.2) or []) if m.error() is None]
                if explicit and msgs:
                    for m in msgs:
                        c.acknowledge(m, AcknowledgeType.ACCEPT)
                    c.commit_sync()
                with lock:
                    total[0] += len(msgs)
                    if total[0] >= n and not done.is_set():
                        finished[0] = time.perf_counter()
                        done.set()
        finally:
            c.close()

    threads = [threading.Thread(target=run) for _ in range(members)]
    for t in threads:
        t.start()
    done.wait(600)
    for t in threads:
        t.join(60)
    return n / (finished[0] - began)


def redelivery_latency(bootstrap: str, topic: str, group: str, rounds: int) -> list[float]:
    p = Producer({"bootstrap.servers": bootstrap})
    conf = {"bootstrap.servers": bootstrap, "group.id": group,
            "share.acknowledgement.mode": "explicit"}
    b = ShareConsumer(conf)
    b.subscribe([topic])
    out = []
    try:
        for i in range(rounds):
            a = ShareConsumer(conf)  # holds its record without acknowledging it
            a.subscribe([topic])
            p.produce(topic, str(i).encode(), partition=0)
            p.flush(10)
            got_a = None
            while got_a is None:
                if [m for m in list(a.poll(0.1) or []) if m.error() is None]:
                    got_a = time.perf_counter()
                    break
                for m in list(b.poll(0.01) or []):  # b won a first delivery: next record
                    if m.error() is None:
                        b.acknowledge(m, AcknowledgeType.ACCEPT)
                        b.commit_sync()
                        p.produce(topic, str(i).encode(), partition=0)
                        p.flush(10)
            while True:
                msgs = [m for m in list(b.poll(0.05) or []) if m.error() is None]
                if msgs:
                    out.append((time.perf_counter() - got_a) * 1000 - LOCK_MS)
                    for m in msgs:
                        b.acknowledge(m, AcknowledgeType.ACCEPT)
                    b.commit_sync()
                    break
            a.close()
    finally:
        b.close()
    return out


def state_machine_cost(n: int) -> float:
    """µs per record for acquire + accept on the share-partition alone (batches of 100)."""
    sp = SharePartition(0, max_record_locks=10_000)
    began = time.perf_counter()
    for base in range(0, n, 100):
        sp.acquire("m", [(base, base + 99)], 500, 0)
        sp.acknowledge("m", [AckBatch(base, base + 99, (1,))], 1)
    return (time.perf_counter() - began) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--num-records", type=int, default=20_000)
    ap.add_argument("--record-size", type=int, default=100)
    args = ap.parse_args()
    n = args.num_records
    with tempfile.TemporaryDirectory() as tmp:
        node = BrokerProcess(Path(tmp) / "data", settings={
            "group.share.min.record.lock.duration.ms": str(LOCK_MS)}).start(timeout=120)
        try:
            admin = AdminClient({"bootstrap.servers": node.bootstrap})
            admin.create_topics([NewTopic("share-bench", 1, 1)])["share-bench"].result()
            admin.create_topics([NewTopic("share-redeliver", 1, 1)])["share-redeliver"].result()
            _fill(node.bootstrap, "share-bench", n, args.record_size)
            for k in (1, 4, 16):
                _group(admin, f"bench-{k}")
                rate = delivery_rate(node.bootstrap, "share-bench", f"bench-{k}", k, n)
                print(f"delivery, {k:2d} consumers on 1 partition: {rate:10.0f} records/s")
            _group(admin, "bench-explicit")
            explicit = delivery_rate(node.bootstrap, "share-bench", "bench-explicit", 1, n,
                                     explicit=True)
            print(f"delivery, 1 consumer, explicit accept + commit per poll: {explicit:.0f} "
                  "records/s")
            print(f"share-partition acquire + accept (in process): "
                  f"{state_machine_cost(200_000):.2f} µs/record")
            _group(admin, "bench-redeliver", **{"share.record.lock.duration.ms": str(LOCK_MS)})
            lat = redelivery_latency(node.bootstrap, "share-redeliver", "bench-redeliver", 5)
            print(f"redelivery after a {LOCK_MS} ms lock: median {statistics.median(lat):.0f} ms "
                  f"past the lock's end (min {min(lat):.0f}, max {max(lat):.0f}, {len(lat)} "
                  "rounds)")
        finally:
            node.stop()


if __name__ == "__main__":
    main()
