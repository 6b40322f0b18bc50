"""odradek's own Produce client: record batches built from numpy columns, sent pipelined.

The reverse of the columnar Fetch path (odradek.client.fetcher + columnar): batches come
from odradek.client.batch_builder (no Python object per record) and go out over plain
sockets as Produce v9 requests, several in flight per connection (max.in.flight), one
connection per partition leader. Metadata v8 finds the leaders. Only PLAINTEXT without
SASL, like the fetcher (see `fetcher.supports`).

Every partition's answer is read: error codes are counted per (partition, error) and the
first one kept as text; nothing is retried. With acks=0 the node sends no answer and
closes the connection when a request fails (as Kafka does), which `flush` notices.

`run_producer_columnar` is `odradek bench produce --client columnar`.
"""

from __future__ import annotations

import collections
import importlib
import socket
import struct
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TextIO

from odradek.client.config import resolve_bootstrap
from odradek.client.fetcher import _Conn, _servers, supports
from odradek.client.perf import (
    REPORT_INTERVAL_S,
    ProducerResult,
    ProduceRun,
    high_watermarks,
    make_payload,
    producer_result,
    report_producer,
)
from odradek.protocol.primitives import Reader, encode_uvarint

__all__ = [
    "COLUMNAR_LABEL",
    "ColumnarProducer",
    "ColumnarRun",
    "ProduceError",
    "Settings",
    "encode_produce_request",
    "produce_columnar",
    "run_producer_columnar",
    "settings_from",
]

PRODUCE, METADATA, API_VERSIONS = 0, 3, 18
PRODUCE_VERSION, METADATA_VERSION = 9, 8
UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE = 3, 5
COLUMNAR_LABEL = ("columnar (odradek's own Produce v9 client, record batches built with numpy, "
                  "not confluent-kafka)")
_LEN = struct.Struct(">i")
_HEADER = struct.Struct(">hhih")  # api key, version, correlation id, client id length
_ACKS_TIMEOUT = struct.Struct(">hi")
_I32 = struct.Struct(">i")
_RECORDS_COUNT = struct.Struct(">i")
_RECORDS_COUNT_OFFSET = 57
_WARM = ("kio.schema.produce.v9.response", "kio.schema.metadata.v8.request",
         "kio.schema.metadata.v8.response", "odradek.protocol.messages", "numpy")


class ProduceError(RuntimeError):
    """The node refused the topic (kept in `code`, a Kafka error code)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _error_name(code: int) -> str:
    from odradek.protocol.errors import ErrorCode

    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"error code {code}"


def encode_produce_request(correlation_id: int, client_id: str, acks: int, timeout_ms: int,
                           topic: str, batches: Sequence[tuple[int, bytes | bytearray]]
                           ) -> list[bytes | bytearray | memoryview]:
    """A framed Produce v9 request (size prefix included) as parts to send with one
    sendmsg: the batches themselves are not copied."""
    cid = client_id.encode()
    name = topic.encode()
    head = bytearray(_HEADER.pack(PRODUCE, PRODUCE_VERSION, correlation_id, len(cid)))
    head += cid
    head += b"\x00"  # header tagged fields
    head += b"\x00"  # transactional id: null
    head += _ACKS_TIMEOUT.pack(acks, timeout_ms)
    head += b"\x02"  # one topic
    head += encode_uvarint(len(name) + 1)
    head += name
    head += encode_uvarint(len(batches) + 1)
    parts: list[bytes | bytearray | memoryview] = [b"", head]
    size = len(head)
    for i, (partition, batch) in enumerate(batches):
        prefix = (b"\x00" if i else b"") + _I32.pack(partition) + encode_uvarint(len(batch) + 1)
        parts += (prefix, batch)
        size += len(prefix) + len(batch)
    tail = b"\x00\x00\x00"  # last partition's, the topic's and the request's tagged fields
    parts.append(tail)
    size += len(tail)
    parts[0] = _LEN.pack(size)
    return parts


class _Connection(_Conn):
    """The fetcher's blocking connection, sending many parts with one sendmsg."""

    def __init__(self, host: str, port: int, client_id: str, timeout_s: float) -> None:
        super().__init__(host, port, client_id, timeout_s, 16 << 20)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)

    def send_parts(self, parts: list[bytes | bytearray | memoryview]) -> None:
        views = [memoryview(p) for p in parts if len(p)]
        while views:
            sent = self.sock.sendmsg(views)
            while views and sent >= len(views[0]):
                sent -= len(views[0])
                views.pop(0)
            if sent:
                views[0] = views[0][sent:]

    def answers(self, corr: int) -> bool:
        """Send ApiVersions v0 and wait for its answer: the node answers in order, so when it
        comes every request sent before has been handled (acks=0 requests get no answer of
        their own). False when the node closed the connection instead (how it refuses an
        acks=0 request, as Kafka does)."""
        from odradek.protocol.headers import encode_request_header

        head = encode_request_header(API_VERSIONS, 0, corr, self.client_id)
        try:
            self.send_parts([_LEN.pack(len(head)), head])
            self.receive(corr)
        except OSError:
            return False
        return True


class _InFlight(NamedTuple):
    """A request awaiting its response."""

    corr: int
    sent_at: float
    counts: list[tuple[int, int]]  # (partition, records) per batch


@dataclass
class Settings:
    """The librdkafka-named knobs of the columnar producer (see `settings_from`)."""

    acks: int = 1
    max_in_flight: int = 5
    timeout_ms: int = 30000
    batch_num_messages: int = 10000
    batch_size: int = 1_000_000
    batches_per_request: int = 0  # 0: one batch for every partition
    compression: int = 0
    client_id: str = "odradek-columnar"


_CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _acks(value: str) -> int:
    if value.strip().lower() == "all":
        return -1
    acks = int(value)
    if acks not in (-1, 0, 1):
        raise ValueError(f"acks must be 0, 1 or all (-1), not {value!r}")
    return acks


def settings_from(acks: str, extra: Mapping[str, str] | None) -> Settings:
    """Settings from librdkafka's names (`batch.num.messages`, `batch.size`,
    `max.in.flight[.requests.per.connection]`, `request.timeout.ms`, `compression.type` or
    `compression.codec`, `client.id`) plus `batches.per.request`; other keys (`linger.ms`:
    batches are built whole, nothing waits) are ignored."""
    x = dict(extra or {})
    s = Settings(acks=_acks(x.get("acks", acks)))
    s.max_in_flight = int(x.get("max.in.flight", x.get("max.in.flight.requests.per.connection",
                                                       s.max_in_flight)))
    s.timeout_ms = int(x.get("request.timeout.ms", s.timeout_ms))
    s.batch_num_messages = int(x.get("batch.num.messages", s.batch_num_messages))
    s.batch_size = int(x.get("batch.size", s.batch_size))
    s.batches_per_request = int(x.get("batches.per.request", s.batches_per_request))
    codec = x.get("compression.type", x.get("compression.codec", "none")).lower()
    if codec not in _CODECS:
        raise ValueError(f"unknown compression {codec!r} (one of {', '.join(_CODECS)})")
    s.compression = _CODECS[codec]
    s.client_id = x.get("client.id", s.client_id)
    if s.max_in_flight < 1 or s.batch_num_messages < 1 or s.batch_size < 1:
        raise ValueError("max.in.flight, batch.num.messages and batch.size must be >= 1")
    return s


def topic_leaders(bootstrap: str, topic: str, client_id: str = "odradek-columnar",
                  timeout_s: float = 30.0) -> tuple[dict[int, tuple[str, int]], dict[int, int]]:
    """(broker id -> (host, port), partition -> leader id) of `topic`, from Metadata v8.
    Raises ProduceError with the topic's error code (UNKNOWN_TOPIC_OR_PARTITION, ...)."""
    from kio.schema.metadata.v8.request import MetadataRequest, MetadataRequestTopic

    from odradek.protocol.messages import decode_response, encode_request

    last: Exception | None = None
    for host, port in _servers(bootstrap):
        try:
            conn = _Conn(host, port, client_id, timeout_s, 64 << 20)
        except OSError as exc:
            last = exc
            continue
        try:
            req = MetadataRequest(topics=(MetadataRequestTopic(name=topic),),
                                  allow_auto_topic_creation=False,
                                  include_cluster_authorized_operations=False,
                                  include_topic_authorized_operations=False)
            corr = conn.send(METADATA, METADATA_VERSION, encode_request(req))
            meta: Any = decode_response(METADATA, METADATA_VERSION, conn.receive(corr), 4)
        finally:
            conn.close()
        brokers = {int(b.node_id): (b.host, int(b.port)) for b in meta.brokers}
        for t in meta.topics:
            if t.name != topic:
                continue
            code = int(t.error_code.value)
            if code:
                raise ProduceError(code, f"topic {topic}: {_error_name(code)}")
            return brokers, {int(p.partition_index): int(p.leader_id) for p in t.partitions}
        raise ProduceError(UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic}: not in the metadata")
    raise ConnectionError(f"cannot reach any bootstrap server: {last}")


class ColumnarProducer:
    """Sends ready-made batches to one topic's partition leaders, `max_in_flight` requests
    per connection. `send` blocks only while a connection has that many unanswered."""

    def __init__(self, bootstrap: str, topic: str, settings: Settings | None = None) -> None:
        self.topic = topic
        self.settings = settings or Settings()
        self.bootstrap = bootstrap
        self.timeout_s = self.settings.timeout_ms / 1000 + 10
        self.brokers, self.leaders = topic_leaders(bootstrap, topic, self.settings.client_id,
                                                   self.timeout_s)
        self.partitions = sorted(self.leaders)
        self._conns: dict[int, _Connection] = {}
        self._inflight: dict[int, collections.deque[_InFlight]] = {}
        self._corr = 0
        self.acked_records = 0
        self.failed_records = 0
        self.sent_records = 0
        self.errors: collections.Counter[tuple[int, int]] = collections.Counter()
        self.first_error: str | None = None
        self.latencies_ms: list[float] = []

    def _node_for(self, partition: int) -> int:
        # A partition the metadata does not know goes to any broker, which answers with
        # the right error (UNKNOWN_TOPIC_OR_PARTITION) instead of us guessing.
        node = self.leaders.get(partition, -1)
        if node in self.brokers:
            return node
        if node >= 0 or partition in self.leaders:
            # A known partition without a live leader: refuse it here, as Kafka's producer
            # would after its metadata retries.
            raise ProduceError(LEADER_NOT_AVAILABLE, f"{self.topic}-{partition}: no leader")
        return min(self.brokers)

    def _conn(self, node: int) -> _Connection:
        conn = self._conns.get(node)
        if conn is None:
            host, port = self.brokers[node]
            conn = _Connection(host, port, self.settings.client_id, self.timeout_s)
            self._conns[node] = conn
            self._inflight[node] = collections.deque()
        return conn

    def connect(self) -> None:
        """Open the connections to every leader now (before a timed run)."""
        for p in self.partitions:
            self._conn(self._node_for(p))

    def send(self, batches: Sequence[tuple[int, bytes | bytearray]]) -> None:
        """One Produce request per leader carrying these (partition, batch) pairs; the
        partitions of one call must differ (one batch per partition per request)."""
        by_node: dict[int, list[tuple[int, bytes | bytearray]]] = {}
        for partition, batch in batches:
            by_node.setdefault(self._node_for(partition), []).append((partition, batch))
        for node, group in by_node.items():
            conn = self._conn(node)
            queue = self._inflight[node]
            while len(queue) >= self.settings.max_in_flight:
                self._receive(node)
            self._corr += 1
            counts = [(p, _RECORDS_COUNT.unpack_from(b, _RECORDS_COUNT_OFFSET)[0])
                      for p, b in group]
            conn.send_parts(encode_produce_request(
                self._corr, self.settings.client_id, self.settings.acks,
                self.settings.timeout_ms, self.topic, group))
            self.sent_records += sum(c for _, c in counts)
            if self.settings.acks != 0:
                queue.append(_InFlight(self._corr, time.monotonic(), counts))

    def _receive(self, node: int) -> None:
        from odradek.protocol.messages import decode_response

        pending = self._inflight[node].popleft()
        frame = self._conns[node].receive(pending.corr)
        self.latencies_ms.append((time.monotonic() - pending.sent_at) * 1000)
        reader = Reader(frame, 4)
        reader.skip_tagged_fields()  # response header v1
        resp: Any = decode_response(PRODUCE, PRODUCE_VERSION, frame, reader.pos)
        codes = {(t.name, int(p.index)): (int(p.error_code.value), p.error_message)
                 for t in resp.responses for p in t.partition_responses}
        for partition, count in pending.counts:
            code, message = codes.get((self.topic, partition), (-1, "no answer for it"))
            if code == 0:
                self.acked_records += count
                continue
            self.failed_records += count
            self.errors[(partition, code)] += 1
            if self.first_error is None:
                name = _error_name(code) if code >= 0 else "MISSING_PARTITION_RESPONSE"
                self.first_error = (f"{self.topic}-{partition}: {name}"
                                    + (f": {message}" if message else ""))

    def flush(self) -> None:
        """Wait for every answer (acks=0: for the node to have handled every request, and
        count a connection it closed as an error)."""
        for node, queue in self._inflight.items():
            while queue:
                self._receive(node)
        if self.settings.acks == 0:
            for node, conn in list(self._conns.items()):
                self._corr += 1
                if not conn.answers(self._corr):
                    self.errors[(-1, -1)] += 1
                    self.first_error = self.first_error or (
                        f"node {node} closed the connection: an acks=0 request was refused")
                    conn.close()
                    del self._conns[node]

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
        self._inflight.clear()

    def __enter__(self) -> ColumnarProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------------- perf tool


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
    perf.produce_records). Every record carries the same random payload of record_size bytes
    and a null key, as kafka-producer-perf-test sends: the payload is still copied into
    every record of every batch (a broadcast view, not a cached batch)."""
    for name in _WARM:
        importlib.import_module(name)
    from odradek.client.batch_builder import build_columnar_batch, fixed_column

    client = {"bootstrap.servers": resolve_bootstrap(bootstrap), **dict(extra or {})}
    if not supports(client):
        raise RuntimeError("the columnar client speaks PLAINTEXT only (no SASL/SSL settings)")
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
                        settle_s: float = 2.0, limit_s: float = 60.0) -> int:
    """The topic's watermark sum once it reaches `target` or stops moving for settle_s
    (acks=0: the node may still be appending when the client has sent its last byte)."""
    last = high_watermarks(bootstrap, topic)
    changed = start = time.monotonic()
    while last < target and time.monotonic() - changed < settle_s \
            and time.monotonic() - start < limit_s:
        time.sleep(0.1)
        now = high_watermarks(bootstrap, topic)
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
        listed = ", ".join(f"{'?' if p < 0 else p}: {_error_name(c) if c >= 0 else 'closed'} "
                           f"x{n}" for (p, c), n in sorted(error_codes.items()))
        print(f"errors per partition: {listed}", file=sys.stderr)


def run_producer_columnar(bootstrap: str | None, topic: str, num_records: int, record_size: int,
                          acks: str = "1", extra: dict[str, str] | None = None,
                          out: TextIO | None = sys.stdout, throughput: float = -1,
                          max_seconds: float | None = None,
                          processes: int = 1) -> ProducerResult:
    """perf.run_producer's semantics on the columnar client: acknowledged records are
    counted from the topic's high watermarks (capped at what was sent), latency percentiles
    are per request (send to answer; none with acks=0). Like kafka-producer-perf-test, every
    record is the same random payload of record_size bytes (null key). With `processes` > 1
    that many processes share the records and the rate."""
    if processes > 1:
        from odradek.client.perf_parallel import run_producers

        return run_producers(bootstrap, topic, num_records, record_size, acks, extra, out,
                             throughput, max_seconds, processes, columnar=True)
    before = high_watermarks(bootstrap, topic)
    run = produce_columnar(bootstrap, topic, num_records, record_size, acks, extra, out,
                           throughput, max_seconds)
    return finish_columnar(bootstrap, topic, before, [run], record_size, acks, out, 1)


def finish_columnar(bootstrap: str | None, topic: str, before: int, runs: list[ColumnarRun],
                    record_size: int, acks: str, out: TextIO | None,
                    processes: int) -> ProducerResult:
    """Count, total and report the runs of one or more producer processes."""
    sent = sum(r.sent for r in runs)
    if _acks(acks) == 0:
        after = wait_for_watermarks(bootstrap, topic, before + sent)
    else:
        after = high_watermarks(bootstrap, topic)
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
        result.errors = sum(r.sent - r.acked for r in runs) if _acks(acks) else sum(codes.values())
    first_error = next((r.first_error for r in runs if r.first_error), None)
    report_columnar(result, sum(r.cpu_seconds for r in runs), out, first_error, processes,
                    codes)
    return result
