"""A producer benchmark that prints what kafka-producer-perf-test prints, on confluent-kafka.

    python -m bench.producer_perf --bootstrap 127.0.0.1:9092 --topic perf \
        --num-records 1000000 --record-size 100 --partitions 6 --acks 1

Latency is librdkafka's own per-message latency (produce() call to delivery report,
`Message.latency()`), read in the delivery callback of one record in SAMPLE_EVERY: a Python
callback per record would cost the client about a third of its throughput. How many records
the node acknowledged is counted exactly, from the partitions' high watermarks before and
after the run.
"""

from __future__ import annotations

import argparse
import random
import string
import sys
import time
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

REPORT_INTERVAL_S = 5.0
SAMPLE_EVERY = 16


@dataclass
class Window:
    """Counts between two progress lines (and for the whole run)."""

    start: float
    count: int = 0
    bytes: int = 0
    latency_sum_ms: float = 0.0
    latency_max_ms: float = 0.0

    def add(self, latency_ms: float, size: int) -> None:
        self.count += SAMPLE_EVERY
        self.bytes += size * SAMPLE_EVERY
        self.latency_sum_ms += latency_ms
        if latency_ms > self.latency_max_ms:
            self.latency_max_ms = latency_ms

    def line(self, now: float) -> str:
        elapsed = max(now - self.start, 1e-9)
        rate = self.count / elapsed
        mb = self.bytes / elapsed / (1024 * 1024)
        avg = self.latency_sum_ms * SAMPLE_EVERY / self.count if self.count else 0.0
        return (f"{self.count} records sent, {rate:.1f} records/sec ({mb:.2f} MB/sec), "
                f"{avg:.1f} ms avg latency, {self.latency_max_ms:.1f} ms max latency")


@dataclass
class ProducerResult:
    records: int
    errors: int
    seconds: float
    records_per_sec: float
    mb_per_sec: float
    avg_latency_ms: float
    max_latency_ms: float
    percentiles_ms: dict[str, float] = field(default_factory=dict)

    def summary(self) -> str:
        p = self.percentiles_ms
        return (f"{self.records} records sent, {self.records_per_sec:.1f} records/sec "
                f"({self.mb_per_sec:.2f} MB/sec), {self.avg_latency_ms:.2f} ms avg latency, "
                f"{self.max_latency_ms:.2f} ms max latency, {p['50']:.0f} ms 50th, "
                f"{p['95']:.0f} ms 95th, {p['99']:.0f} ms 99th, {p['99.9']:.0f} ms 99.9th.")


class Stats:
    """Latencies of the sampled records; each stands for SAMPLE_EVERY records in the counts."""

    def __init__(self, record_size: int, out: object) -> None:
        now = time.monotonic()
        self.total = Window(now)
        self.window = Window(now)
        self.record_size = record_size
        self.samples: list[float] = []
        self.errors = 0
        self.first_error: str | None = None
        self.out = out

    def on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.errors += 1
            if self.first_error is None:
                self.first_error = f"{err.name()}: {err.str()}"
            return
        latency_ms = (msg.latency() or 0.0) * 1000.0
        self.total.add(latency_ms, self.record_size)
        self.window.add(latency_ms, self.record_size)
        self.samples.append(latency_ms)

    def maybe_report(self) -> None:
        now = time.monotonic()
        if now - self.window.start >= REPORT_INTERVAL_S:
            print(self.window.line(now) + ".", file=self.out, flush=True)  # type: ignore[call-overload]
            self.window = Window(now)


def percentile(sorted_values: list[float], fraction: float) -> float:
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(fraction * len(sorted_values)))]


def make_payload(size: int, seed: int = 0) -> bytes:
    # As kafka-producer-perf-test: random uppercase letters, one payload for every record.
    rng = random.Random(seed)
    return "".join(rng.choice(string.ascii_uppercase) for _ in range(size)).encode()


def producer_config(bootstrap: str, acks: str, extra: dict[str, str] | None = None) -> dict[str, object]:
    conf: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "acks": acks,
        "linger.ms": 5,
        "batch.size": 1024 * 1024,
        "batch.num.messages": 100000,
        "queue.buffering.max.messages": 2_000_000,
        "queue.buffering.max.kbytes": 2 * 1024 * 1024,
        "compression.type": "none",
        "message.max.bytes": 2 * 1024 * 1024,
    }
    conf.update(extra or {})
    return conf


def high_watermarks(bootstrap: str, topic: str) -> int:
    """The sum of the topic's high watermarks: records the node has acknowledged, ever."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "odradek-bench-watermarks",
                         "enable.auto.commit": False})
    try:
        meta = consumer.list_topics(topic, timeout=30).topics[topic]
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                   for p in meta.partitions)
    finally:
        consumer.close()


def run(bootstrap: str, topic: str, num_records: int, record_size: int, acks: str = "1",
        extra: dict[str, str] | None = None, out: object = sys.stdout) -> ProducerResult:
    payload = make_payload(record_size)
    stats = Stats(record_size, out)
    before = high_watermarks(bootstrap, topic)
    producer = Producer(producer_config(bootstrap, acks, extra))
    produce = producer.produce
    poll = producer.poll
    callback = stats.on_delivery
    start = time.monotonic()
    stats.total.start = stats.window.start = start
    for i in range(num_records):
        while True:
            try:
                if i % SAMPLE_EVERY:
                    produce(topic, payload)
                else:
                    produce(topic, payload, on_delivery=callback)
                break
            except BufferError:
                poll(0.005)
        if i & 1023 == 0:
            poll(0)
            stats.maybe_report()
    while len(producer) > 0:
        poll(0.05)
        stats.maybe_report()
    end = time.monotonic()
    producer.flush()
    acknowledged = high_watermarks(bootstrap, topic) - before
    elapsed = max(end - start, 1e-9)
    samples = sorted(stats.samples)
    result = ProducerResult(
        records=acknowledged,
        errors=num_records - acknowledged,
        seconds=elapsed,
        records_per_sec=acknowledged / elapsed,
        mb_per_sec=acknowledged * record_size / elapsed / (1024 * 1024),
        avg_latency_ms=sum(samples) / len(samples) if samples else 0.0,
        max_latency_ms=samples[-1] if samples else 0.0,
        percentiles_ms={name: percentile(samples, q)
                        for name, q in (("50", 0.5), ("95", 0.95), ("99", 0.99), ("99.9", 0.999))},
    )
    print(result.summary(), file=out, flush=True)  # type: ignore[call-overload]
    if result.errors:
        print(f"{result.errors} records not acknowledged; first sampled error: "
              f"{stats.first_error}", file=sys.stderr)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", "--bootstrap-server", default="localhost:9092")
    parser.add_argument("--topic", default="perf")
    parser.add_argument("--num-records", type=int, default=1_000_000)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=6,
                        help="Create the topic with this many partitions if it does not exist.")
    parser.add_argument("--acks", default="1")
    parser.add_argument("-X", dest="extra", action="append", default=[],
                        help="A librdkafka producer setting key=value (repeatable).")
    args = parser.parse_args(argv)
    from bench.topics import ensure_topic

    ensure_topic(args.bootstrap, args.topic, args.partitions)
    extra = dict(kv.split("=", 1) for kv in args.extra)
    result = run(args.bootstrap, args.topic, args.num_records, args.record_size, args.acks, extra)
    return 1 if result.errors else 0


if __name__ == "__main__":
    sys.exit(main())
