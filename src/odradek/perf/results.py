"""The perf tools' shared result types: what one run measured, and how it is printed.

Every tool in odradek.perf (confluent-kafka or columnar client, one process or several)
returns these, so callers (the CLI, bench/) compare runs without knowing which client ran.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from datetime import datetime
from typing import TextIO

REPORT_INTERVAL_S = 5.0
SAMPLE_EVERY = 16
PERCENTILES = (("50", 0.5), ("95", 0.95), ("99", 0.99), ("99.9", 0.999))


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
    record_size: int = 0

    @property
    def bytes(self) -> int:
        return self.records * self.record_size

    def summary(self) -> str:
        p = self.percentiles_ms
        return (f"{self.records} records sent, {self.records_per_sec:.1f} records/sec "
                f"({self.mb_per_sec:.2f} MB/sec), {self.avg_latency_ms:.2f} ms avg latency, "
                f"{self.max_latency_ms:.2f} ms max latency, {p['50']:.0f} ms 50th, "
                f"{p['95']:.0f} ms 95th, {p['99']:.0f} ms 99th, {p['99.9']:.0f} ms 99.9th.")


def percentile(sorted_values: list[float], fraction: float) -> float:
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(fraction * len(sorted_values)))]


@dataclass
class ProduceRun:
    """What one producer (process) did: records handed to produce(), sampled latencies (ms),
    sampled delivery errors, and its start and end on CLOCK_MONOTONIC (system wide)."""

    sent: int
    samples: list[float]
    errors: int
    first_error: str | None
    start: float
    end: float


def producer_result(acknowledged: int, seconds: float, record_size: int,
                    samples: list[float]) -> ProducerResult:
    """Totals and latency percentiles (over the sampled records of every process)."""
    samples = sorted(samples)
    elapsed = max(seconds, 1e-9)
    return ProducerResult(
        records=acknowledged,
        errors=0,
        seconds=elapsed,
        records_per_sec=acknowledged / elapsed,
        mb_per_sec=acknowledged * record_size / elapsed / (1024 * 1024),
        avg_latency_ms=sum(samples) / len(samples) if samples else 0.0,
        max_latency_ms=samples[-1] if samples else 0.0,
        percentiles_ms={name: percentile(samples, q) for name, q in PERCENTILES},
        record_size=record_size,
    )


def report_producer(result: ProducerResult, out: TextIO | None, first_error: str | None,
                    processes: int = 1) -> None:
    if out is not None:
        if processes > 1:
            print(f"# {processes} producer processes", file=out)
        print(result.summary(), file=out, flush=True)
    if result.errors:
        print(f"{result.errors} records not acknowledged; first sampled error: "
              f"{first_error}", file=sys.stderr)


CONSUMER_HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, "
                   "nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")


@dataclass
class ConsumerResult:
    records: int
    bytes: int
    start_wall: float
    end_wall: float
    seconds: float
    errors: int = 0
    cpu_seconds: float = 0.0  # of the client process(es), all threads
    client: str = "confluent-kafka"

    @property
    def cpu_per_million(self) -> float:
        return self.cpu_seconds / max(self.records / 1e6, 1e-12)

    def client_line(self) -> str:
        return (f"# client: {self.client}; client CPU {self.cpu_seconds:.2f} s "
                f"({self.cpu_per_million:.2f} CPU s per 1M records)")

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


DEFAULT_BATCH = 10000
CONFLUENT = "confluent-kafka"
COLUMNAR = "columnar"
CLIENTS = (CONFLUENT, COLUMNAR)


def client_label(client: str) -> str:
    if client == COLUMNAR:
        return "columnar (odradek's own Fetch v11 client + numpy decoder, not confluent-kafka)"
    return "confluent-kafka (librdkafka)"


@dataclass
class ConsumeRun:
    """What one consumer (process) read: records and key + value bytes counted from the
    messages themselves, errors other than end-of-partition, and its start and end
    (wall clock, time.time())."""

    records: int
    bytes: int
    start: float
    end: float
    errors: int = 0
    first_error: str | None = None
    processes: int = 1
    cpu_seconds: float = 0.0  # process CPU (every thread) from start to end


@dataclass
class LatencyResult:
    """End-to-end latencies (ms) of the measured records, and the rate that was achieved."""

    records: int
    seconds: float
    latencies_ms: list[float]

    @property
    def records_per_sec(self) -> float:
        return self.records / max(self.seconds, 1e-9)

    def pct(self, fraction: float) -> float:
        return percentile(self.latencies_ms, fraction)

    @property
    def avg_ms(self) -> float:
        return sum(self.latencies_ms) / len(self.latencies_ms) if self.latencies_ms else 0.0

    def summary(self) -> str:
        # EndToEndLatency prints the average and three percentiles; the rate is ours.
        return (f"{self.records} records at {self.records_per_sec:.1f} records/sec\n"
                f"Avg latency: {self.avg_ms:.4f} ms\n"
                f"Percentiles: 50th = {self.pct(0.5):.3f}, 99th = {self.pct(0.99):.3f}, "
                f"99.9th = {self.pct(0.999):.3f}")


def latency_result(sent: int, measured_s: float, count: int,
                   latencies: list[float]) -> LatencyResult:
    """Every measured record's latency, sorted; a record that never arrived is reported."""
    latencies.sort()
    if count < sent:
        print(f"end-to-end: {sent - count} of {sent} records never reached the consumer",
              file=sys.stderr)
    return LatencyResult(records=len(latencies), seconds=measured_s, latencies_ms=latencies)
