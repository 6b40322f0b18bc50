"""The perf tools over confluent-kafka: what kafka-producer-perf-test, kafka-consumer-perf-test and
Kafka's EndToEndLatency tool measure and print.

Used by `odradek bench produce|consume|e2e` and by the benchmarks under bench/.

Producer latency is librdkafka's own (produce() call to delivery report, `Message.latency()`),
read in the delivery callback of one record in SAMPLE_EVERY: a Python callback per record would
cost the client about a third of its throughput. How many records the node acknowledged is
counted exactly, from the partitions' high watermarks before and after the run.

End-to-end latency: each record carries the producer's CLOCK_MONOTONIC time (system wide on
Linux, so producer and consumer may be separate processes on one machine) in its first 8 bytes,
written just before its produce() call; the consumer, in its own process so the two do not share
a GIL, subtracts it from the time the record reached the application. Every record after the
warm-up is measured, none is discarded. Client settings (printed by the tool): producer
linger.ms=1 (Kafka's EndToEndLatency uses 0, but one request per few records costs the node more
CPU than the machine has to spare at 100k records/s), consumer fetch.wait.max.ms=10 with
fetch.min.bytes=1 (the node answers a waiting fetch on the first append, so the wait bounds only
an idle consumer's polling). While measuring, both sides run with Python's cyclic GC off (after a
collect and gc.freeze()): a full collection in the consumer, which allocates one tracked Message
per record, stalls it for tens of ms. The producer is paced in ticks of at least PACE_TICK_S.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing as mp
import os
import random
import string
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TextIO

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)

from odradek.client.config import resolve_bootstrap
from odradek.client.consumer_settings import consumer_settings
from odradek.perf.results import (
    DEFAULT_BATCH,
    REPORT_INTERVAL_S,
    SAMPLE_EVERY,
    ConsumeRun,
    LatencyResult,
    ProduceRun,
    Window,
    latency_result,
)

# ---------------------------------------------------------------------------- producer

class Stats:
    """Latencies of the sampled records; each stands for SAMPLE_EVERY records in the counts."""

    def __init__(self, record_size: int, out: TextIO | None) -> None:
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
            if self.out is not None:
                print(self.window.line(now) + ".", file=self.out, flush=True)
            self.window = Window(now)


def make_payload(size: int, seed: int = 0) -> bytes:
    # As kafka-producer-perf-test: random uppercase letters, one payload for every record.
    rng = random.Random(seed)
    return "".join(rng.choice(string.ascii_uppercase) for _ in range(size)).encode()


def producer_config(bootstrap: str | None, acks: str = "1",
                    extra: dict[str, str] | None = None) -> dict[str, object]:
    conf: dict[str, object] = {
        "bootstrap.servers": resolve_bootstrap(bootstrap),
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


def security_only(extra: Mapping[str, object] | None) -> dict[str, object]:
    """The connection's settings of a run's -X (security.protocol, ssl.*, sasl.*), without
    the perf tools' own knobs."""
    return {k: v for k, v in (extra or {}).items()
            if k.startswith(("security.", "ssl.", "sasl."))}


def high_watermarks(bootstrap: str | None, topic: str,
                    extra: Mapping[str, object] | None = None) -> int:
    """The sum of the topic's high watermarks: records the node has acknowledged, ever.
    `extra`: the run's client settings (their security ones are used)."""
    consumer = Consumer(consumer_settings(bootstrap, security_only(extra),
                                          group_id="odradek-bench-watermarks",
                                          enable_auto_commit=False))
    try:
        meta = consumer.list_topics(topic, timeout=30).topics[topic]
        if meta.error is not None:
            raise RuntimeError(f"topic {topic}: {meta.error.name()}")
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                   for p in meta.partitions)
    finally:
        consumer.close()


def produce_records(bootstrap: str | None, topic: str, num_records: int, record_size: int,
                    acks: str = "1", extra: dict[str, str] | None = None,
                    out: TextIO | None = None, throughput: float = -1,
                    max_seconds: float | None = None, ready: Any = None,
                    go: Any = None) -> ProduceRun:
    """The produce loop of one process. With `ready`/`go` (multi-process runs) the producer
    connects and loads the topic's metadata first, sets `ready`, and starts on `go`."""
    payload = make_payload(record_size)
    stats = Stats(record_size, out)
    producer = Producer(producer_config(bootstrap, acks, extra))
    produce = producer.produce
    poll = producer.poll
    callback = stats.on_delivery
    if ready is not None:
        producer.list_topics(topic, timeout=30)
        ready.set()
        go.wait()
    start = time.monotonic()
    deadline = start + max_seconds if max_seconds else float("inf")
    stats.total.start = stats.window.start = start
    sent = 0
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
        sent += 1
        if i & 1023 == 0:
            poll(0)
            stats.maybe_report()
            if time.monotonic() > deadline:
                break
        if throughput > 0 and i % 64 == 0:
            _pace(start, sent, throughput, poll)
    while len(producer) > 0:
        poll(0.05)
        stats.maybe_report()
    end = time.monotonic()
    producer.flush()
    return ProduceRun(sent, stats.samples, stats.errors, stats.first_error, start, end)


def _pace(start: float, sent: int, rate: float, poll: Any) -> None:
    """Hold the producer back to `rate` records/s since `start` (serving callbacks meanwhile)."""
    ahead = sent / rate - (time.monotonic() - start)
    if ahead > 0.0005:
        poll(ahead)
        while sent / rate > time.monotonic() - start:
            time.sleep(0.0002)


# ---------------------------------------------------------------------------- consumer

def consumer_config(bootstrap: str | None, extra: dict[str, str] | None = None) -> dict[str, object]:
    """The bench consumer: the shipped fetch settings (client.consumer_settings) with a
    bigger receive buffer, then `extra` (-X, or librdkafka's defaults) on top."""
    return consumer_settings(bootstrap, extra or {},
                             group_id=f"odradek-bench-{os.getpid()}",
                             enable_auto_commit=False, enable_auto_offset_store=False,
                             fetch_wait_max_ms=100,
                             receive_message_max_bytes=128 * 1024 * 1024)


def partitions_of(consumer: Consumer, topic: str) -> list[int]:
    meta = consumer.list_topics(topic, timeout=30).topics[topic]
    if meta.error is not None:
        raise RuntimeError(f"topic {topic}: {meta.error.name()}")
    return sorted(meta.partitions)


_error_of = Message.error
_value_of = Message.value
_key_of = Message.key


def _record_bytes(msgs: Any) -> int:
    """Key plus value bytes, as kafka-consumer-perf-test counts them (None counts 0)."""
    return (sum(map(len, filter(None, map(_value_of, msgs))))
            + sum(map(len, filter(None, map(_key_of, msgs)))))


def consume_partitions(bootstrap: str | None, topic: str, partitions: list[int] | None,
                       num_records: int, timeout_s: float, extra: dict[str, str] | None,
                       ready: Any = None, go: Any = None, total: Any = None,
                       batch: int = DEFAULT_BATCH) -> ConsumeRun:
    """Read from the beginning until num_records (or, when `total` is a shared value that is
    non-negative, that many), or timeout_s without a record. A last batch that overshoots
    the target is counted only up to it."""
    consumer = Consumer(consumer_config(bootstrap, extra))
    errors = 0
    first_error: str | None = None
    try:
        if partitions is None:
            partitions = partitions_of(consumer, topic)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        # No cyclic GC while reading: every batch makes `batch` GC-tracked Message objects,
        # whose collections cost the loop a third of its CPU (py-spy, bench/consumer_bounds.py);
        # they hold no cycles, so reference counting frees them all.
        with gc_paused():
            if ready is not None:
                ready.set()
                go.wait()
            count = 0
            nbytes = 0
            start = time.time()
            last = start
            cpu0 = time.process_time()
            consume = consumer.consume
            target = num_records
            while count < target:
                msgs = consume(num_messages=batch, timeout=0.5)
                if total is not None and total.value >= 0:
                    target = min(num_records, total.value)
                if not msgs:
                    if time.time() - last > timeout_s:
                        break
                    continue
                if any(map(_error_of, msgs)):
                    good = []
                    for msg in msgs:
                        err = msg.error()
                        if err is None:
                            good.append(msg)
                        elif err.code() != KafkaError._PARTITION_EOF:
                            errors += 1
                            if first_error is None:
                                first_error = f"{err.name()}: {err.str()}"
                    msgs = good
                if count + len(msgs) > target:
                    msgs = msgs[:target - count]
                # map() over the C accessors: a Python loop per record would cost the client
                # more than the node spends serving the fetch
                nbytes += _record_bytes(msgs)
                count += len(msgs)
                last = time.time()
            cpu = time.process_time() - cpu0
    finally:
        consumer.close()
    return ConsumeRun(count, nbytes, start, last, errors, first_error, cpu_seconds=cpu)


def consume_records(bootstrap: str | None, topic: str, partitions: list[int] | None,
                    num_records: int, timeout_s: float, extra: dict[str, str] | None,
                    ready: Any = None, go: Any = None,
                    total: Any = None) -> tuple[int, int, float, float]:
    """consume_partitions as (records, bytes, start, end); errors go to stderr."""
    run = consume_partitions(bootstrap, topic, partitions, num_records, timeout_s, extra, ready,
                             go, total)
    if run.errors:
        print(f"consumer: {run.errors} errors, first: {run.first_error}", file=sys.stderr)
    return run.records, run.bytes, run.start, run.end


# ---------------------------------------------------------------------------- end to end

E2E_LINGER_MS = "1"
E2E_FETCH_WAIT_MS = "10"
# The producer's shortest sleep between bursts (see Pacer).
PACE_TICK_S = 0.0005


def stamp_payload(payload: bytearray, warmup: bool) -> None:
    """The producer's clock in bytes 0-7; byte 8 flags warm-up records the consumer ignores."""
    payload[0:8] = time.monotonic_ns().to_bytes(8, "big")
    if len(payload) > 8:
        payload[8] = 1 if warmup else 0


def latency_of(value: bytes, now_ns: int) -> float | None:
    """Milliseconds since the producer stamped `value`; None for a warm-up record."""
    if len(value) > 8 and value[8] == 1:
        return None
    return (now_ns - int.from_bytes(value[0:8], "big")) / 1e6


class Pacer:
    """Due-count pacing: at `rate` records/s (0 = as fast as possible) since the first call.

    Between bursts it sleeps until the next record is due, but at least PACE_TICK_S: sleeping
    one record's interval (10 us at 100k/s) spun the producer's thread at thousands of wake-ups
    a second, CPU the node and the consumer need on a small machine. Records are stamped as they
    are handed to the client, so a burst does not add to the latency measured."""

    def __init__(self, rate: float, tick_s: float | None = None) -> None:
        self.rate = rate
        self.tick_s = PACE_TICK_S if tick_s is None else tick_s
        self.start = time.monotonic()

    def due(self, sent: int, batch: int) -> int:
        """How many records to send now (sleeping until at least one is due)."""
        if self.rate <= 0:
            return batch
        while True:
            elapsed = time.monotonic() - self.start
            n = int(elapsed * self.rate) - sent
            if n > 0:
                return min(n, batch)
            time.sleep(max(self.tick_s, (sent + 1) / self.rate - elapsed))


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic GC while measuring: what exists now is frozen out of it, nothing new is
    collected until the block ends (the measured phase is seconds long, so garbage is bounded)."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
        gc.unfreeze()


def e2e_consume(bootstrap: str | None, topic: str, expected: Any, timeout_s: float,
                extra: dict[str, str] | None, ready: Any) -> tuple[int, list[float]]:
    """Consumer side (its own process): latencies until `expected` (a shared value, -1 while
    the producer runs) records were seen, or timeout_s without a record."""
    consumer = Consumer(consumer_config(bootstrap, {"fetch.wait.max.ms": E2E_FETCH_WAIT_MS,
                                                    **(extra or {})}))
    latencies: list[float] = []
    count = 0
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING)
                         for p in partitions_of(consumer, topic)])
        # One empty poll so the connection and fetch session exist before the producer starts.
        consumer.consume(num_messages=1, timeout=0.5)
        with gc_paused():
            ready.set()
            last = time.monotonic()
            consume = consumer.consume
            poll = consumer.poll
            clock = time.monotonic_ns
            while expected.value < 0 or count < expected.value:
                # consume() waits for num_messages or its timeout, whichever is later to come:
                # block in poll() for the first record, then take what is already there.
                first = poll(0.2)
                if first is None:
                    if time.monotonic() - last > timeout_s:
                        break
                    continue
                batch = consume(num_messages=10000, timeout=0)
                # every record of the batch has reached the application by now
                now = clock()
                last = time.monotonic()
                for msg in (first, *batch):
                    value = msg.value()
                    if value is None:
                        continue
                    count += 1
                    ms = latency_of(value, now)
                    if ms is not None:
                        latencies.append(ms)
    finally:
        consumer.close()
    return count, latencies


def _e2e_worker(args: tuple[Any, ...], results: Any) -> None:
    try:
        results.put(e2e_consume(*args))
    except BaseException:
        results.put((0, []))
        raise


def e2e_produce(bootstrap: str | None, topic: str, rate: float, seconds: float, record_size: int,
                acks: str, extra: dict[str, str] | None, warmup_s: float) -> tuple[int, float]:
    """Producer side: stamped records at `rate`/s (0 = max) for `seconds` after `warmup_s` of
    warm-up records; (records sent, seconds of the measured part)."""
    conf = producer_config(bootstrap, acks, {"linger.ms": E2E_LINGER_MS, **(extra or {})})
    producer = Producer(conf)
    payload = bytearray(make_payload(max(record_size, 9)))
    sent = 0
    measured = 0
    produce = producer.produce
    poll = producer.poll
    with gc_paused():
        pacer = Pacer(rate)
        begin = time.monotonic()
        measured_start = begin + warmup_s
        end = measured_start + seconds
        while True:
            now = time.monotonic()
            if now >= end:
                break
            warm = now < measured_start
            n = pacer.due(sent, 256)
            for _ in range(n):
                stamp_payload(payload, warm)
                while True:
                    try:
                        produce(topic, bytes(payload))
                        break
                    except BufferError:
                        poll(0.001)
            sent += n
            if not warm:
                measured += n
            poll(0)
    producer.flush(60)
    return sent, max(time.monotonic() - measured_start, 1e-9) if measured else 0.0


def e2e_settings(acks: str, producer_extra: dict[str, str] | None = None,
                 consumer_extra: dict[str, str] | None = None) -> str:
    """The one '#' line the tool prints first: the client settings that shape the latency."""
    prod = {"acks": acks, "linger.ms": E2E_LINGER_MS, **(producer_extra or {})}
    cons = {"fetch.wait.max.ms": E2E_FETCH_WAIT_MS, "fetch.min.bytes": "1",
            **(consumer_extra or {})}

    def show(conf: dict[str, str]) -> str:
        return ", ".join(f"{k}={v}" for k, v in conf.items())

    return (f"# producer: {show(prod)}; consumer: {show(cons)}; paced in ticks of >= "
            f"{PACE_TICK_S * 1000:g} ms; Python GC paused while measuring")


def run_e2e(bootstrap: str | None, topic: str, rate: float, seconds: float, record_size: int = 100,
            acks: str = "1", producer_extra: dict[str, str] | None = None,
            consumer_extra: dict[str, str] | None = None, warmup_s: float = 0.5,
            timeout_s: float = 10.0, out: TextIO | None = sys.stdout) -> LatencyResult:
    """Produce at `rate` records/s (0 = as fast as the producer goes) to a topic that a
    consumer in another process reads from the beginning; latencies of every record after the
    warm-up. The topic should be fresh (or empty) so only this run's records are measured."""
    if out is not None:
        print(e2e_settings(acks, producer_extra, consumer_extra), file=out, flush=True)
    sent, measured_s, (count, latencies) = e2e_pair(
        _e2e_worker,
        lambda expected, ready: (bootstrap, topic, expected, timeout_s, consumer_extra, ready),
        lambda: e2e_produce(bootstrap, topic, rate, seconds, record_size, acks, producer_extra,
                            warmup_s),
        timeout_s)
    result = latency_result(sent, measured_s, count, latencies)
    if out is not None:
        print(result.summary(), file=out, flush=True)
    return result


def e2e_pair(worker: Callable[[tuple[Any, ...], Any], None],
             worker_args: Callable[[Any, Any], tuple[Any, ...]],
             produce: Callable[[], tuple[int, float]],
             timeout_s: float) -> tuple[int, float, Any]:
    """Start the consumer `worker(args, results)` in a spawned process with
    `worker_args(expected, ready)`, wait until it is connected, run `produce` here (it returns
    records sent and seconds measured), tell the consumer how many to expect, and return
    (sent, seconds, what the consumer put on its queue)."""
    ctx = mp.get_context("spawn")
    expected = ctx.Value("q", -1)
    ready = ctx.Event()
    results = ctx.Queue()
    proc = ctx.Process(target=worker, args=(worker_args(expected, ready), results))
    proc.start()
    try:
        deadline = time.monotonic() + 60
        while not ready.wait(0.1):
            if not proc.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the end-to-end consumer did not start")
        sent, measured_s = produce()
        expected.value = sent
        return sent, measured_s, results.get(timeout=timeout_s + 120)
    finally:
        proc.join(30)
        if proc.is_alive():
            proc.kill()
