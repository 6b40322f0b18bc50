"""End-to-end latency with odradek's own columnar client (`odradek bench e2e --client columnar`).

What is measured is what `perf.confluent.run_e2e` measures with confluent-kafka, in the same encoding
(`perf.stamp_payload` / `perf.latency_of`: bytes 0-7 a CLOCK_MONOTONIC time in ns, big-endian;
byte 8 is 1 for warm-up records), but with queues we control on both sides:

- The producer (`e2e_produce_columnar`) is paced at `rate` records/s over the topic's
  partitions (record i goes to partition i % partitions). Record i's stamp is its *scheduled*
  send time, start + i/rate (`scheduled_stamps`), not the time its batch was built: time a
  record waits for its batch (the tick below, a slow answer holding back the next request)
  is part of its latency. Whenever at least one record is due, the due records go out at
  once, one batch per partition in one Produce request (acks=1); otherwise it sleeps until
  the next record is due, at least `tick_s`. Nothing lingers beyond that.
- The consumer (`e2e_consume_columnar`) follows every partition from offset 0 with one
  long-poll Fetch v11 in flight per partition leader covering all its partitions (min bytes
  1, `max_wait_ms`), as librdkafka does (one PartitionFetcher per partition made the node
  answer each partition separately: several small responses per producer tick, each with
  its own decode cost). It reads the clock right after a response arrived, decodes all its
  records into columns in one `columnar.select`/`columns` call and computes every record's
  latency at once with numpy: the 8-byte stamp at each record's value_pos, subtracted from
  that receive time. It follows leader changes as Kafka's consumer does: a partition answered
  with a metadata.LEADER_CHANGE error, or a connection that fails, sends every partition to
  the leaders the metadata names then, from the offsets reached (the producer side is the
  ColumnarProducer, which follows them itself).

Every record after the warm-up is measured; none is dropped. Warm-up records are those
scheduled in the first `warmup_s` (ceil(warmup_s * rate) records).
"""

from __future__ import annotations

import contextlib
import math
import selectors
import struct
import sys
import time
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, TextIO

import numpy as np

from odradek.client.config import resolve_bootstrap
from odradek.perf.confluent import e2e_pair, gc_paused, make_payload
from odradek.perf.results import LatencyResult, latency_result
from odradek.protocol.records import ATTRIBUTES_OFFSET, BASE_TIMESTAMP_OFFSET, CRC_OFFSET

__all__ = [
    "DEFAULT_FETCH_WAIT_MS",
    "DEFAULT_TICK_S",
    "StampedBatches",
    "e2e_consume_columnar",
    "e2e_produce_columnar",
    "record_latencies_ms",
    "run_e2e_columnar",
    "run_queue_wait_s",
    "scheduled_stamps",
    "stamped_rows",
    "value_positions",
    "warmup_records",
    "whole_batches",
]

# The producer's shortest sleep between sends (see the module docstring and the report in
# docs/internals.md for how it was chosen).
DEFAULT_TICK_S = 0.001
# A long poll: the node answers as soon as a record is appended (min bytes 1).
DEFAULT_FETCH_WAIT_MS = 200
# Records per partition per send when the rate is 0 (as fast as it goes).
_MAX_CHUNK = 2000
_STAMP = 8  # bytes of the stamp; byte 8 is the warm-up flag
_NS = 1_000_000_000
_TIMESTAMPS = struct.Struct(">qq")  # base and max timestamp
_CRC = struct.Struct(">I")
_I32 = struct.Struct(">i")
_FETCH, _FETCH_VERSION = 1, 11
_BASE_LENGTH = struct.Struct(">qi")  # base offset, batch length (after these 12 bytes)
_BATCH_HEAD = 61


def scheduled_stamps(start_ns: int, rate: float, first: int, count: int) -> np.ndarray:
    """The scheduled send times (monotonic ns, int64) of records first..first+count-1:
    start_ns + i/rate for record i."""
    i = np.arange(first, first + count, dtype=np.float64)
    return start_ns + np.rint(i * (_NS / rate)).astype(np.int64)


def warmup_records(rate: float, warmup_s: float) -> int:
    """How many records are scheduled in the first warmup_s (those the consumer ignores)."""
    return max(0, math.ceil(warmup_s * rate - 1e-9))


def stamped_rows(payload: bytes, stamps: np.ndarray, warm: np.ndarray) -> np.ndarray:
    """(records, len(payload)) uint8 rows: the payload with each record's stamp in bytes 0-7
    (big-endian, as perf.stamp_payload) and its warm-up flag in byte 8."""
    rows = np.empty((len(stamps), len(payload)), np.uint8)
    rows[:] = np.frombuffer(payload, np.uint8)
    rows[:, :_STAMP] = stamps.astype(">i8").view(np.uint8).reshape(-1, _STAMP)
    rows[:, _STAMP] = warm
    return rows


def value_positions(count: int, size: int) -> np.ndarray:
    """Where each value starts in an uncompressed batch of `count` records of `size`-byte
    values with null keys, no headers and timestamp delta 0 (61-byte header first)."""
    from odradek.protocol.primitives import encode_varint

    out = np.empty(count, np.int64)
    pos = 61
    vlen = len(encode_varint(size))
    for j in range(count):
        # attributes, timestamp delta (0), offset delta, key length (-1), value length
        before = 1 + 1 + len(encode_varint(j)) + 1 + vlen
        body = before + size + 1  # + header count
        length = len(encode_varint(body))
        out[j] = pos + length + before
        pos += length + body
    return out


class StampedBatches:
    """Batches of `payload` records (null keys) with each record's stamp and warm-up flag in
    its value: built once per record count, then copied and stamped. build_columnar_batch's
    fixed cost (numpy set-up, ~60-100 us a call) was most of the producer's CPU when every
    1 ms tick builds a batch of a few records for each of 6 partitions."""

    def __init__(self, payload: bytes) -> None:
        self.payload = payload
        self._templates: dict[int, tuple[bytes, np.ndarray]] = {}

    def _template(self, count: int) -> tuple[bytes, np.ndarray]:
        from odradek.client.batch_builder import build_columnar_batch, fixed_column

        found = self._templates.get(count)
        if found is None:
            if len(self._templates) > 256:
                self._templates.clear()
            batch = bytes(build_columnar_batch(fixed_column(self.payload, count),
                                               base_timestamp=0))
            where = value_positions(count, len(self.payload))
            arr = np.frombuffer(batch, np.uint8)
            values = arr[where[:, None] + np.arange(len(self.payload))]
            if len(batch) != int(where[-1]) + len(self.payload) + 1 or \
                    not (values == np.frombuffer(self.payload, np.uint8)).all():
                raise AssertionError("the batch layout is not the one value_positions assumes")
            found = self._templates[count] = (batch, where[:, None] + np.arange(_STAMP))
        return found

    def batch(self, stamps: np.ndarray, warm: np.ndarray, base_timestamp: int) -> bytearray:
        from crc32c import crc32c

        template, where = self._template(len(stamps))
        out = bytearray(template)
        arr = np.frombuffer(out, np.uint8)
        arr[where] = stamps.astype(">i8").view(np.uint8).reshape(-1, _STAMP)
        arr[where[:, -1] + 1] = warm
        del arr  # no export left on `out`
        _TIMESTAMPS.pack_into(out, BASE_TIMESTAMP_OFFSET, base_timestamp, base_timestamp)
        _CRC.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
        return out


def record_latencies_ms(buffer: bytes | memoryview, value_pos: np.ndarray, value_len: np.ndarray,
                        now_ns: int) -> tuple[int, np.ndarray]:
    """(records with a value, latencies in ms of those measured) for one fetch's records:
    perf.latency_of for every record at once (null values are not counted, warm-up records
    are counted but not measured, a value shorter than 9 bytes has no warm-up flag)."""
    has = value_len >= 0
    count = int(has.sum())
    stamped = value_len >= _STAMP
    pos = value_pos[stamped]
    if not len(pos):
        return count, np.empty(0)
    buf = np.frombuffer(buffer, np.uint8)
    raw = buf[pos[:, None] + np.arange(_STAMP)]
    stamps = np.ascontiguousarray(raw).view(">i8").reshape(-1)
    long = value_len[stamped] > _STAMP
    warm = np.zeros(len(pos), bool)
    warm[long] = buf[pos[long] + _STAMP] == 1
    return count, (now_ns - stamps[~warm]) / 1e6


def _client(bootstrap: str | None) -> dict[str, str]:
    from odradek.client.connection import supports

    client = {"bootstrap.servers": resolve_bootstrap(bootstrap), "client.id": "odradek-e2e"}
    if not supports(client):
        raise RuntimeError("the columnar client speaks PLAINTEXT only")
    return client


def e2e_produce_columnar(bootstrap: str | None, topic: str, rate: float, seconds: float,
                         record_size: int, acks: str = "1",
                         extra: Mapping[str, str] | None = None, warmup_s: float = 0.5,
                         tick_s: float = DEFAULT_TICK_S,
                         stats: dict[str, float] | None = None) -> tuple[int, float]:
    """Producer side: (records sent, seconds of the measured part). With rate 0 records go out
    as fast as the producer goes, stamped when their batch is built (there is no schedule).
    `stats` gets the paced loop's CPU seconds ("cpu_s") and run-queue wait ("wait_s")."""
    from odradek.client.producer_columnar import ColumnarProducer, settings_from

    settings = settings_from(acks, extra)
    producer = ColumnarProducer(_client(bootstrap)["bootstrap.servers"], topic, settings)
    payload = make_payload(max(record_size, _STAMP + 1))
    build = StampedBatches(payload).batch
    sent = 0
    try:
        producer.connect()
        parts = producer.partitions
        nparts = len(parts)
        warm_count = warmup_records(rate, warmup_s) if rate > 0 else 0
        clock = time.monotonic_ns
        with gc_paused():
            cpu0, wait0 = time.process_time(), run_queue_wait_s()
            start = clock()
            measured_start = start + int(warmup_s * _NS)
            end = measured_start + int(seconds * _NS)
            total = math.ceil((end - start) * rate / _NS) if rate > 0 else 0
            while True:
                now = clock()
                if now >= end:
                    break
                if rate > 0:
                    # records scheduled at or before now (record i at start + i/rate)
                    n = min(int((now - start) * rate / _NS) + 1, total) - sent
                    if n <= 0:
                        wait = (sent * _NS / rate + start - now) / _NS
                        time.sleep(max(tick_s, wait))
                        continue
                    stamps = scheduled_stamps(start, rate, sent, n)
                else:
                    n = _MAX_CHUNK * nparts
                    stamps = np.full(n, now, np.int64)
                if rate > 0:
                    warm = np.arange(sent, sent + n) < warm_count
                else:
                    warm = stamps < measured_start
                base_ms = time.time_ns() // 1_000_000
                batches = []
                for k in range(min(n, nparts)):
                    # record i goes to partition i % nparts; [k::nparts] starts at record
                    # sent + k
                    batches.append((parts[(sent + k) % nparts],
                                    build(stamps[k::nparts], warm[k::nparts], base_ms)))
                producer.send(batches)
                sent += n
        producer.flush()
        done = clock()
        if stats is not None:
            stats.update(cpu_s=time.process_time() - cpu0, wait_s=run_queue_wait_s() - wait0)
    finally:
        producer.close()
    if producer.failed_records:
        print(f"end-to-end: {producer.failed_records} records refused: {producer.first_error}",
              file=sys.stderr)
    measured_s = max(min(done, end) - measured_start, 1) / _NS
    return sent, measured_s


def whole_batches(records: bytes) -> tuple[bytes, int]:
    """The whole batches at the start of one partition's fetched records (a response may end
    in a cut batch) and the offset after the last of them (-1 when there is none). Batches
    follow each other from the fetch offset: this consumer fetches from where the last
    response's batches ended and the topic has no transactions."""
    pos, end = 0, -1
    while pos + _BATCH_HEAD <= len(records):
        base, length = _BASE_LENGTH.unpack_from(records, pos)
        size = 12 + length
        if length <= 0 or pos + size > len(records):
            break
        end = base + _I32.unpack_from(records, pos + 23)[0] + 1
        pos += size
    return records[:pos], end


class _Follower:
    """One connection to one partition leader with one Fetch v11 in flight for all the topic's
    partitions it leads: a long poll (min bytes 1) answered as soon as any of them has a record.

    One request for every partition, as librdkafka sends, instead of a PartitionFetcher per
    partition: with 6 long polls the node answered each partition separately, up to 6
    responses per producer tick, and decoding them cost the consumer ~30 CPU s per 1M
    records at 10k records/s (its per-response cost, not per record)."""

    def __init__(self, host: str, port: int, client_id: str, topic: str,
                 partitions: list[int], max_wait_ms: int) -> None:
        from odradek.client.connection import Connection

        self.conn = Connection(host, port, client_id, 60, 64 << 20)
        self.topic, self.max_wait_ms = topic, max_wait_ms
        self.offsets = dict.fromkeys(partitions, 0)
        self.corr = 0

    def send(self) -> None:
        from kio.schema.fetch.v11.request import FetchPartition, FetchRequest, FetchTopic
        from kio.static.primitive import i8, i32, i64

        from odradek.protocol.messages import encode_request

        req = FetchRequest(
            max_wait=timedelta(milliseconds=self.max_wait_ms), min_bytes=i32(1),
            max_bytes=i32(64 << 20), isolation_level=i8(0),
            topics=(FetchTopic(topic=self.topic, partitions=tuple(
                FetchPartition(partition=i32(p), fetch_offset=i64(o),
                               partition_max_bytes=i32(16 << 20))
                for p, o in self.offsets.items())),),
            forgotten_topics_data=())
        self.corr = self.conn.send(_FETCH, _FETCH_VERSION, encode_request(req))

    def receive(self) -> Any:
        """The decoded Fetch response (kio copies the records out of the connection's
        buffer, which the next receive reuses)."""
        from odradek.protocol.messages import decode_response

        return decode_response(_FETCH, _FETCH_VERSION, self.conn.receive(self.corr), 4)

    def close(self) -> None:
        self.conn.sock.close()


def e2e_consume_columnar(bootstrap: str | None, topic: str, expected: Any, timeout_s: float,
                         ready: Any, max_wait_ms: int = DEFAULT_FETCH_WAIT_MS,
                         stats: dict[str, float] | None = None) -> tuple[int, list[float]]:
    """Consumer side (its own process): (records seen, latencies in ms of the measured ones)
    until `expected` (a shared value, -1 while the producer runs) records were seen, or
    timeout_s without a record. `stats` as in e2e_produce_columnar, over the fetch loop."""
    from odradek.client.columnar import columns, select
    from odradek.client.fetcher import FetchError
    from odradek.client.metadata import LEADER_CHANGE, RETRY_BACKOFF_S
    from odradek.client.producer_columnar import leaders_of

    client = _client(bootstrap)
    followers: list[_Follower] = []
    sel_ = selectors.DefaultSelector()

    def follow(offsets: dict[int, int]) -> None:
        """(Re)connect to the leaders the metadata names, one long poll each, from `offsets`:
        at the start, and when a leader moved (NOT_LEADER_OR_FOLLOWER and the other
        metadata.LEADER_CHANGE answers) or its connection failed, as Kafka's consumer does."""
        for f in followers:
            with contextlib.suppress(KeyError, ValueError):
                sel_.unregister(f.conn.sock)
            f.close()
        followers.clear()
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                brokers, leaders = leaders_of(client["bootstrap.servers"], topic,
                                              client["client.id"])
                by_leader: dict[int, list[int]] = {}
                for p, node in sorted(leaders.items()):
                    by_leader.setdefault(node, []).append(p)
                if by_leader.keys() <= brokers.keys():
                    for node, parts in by_leader.items():
                        f = _Follower(*brokers[node], client["client.id"], topic, parts,
                                      max_wait_ms)
                        f.offsets.update({p: offsets.get(p, 0) for p in parts})
                        followers.append(f)
                        f.send()
                        sel_.register(f.conn.sock, selectors.EVENT_READ, f)
                    return
            except OSError:
                for f in followers:
                    with contextlib.suppress(KeyError, ValueError):
                        sel_.unregister(f.conn.sock)
                    f.close()
                followers.clear()
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no leader for every partition of {topic}")
            time.sleep(RETRY_BACKOFF_S)

    chunks: list[np.ndarray] = []
    count = 0
    try:
        # The first fetches connect (and long-poll) before the producer starts.
        follow({})
        clock = time.monotonic_ns
        with gc_paused():
            cpu0, wait0 = time.process_time(), run_queue_wait_s()
            ready.set()
            last = time.monotonic()
            while expected.value < 0 or count < expected.value:
                events = sel_.select(0.5) if len(followers) > 1 else [(None, 0)]
                got_any = moved = False
                for key, _ in events:
                    f = key.data if key is not None else followers[0]
                    try:
                        resp = f.receive()
                    except OSError:  # the leader died or closed on us
                        moved = True
                        continue
                    now = clock()  # every record of this response has arrived by now
                    # One columns() call per response, over every partition's whole batches
                    # back to back: its cost is mostly per call, not per record.
                    whole = []
                    for t in resp.responses:
                        for part in t.partitions:
                            p, code = int(part.partition_index), int(part.error_code.value)
                            if code in LEADER_CHANGE:
                                moved = True
                            elif code:
                                raise FetchError(code, f"fetch {topic}-{p}: error {code}")
                            records, next_offset = whole_batches(part.records or b"")
                            if records:
                                whole.append(records)
                                f.offsets[p] = next_offset
                    if not moved:
                        f.send()  # the node fills the next while we decode this one
                    if whole:
                        # librdkafka does not check CRCs by default (check.crcs=false)
                        cols = columns(select(b"".join(whole), start=0, end=1 << 62,
                                              check_crc=False))
                        if cols is not None:
                            got_any = True
                            n, lat = record_latencies_ms(cols.buffer, cols.value_pos,
                                                         cols.value_len, now)
                            count += n
                            chunks.append(lat)
                if moved:
                    # every partition from where it got to, at the leaders named now
                    offsets = {p: o for f in followers for p, o in f.offsets.items()}
                    time.sleep(RETRY_BACKOFF_S)
                    follow(offsets)
                if got_any:
                    last = time.monotonic()
                elif time.monotonic() - last > timeout_s:
                    break
            if stats is not None:
                stats.update(cpu_s=time.process_time() - cpu0,
                             wait_s=run_queue_wait_s() - wait0)
    finally:
        sel_.close()
        for f in followers:
            f.close()
    return count, np.concatenate(chunks).tolist() if chunks else []


def run_queue_wait_s() -> float:
    """Seconds this process has spent runnable but waiting for a CPU (Linux schedstat; 0
    elsewhere): on a shared machine the clients' latency is mostly this, not their work."""
    try:
        with open("/proc/self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def _worker(args: tuple[Any, ...], results: Any) -> None:
    stats: dict[str, float] = {}
    try:
        count, latencies = e2e_consume_columnar(*args, stats=stats)
        results.put((count, latencies, stats.get("cpu_s", 0.0), stats.get("wait_s", 0.0)))
    except BaseException:
        results.put((0, [], 0.0, 0.0))
        raise


def e2e_settings_columnar(acks: str, tick_s: float, max_wait_ms: int) -> str:
    """The '#' line printed before the summary: what shapes the latency."""
    return (f"# client: columnar (odradek's own Produce v9 and Fetch v11 clients); producer: "
            f"acks={acks}, a batch per partition as soon as records are due, paced in ticks of "
            f">= {tick_s * 1000:g} ms, stamps are scheduled send times; consumer: one long-poll "
            f"fetch per partition, fetch.min.bytes=1, fetch.wait.max.ms={max_wait_ms}; "
            f"Python GC paused while measuring")


def run_e2e_columnar(bootstrap: str | None, topic: str, rate: float, seconds: float,
                     record_size: int = 100, acks: str = "1",
                     producer_extra: Mapping[str, str] | None = None, warmup_s: float = 0.5,
                     timeout_s: float = 10.0, out: TextIO | None = sys.stdout,
                     tick_s: float = DEFAULT_TICK_S,
                     max_wait_ms: int = DEFAULT_FETCH_WAIT_MS) -> LatencyResult:
    """perf.confluent.run_e2e with the columnar client: a consumer process follows the (fresh) topic
    while this process produces at `rate`; latencies of every record after the warm-up."""
    if out is not None:
        print(e2e_settings_columnar(acks, tick_s, max_wait_ms), file=out, flush=True)
    stats: dict[str, float] = {}
    sent, measured_s, got = e2e_pair(
        _worker,
        lambda expected, ready: (bootstrap, topic, expected, timeout_s, ready, max_wait_ms),
        lambda: e2e_produce_columnar(bootstrap, topic, rate, seconds, record_size, acks,
                                     producer_extra, warmup_s, tick_s, stats),
        timeout_s)
    count, latencies, consumer_cpu, consumer_wait = got
    producer_cpu, producer_wait = stats.get("cpu_s", 0.0), stats.get("wait_s", 0.0)
    result = latency_result(sent, measured_s, count, latencies)
    if out is not None:
        print(result.summary(), file=out)
        million = max(sent / 1e6, 1e-12)
        print(f"# {sent} records sent, {sent - len(latencies)} of them warm-up or unmeasured, "
              f"{count} seen by the consumer; client CPU in the loops (warm-up included): "
              f"producer {producer_cpu:.2f} s "
              f"({producer_cpu / million:.2f} s per 1M records), consumer {consumer_cpu:.2f} s "
              f"({consumer_cpu / million:.2f} s per 1M records); waiting for a CPU while "
              f"runnable: producer {producer_wait:.2f} s, consumer {consumer_wait:.2f} s",
              file=out, flush=True)
    return result
