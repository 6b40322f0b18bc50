"""The columnar producer perf tool: `odradek bench produce --client columnar`.

kafka-producer-perf-test's loop and report over odradek's own Produce client
(odradek.client.producer_columnar): every record is the same random payload, batches are
built with numpy, acknowledged records are counted from the topic's high watermarks.
"""

from __future__ import annotations

import collections
import importlib
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from odradek.client.config import resolve_bootstrap
from odradek.client.connection import error_name, fetch_supports
from odradek.client.producer_columnar import (
    UNKNOWN_TOPIC_OR_PARTITION,
    ColumnarProducer,
    ProduceError,
    Settings,
    acks_value,
    settings_from,
)
from odradek.perf.confluent import high_watermarks, make_payload
from odradek.perf.results import (
    REPORT_INTERVAL_S,
    ProducerResult,
    ProduceRun,
    producer_result,
    report_producer,
)

__all__ = ["COLUMNAR_LABEL", "ColumnarRun", "finish_columnar", "produce_columnar"]

COLUMNAR_LABEL = ("columnar (odradek's own Produce v9 client, record batches built with numpy, "
                  "not confluent-kafka)")
_WARM = ("kio.schema.produce.v9.response", "kio.schema.metadata.v8.request",
         "kio.schema.metadata.v8.response", "odradek.protocol.messages", "numpy")


@dataclass
class ColumnarRun(ProduceRun):
    """ProduceRun plus the client's own counts: records the node answered without error,
    CPU seconds of this process, and errors per (partition, error code)."""

    acked: int = 0
    cpu_seconds: float = 0.0
    error_codes: dict[tuple[int, int], int] = field(default_factory=dict)


def records_per_batch(settings: Settings, record_size: int) -> int:
    """batch.num.messages, fewer when batch.size (bytes of the whole batch) is reached first."""
    from odradek.client.batch_builder import fixed_column, records_size

    value = b"\0" * record_size

    def fits(count: int) -> bool:
        # The offset delta's and the length's varints grow with the batch: measure it whole.
        return 61 + records_size(None, fixed_column(value, count)) <= settings.batch_size

    lo, hi = 1, settings.batch_num_messages
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def produce_columnar(bootstrap: str | None, topic: str, num_records: int, record_size: int,
                     acks: str = "1", extra: Mapping[str, str] | None = None,
                     out: TextIO | None = None, throughput: float = -1,
                     max_seconds: float | None = None, ready: Any = None,
                     go: Any = None) -> ColumnarRun:
    """The produce loop of one process (the perf tool's; `ready`/`go` as in
    perf.confluent.produce_records). Every record carries the same random payload of record_size bytes
    and a null key, as kafka-producer-perf-test sends: the payload is still copied into
    every record of every batch (a broadcast view, not a cached batch)."""
    for name in _WARM:
        importlib.import_module(name)
    from odradek.client.batch_builder import build_columnar_batch, fixed_column

    client = {"bootstrap.servers": resolve_bootstrap(bootstrap), **dict(extra or {})}
    if not fetch_supports(client):
        raise RuntimeError("the columnar client speaks PLAINTEXT, SSL (PEM files) and SASL "
                           "PLAIN/SCRAM; these security settings need confluent-kafka")
    settings = settings_from(acks, extra)
    producer = ColumnarProducer(client["bootstrap.servers"], topic, settings)
    try:
        producer.connect()
        partitions = producer.partitions
        if not partitions:
            raise ProduceError(UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic} has no partitions")
        per_request = settings.batches_per_request or len(partitions)
        per_request = min(per_request, len(partitions))
        per_batch = records_per_batch(settings, record_size)
        values = fixed_column(make_payload(record_size), per_batch)
        if ready is not None:
            ready.set()
            go.wait()
        cpu0 = time.process_time()
        start = time.monotonic()
        deadline = start + max_seconds if max_seconds else float("inf")
        window_start, window_count, window_lat = start, 0, len(producer.latencies_ms)
        sent = turn = 0
        while sent < num_records and time.monotonic() < deadline:
            batches = []
            now_ms = int(time.time() * 1000)
            for _ in range(per_request):
                n = min(per_batch, num_records - sent)
                if n <= 0:
                    break
                batch = build_columnar_batch(values[:n], base_timestamp=now_ms,
                                             compression=settings.compression)
                batches.append((partitions[turn % len(partitions)], batch))
                turn += 1
                sent += n
                window_count += n
            producer.send(batches)
            if throughput > 0:
                ahead = sent / throughput - (time.monotonic() - start)
                if ahead > 0:
                    time.sleep(ahead)
            now = time.monotonic()
            if out is not None and now - window_start >= REPORT_INTERVAL_S:
                _window_line(out, window_count, now - window_start, record_size,
                             producer.latencies_ms[window_lat:])
                window_start, window_count = now, 0
                window_lat = len(producer.latencies_ms)
        producer.flush()
        end = time.monotonic()
        cpu = time.process_time() - cpu0
    finally:
        producer.close()
    return ColumnarRun(sent=producer.sent_records, samples=producer.latencies_ms,
                       errors=sum(producer.errors.values()), first_error=producer.first_error,
                       start=start, end=end, acked=producer.acked_records, cpu_seconds=cpu,
                       error_codes=dict(producer.errors))


def _window_line(out: TextIO, count: int, seconds: float, record_size: int,
                 latencies: list[float]) -> None:
    avg = sum(latencies) / len(latencies) if latencies else 0.0
    top = max(latencies, default=0.0)
    print(f"{count} records sent, {count / seconds:.1f} records/sec "
          f"({count * record_size / seconds / (1024 * 1024):.2f} MB/sec), {avg:.1f} ms avg "
          f"latency, {top:.1f} ms max latency.", file=out, flush=True)


def wait_for_watermarks(bootstrap: str | None, topic: str, target: int,
                        settle_s: float = 2.0, limit_s: float = 60.0,
                        extra: Mapping[str, str] | None = None) -> int:
    """The topic's watermark sum once it reaches `target` or stops moving for settle_s
    (acks=0: the node may still be appending when the client has sent its last byte)."""
    last = high_watermarks(bootstrap, topic, extra)
    changed = start = time.monotonic()
    while last < target and time.monotonic() - changed < settle_s \
            and time.monotonic() - start < limit_s:
        time.sleep(0.1)
        now = high_watermarks(bootstrap, topic, extra)
        if now != last:
            last, changed = now, time.monotonic()
    return last


def report_columnar(result: ProducerResult, cpu_seconds: float, out: TextIO | None,
                    first_error: str | None, processes: int,
                    error_codes: Mapping[tuple[int, int], int]) -> None:
    if out is not None:
        per_million = cpu_seconds / max(result.records / 1e6, 1e-12)
        print(f"# client: {COLUMNAR_LABEL}; client CPU {cpu_seconds:.2f} s "
              f"({per_million:.2f} CPU s per 1M records)", file=out)
    report_producer(result, out, first_error, processes)
    if error_codes:
        listed = ", ".join(f"{'?' if p < 0 else p}: {error_name(c) if c >= 0 else 'closed'} "
                           f"x{n}" for (p, c), n in sorted(error_codes.items()))
        print(f"errors per partition: {listed}", file=sys.stderr)


def finish_columnar(bootstrap: str | None, topic: str, before: int, runs: list[ColumnarRun],
                    record_size: int, acks: str, out: TextIO | None,
                    processes: int, extra: Mapping[str, str] | None = None) -> ProducerResult:
    """Count, total and report the runs of one or more producer processes."""
    sent = sum(r.sent for r in runs)
    if acks_value(acks) == 0:
        after = wait_for_watermarks(bootstrap, topic, before + sent, extra=extra)
    else:
        after = high_watermarks(bootstrap, topic, extra)
    acknowledged = min(after - before, sent)
    start = min(r.start for r in runs)
    end = max(r.end for r in runs)
    samples = [s for r in runs for s in r.samples]
    result = producer_result(acknowledged, end - start, record_size, samples)
    result.errors = sent - acknowledged
    codes: collections.Counter[tuple[int, int]] = collections.Counter()
    for r in runs:
        codes.update(r.error_codes)
    if codes and not result.errors:
        # Watermarks can hide errors (another producer's records); the answers cannot.
        result.errors = sum(r.sent - r.acked for r in runs) if acks_value(acks) else sum(codes.values())
    first_error = next((r.first_error for r in runs if r.first_error), None)
    report_columnar(result, sum(r.cpu_seconds for r in runs), out, first_error, processes,
                    codes)
    return result
