"""The perf tools' entry points: one process, or several sharing the records.

`run_producer` and `run_consumer` are `odradek bench produce|consume` (confluent-kafka or
the columnar client); with `processes` > 1 they hand over to odradek.perf.parallel. They
live above every other perf module so that none of those imports another in a circle.
"""

from __future__ import annotations

import sys
from typing import TextIO

from odradek.perf.confluent import consume_partitions, high_watermarks, produce_records
from odradek.perf.results import (
    CLIENTS,
    COLUMNAR,
    CONFLUENT,
    CONSUMER_HEADER,
    DEFAULT_BATCH,
    ConsumerResult,
    ProducerResult,
    client_label,
    producer_result,
    report_producer,
)

__all__ = ["run_consumer", "run_producer", "run_producer_columnar"]


def run_producer(bootstrap: str | None, topic: str, num_records: int, record_size: int,
                 acks: str = "1", extra: dict[str, str] | None = None,
                 out: TextIO | None = sys.stdout, throughput: float = -1,
                 max_seconds: float | None = None, processes: int = 1) -> ProducerResult:
    """Produce `num_records` records (fewer if `max_seconds` runs out), at most `throughput`
    records/s when it is positive (kafka-producer-perf-test's --throughput, -1 = unlimited).
    With `processes` > 1 that many producer processes share the records (and the rate)."""
    if processes > 1:
        from odradek.perf.parallel import run_producers

        return run_producers(bootstrap, topic, num_records, record_size, acks, extra, out,
                             throughput, max_seconds, processes)
    before = high_watermarks(bootstrap, topic, extra)
    run = produce_records(bootstrap, topic, num_records, record_size, acks, extra, out,
                          throughput, max_seconds)
    # Watermarks count every producer's records: with others writing to the topic at the same
    # time the count is capped at what this run sent (and is then only an upper bound).
    acknowledged = min(high_watermarks(bootstrap, topic, extra) - before, run.sent)
    result = producer_result(acknowledged, run.end - run.start, record_size, run.samples)
    result.errors = run.sent - acknowledged
    report_producer(result, out, run.first_error)
    return result


def run_consumer(bootstrap: str | None, topic: str, num_records: int, timeout_s: float = 10.0,
                 extra: dict[str, str] | None = None, out: TextIO | None = sys.stdout,
                 processes: int = 1, batch: int = DEFAULT_BATCH,
                 client: str = CONFLUENT) -> ConsumerResult:
    """One consumer, or `processes` consumers splitting the partitions between them (one
    Python process tops out near one core; kafka-consumer-perf-test had --threads for this).
    `client` is CONFLUENT (confluent-kafka) or COLUMNAR (odradek.perf.columnar_consumer)."""
    if client not in CLIENTS:
        raise ValueError(f"unknown consumer client {client!r} (one of {', '.join(CLIENTS)})")
    if processes > 1:
        from odradek.perf.parallel import run_consumers

        run = run_consumers(bootstrap, topic, num_records, timeout_s, extra, processes, batch,
                            client=client)
    elif client == COLUMNAR:
        from odradek.perf.columnar_consumer import consume_columnar

        run = consume_columnar(bootstrap, topic, None, num_records, timeout_s, extra)
    else:
        run = consume_partitions(bootstrap, topic, None, num_records, timeout_s, extra,
                                 batch=batch)
    result = ConsumerResult(run.records, run.bytes, run.start, run.end, run.end - run.start,
                            run.errors, run.cpu_seconds, client_label(client))
    if out is not None:
        if run.processes > 1:
            print(f"# {run.processes} consumer processes", file=out)
        print(result.client_line(), file=out)
        print(CONSUMER_HEADER, file=out)
        print(result.line(), file=out, flush=True)
    if run.errors:
        print(f"consumer: {run.errors} errors, first: {run.first_error}", file=sys.stderr)
    return result


def run_producer_columnar(bootstrap: str | None, topic: str, num_records: int, record_size: int,
                          acks: str = "1", extra: dict[str, str] | None = None,
                          out: TextIO | None = sys.stdout, throughput: float = -1,
                          max_seconds: float | None = None,
                          processes: int = 1) -> ProducerResult:
    """run_producer's semantics on the columnar client: acknowledged records are
    counted from the topic's high watermarks (capped at what was sent), latency percentiles
    are per request (send to answer; none with acks=0). Like kafka-producer-perf-test, every
    record is the same random payload of record_size bytes (null key). With `processes` > 1
    that many processes share the records and the rate."""
    if processes > 1:
        from odradek.perf.parallel import run_producers

        return run_producers(bootstrap, topic, num_records, record_size, acks, extra, out,
                             throughput, max_seconds, processes, columnar=True)
    from odradek.perf.columnar_producer import finish_columnar, produce_columnar

    before = high_watermarks(bootstrap, topic, extra)
    run = produce_columnar(bootstrap, topic, num_records, record_size, acks, extra, out,
                           throughput, max_seconds)
    return finish_columnar(bootstrap, topic, before, [run], record_size, acks, out, 1, extra)
