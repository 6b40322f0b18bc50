"""The perf tools with N client processes: one Python process (its produce()/consume() loop
and its librdkafka threads) tops out near one core, so `odradek bench produce|consume
--processes N` runs N of them, each with its own confluent-kafka client.

Every process connects first, then all wait at one barrier; the wall time runs from the
barrier's release to the last process's finish. Producers share the records (and the
--throughput rate) evenly; how many the node acknowledged is counted from the topic's high
watermarks before and after all of them, latency percentiles over the sampled records of
every process. Consumers split the partitions by explicit assignment (round robin); each
counts the records and key + value bytes of the messages it really received, and stops at
its share of what the partitions held when the run began.
"""

from __future__ import annotations

import multiprocessing as mp
import time
import traceback
from typing import Any, TextIO

from confluent_kafka import Consumer, TopicPartition

from odradek.perf.columnar_consumer import consume_columnar
from odradek.perf.confluent import (
    consume_partitions,
    consumer_config,
    high_watermarks,
    partitions_of,
    produce_records,
)
from odradek.perf.results import (
    COLUMNAR,
    CONFLUENT,
    ConsumeRun,
    ProducerResult,
    ProduceRun,
    producer_result,
    report_producer,
)

START_TIMEOUT_S = 60.0


def _worker(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
    try:
        out.put(("ok", fn(*args, **kwargs)))
    except BaseException:
        out.put(("error", traceback.format_exc()))


class _Pool:
    """N spawned processes, each running one function, released together by one event."""

    def __init__(self) -> None:
        self.ctx = mp.get_context("spawn")
        self.go = self.ctx.Event()
        self.results = self.ctx.Queue()
        self.procs: list[Any] = []
        self.readies: list[Any] = []

    def start(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        ready = self.ctx.Event()
        kwargs = {**kwargs, "ready": ready, "go": self.go}
        proc = self.ctx.Process(target=_worker, args=(fn, args, kwargs, self.results),
                                daemon=True)
        proc.start()
        self.procs.append(proc)
        self.readies.append(ready)

    def release(self) -> None:
        """Wait until every process is connected, then let them all go."""
        deadline = time.monotonic() + START_TIMEOUT_S
        for ready in self.readies:
            while not ready.wait(0.05):
                if time.monotonic() > deadline or not all(p.is_alive() for p in self.procs):
                    self.go.set()  # let the living ones finish rather than hang
                    raise RuntimeError(f"a client process did not start: {self._first_error()}")
        self.go.set()

    def _first_error(self) -> str:
        try:
            status, value = self.results.get(timeout=1)
        except Exception:
            return "no report"
        return str(value) if status != "ok" else "no error reported"

    def collect(self, timeout: float) -> list[Any]:
        out = []
        try:
            for _ in self.procs:
                status, value = self.results.get(timeout=timeout)
                if status != "ok":
                    raise RuntimeError(f"a client process failed:\n{value}")
                out.append(value)
        finally:
            for proc in self.procs:
                proc.join(10)
                if proc.is_alive():
                    proc.kill()
        return out


def shares(total: int, n: int) -> list[int]:
    """`total` split into `n` near-equal non-negative parts."""
    base, extra = divmod(total, n)
    return [base + (1 if i < extra else 0) for i in range(n)]


def run_producers(bootstrap: str | None, topic: str, num_records: int, record_size: int,
                  acks: str, extra: dict[str, str] | None, out: TextIO | None,
                  throughput: float, max_seconds: float | None,
                  processes: int, columnar: bool = False) -> ProducerResult:
    """Producers in `processes` processes: confluent-kafka, or with `columnar` odradek's
    own columnar Produce client (odradek.client.producer_columnar)."""
    before = high_watermarks(bootstrap, topic, extra)
    pool = _Pool()
    rate = throughput / processes if throughput > 0 else throughput
    fn: Any = produce_records
    if columnar:
        from odradek.perf.columnar_producer import produce_columnar

        fn = produce_columnar
    for count in shares(num_records, processes):
        pool.start(fn,
                   (bootstrap, topic, count, record_size, acks, extra, None, rate, max_seconds),
                   {})
    pool.release()
    if columnar:
        from odradek.perf.columnar_producer import finish_columnar

        runs_c = pool.collect(timeout=(max_seconds or 3600) + 300)
        return finish_columnar(bootstrap, topic, before, runs_c, record_size, acks, out,
                               processes, extra)
    start = time.monotonic()
    runs: list[ProduceRun] = pool.collect(timeout=(max_seconds or 3600) + 300)
    end = max(run.end for run in runs)
    sent = sum(run.sent for run in runs)
    acknowledged = min(high_watermarks(bootstrap, topic, extra) - before, sent)
    samples = [s for run in runs for s in run.samples]
    result = producer_result(acknowledged, end - start, record_size, samples)
    result.errors = sent - acknowledged
    first_error = next((run.first_error for run in runs if run.first_error), None)
    report_producer(result, out, first_error, processes)
    return result


def consumer_quotas(available: list[int], num_records: int) -> list[int]:
    """How many records each consumer reads: all it has when num_records covers everything,
    else num_records split in proportion to what each has (never more than it has)."""
    total = sum(available)
    if num_records >= total:
        return list(available)
    quotas = [num_records * a // total for a in available] if total else [0] * len(available)
    left = num_records - sum(quotas)
    for i, a in enumerate(available):
        take = min(left, a - quotas[i])
        quotas[i] += take
        left -= take
    return quotas


def run_consumers(bootstrap: str | None, topic: str, num_records: int, timeout_s: float,
                  extra: dict[str, str] | None, processes: int, batch: int,
                  client: str = CONFLUENT) -> ConsumeRun:
    """Consumers (confluent-kafka, or the columnar client when `client` is COLUMNAR) in
    `processes` processes; CPU seconds are summed over them."""
    probe = Consumer(consumer_config(bootstrap, extra))
    try:
        partitions = partitions_of(probe, topic)
        marks = {p: probe.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
                 for p in partitions}
    finally:
        probe.close()
    groups = [g for g in (partitions[i::processes] for i in range(processes)) if g]
    available = [sum(marks[p][1] - marks[p][0] for p in g) for g in groups]
    pool = _Pool()
    for group, quota in zip(groups, consumer_quotas(available, num_records), strict=True):
        if client == COLUMNAR:
            pool.start(consume_columnar, (bootstrap, topic, group, quota, timeout_s, extra),
                       {"marks": {p: marks[p] for p in group}})
        else:
            pool.start(consume_partitions, (bootstrap, topic, group, quota, timeout_s, extra),
                       {"batch": batch})
    pool.release()
    start = time.time()
    runs: list[ConsumeRun] = pool.collect(timeout=3600)
    return ConsumeRun(
        records=sum(r.records for r in runs),
        bytes=sum(r.bytes for r in runs),
        start=start,
        end=max(max(r.end for r in runs), start),
        errors=sum(r.errors for r in runs),
        first_error=next((r.first_error for r in runs if r.first_error), None),
        processes=len(groups),
        cpu_seconds=sum(r.cpu_seconds for r in runs),
    )
