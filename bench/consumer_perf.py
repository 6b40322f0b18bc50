"""A consumer benchmark that prints what kafka-consumer-perf-test prints, on confluent-kafka.

    python -m bench.consumer_perf --bootstrap 127.0.0.1:9092 --topic perf --num-records 1000000

Reads every partition from the beginning with assign() (no group, so rebalance time is 0)
in consume(num_messages=...) batches and counts key + value bytes like the Java tool.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
          "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")


@dataclass
class ConsumerResult:
    records: int
    bytes: int
    start_wall: float
    end_wall: float
    seconds: float

    @property
    def mb(self) -> float:
        return self.bytes / (1024 * 1024)

    @property
    def records_per_sec(self) -> float:
        return self.records / max(self.seconds, 1e-9)

    @property
    def mb_per_sec(self) -> float:
        return self.mb / max(self.seconds, 1e-9)

    def line(self) -> str:
        ms = self.seconds * 1000
        return (f"{_stamp(self.start_wall)}, {_stamp(self.end_wall)}, {self.mb:.4f}, "
                f"{self.mb_per_sec:.4f}, {self.records}, {self.records_per_sec:.4f}, 0, "
                f"{ms:.0f}, {self.mb_per_sec:.4f}, {self.records_per_sec:.4f}")


def _stamp(t: float) -> str:
    d = datetime.fromtimestamp(t)
    return d.strftime("%Y-%m-%d %H:%M:%S:") + f"{d.microsecond // 1000:03d}"


def consumer_config(bootstrap: str, extra: dict[str, str] | None = None) -> dict[str, object]:
    conf: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "group.id": f"odradek-bench-{os.getpid()}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "fetch.max.bytes": 64 * 1024 * 1024,
        "max.partition.fetch.bytes": 16 * 1024 * 1024,
        "fetch.wait.max.ms": 100,
        "queued.min.messages": 1_000_000,
        "queued.max.messages.kbytes": 512 * 1024,
        "receive.message.max.bytes": 128 * 1024 * 1024,
    }
    conf.update(extra or {})
    return conf


def _consume(bootstrap: str, topic: str, partitions: list[int] | None, num_records: int,
             timeout_s: float, extra: dict[str, str] | None,
             ready: Any = None, go: Any = None) -> tuple[int, int, float, float]:
    """Read until num_records or timeout_s without a record: (records, bytes, start, end)."""
    consumer = Consumer(consumer_config(bootstrap, extra))
    try:
        if partitions is None:
            meta = consumer.list_topics(topic, timeout=30).topics[topic]
            if meta.error is not None:
                raise RuntimeError(f"topic {topic}: {meta.error.name()}")
            partitions = sorted(meta.partitions)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        if ready is not None:
            ready.set()
            go.wait()
        count = 0
        nbytes = 0
        start = time.time()
        last = start
        consume = consumer.consume
        while count < num_records:
            batch = consume(num_messages=10000, timeout=0.5)
            if not batch:
                if time.time() - last > timeout_s:
                    break
                continue
            for msg in batch:
                value = msg.value()
                if value is None:
                    err = msg.error()
                    if err is not None:
                        if err.code() != KafkaError._PARTITION_EOF:
                            print(f"consumer error: {err.name()}: {err.str()}", file=sys.stderr)
                        continue
                else:
                    nbytes += len(value)
                key = msg.key()
                if key is not None:
                    nbytes += len(key)
                count += 1
            last = time.time()
    finally:
        consumer.close()
    return count, nbytes, start, last


def _worker(args: tuple[Any, ...], results: Any) -> None:
    results.put(_consume(*args))


def run(bootstrap: str, topic: str, num_records: int, timeout_s: float = 10.0,
        extra: dict[str, str] | None = None, out: object = sys.stdout,
        processes: int = 1) -> ConsumerResult:
    """One consumer, or `processes` consumers splitting the partitions between them (one
    Python process tops out near one core; kafka-consumer-perf-test had --threads for this)."""
    if processes <= 1:
        count, nbytes, start, end = _consume(bootstrap, topic, None, num_records, timeout_s, extra)
    else:
        count, nbytes, start, end = _run_processes(bootstrap, topic, num_records, timeout_s,
                                                   extra, processes)
    result = ConsumerResult(count, nbytes, start, end, end - start)
    print(HEADER, file=out)  # type: ignore[call-overload]
    print(result.line(), file=out, flush=True)  # type: ignore[call-overload]
    return result


def _run_processes(bootstrap: str, topic: str, num_records: int, timeout_s: float,
                   extra: dict[str, str] | None, processes: int) -> tuple[int, int, float, float]:
    probe = Consumer(consumer_config(bootstrap, extra))
    try:
        partitions = sorted(probe.list_topics(topic, timeout=30).topics[topic].partitions)
        per_partition = [probe.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
                         for p in partitions]
    finally:
        probe.close()
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    go = ctx.Event()
    workers = []
    readies = []
    for i in range(processes):
        mine = partitions[i::processes]
        if not mine:
            continue
        # Each worker stops at what its partitions held when the run began (or num_records).
        quota = min(num_records, sum(high - low for p, (low, high) in zip(partitions, per_partition, strict=True)
                                     if p in mine))
        ready = ctx.Event()
        proc = ctx.Process(target=_worker, args=((bootstrap, topic, mine, quota, timeout_s, extra,
                                                  ready, go), results))
        proc.start()
        workers.append(proc)
        readies.append(ready)
    for ready in readies:
        ready.wait(60)
    go.set()
    parts = [results.get() for _ in workers]
    for proc in workers:
        proc.join()
    return (sum(p[0] for p in parts), sum(p[1] for p in parts), min(p[2] for p in parts),
            max(p[3] for p in parts))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", "--bootstrap-server", default="localhost:9092")
    parser.add_argument("--topic", default="perf")
    parser.add_argument("--num-records", "--messages", type=int, default=1_000_000)
    parser.add_argument("--timeout", type=float, default=10.0,
                        help="Stop after this many seconds without a record.")
    parser.add_argument("-X", dest="extra", action="append", default=[],
                        help="A librdkafka consumer setting key=value (repeatable).")
    parser.add_argument("--processes", type=int, default=1,
                        help="Consumer processes splitting the partitions (default 1).")
    args = parser.parse_args(argv)
    extra = dict(kv.split("=", 1) for kv in args.extra)
    result = run(args.bootstrap, args.topic, args.num_records, args.timeout, extra,
                 processes=args.processes)
    return 0 if result.records >= args.num_records else 1


if __name__ == "__main__":
    sys.exit(main())
