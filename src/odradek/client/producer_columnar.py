"""odradek's own Produce client: record batches built from numpy columns, sent pipelined.

The reverse of the columnar Fetch path (odradek.client.fetcher + columnar): batches come
from odradek.client.batch_builder (no Python object per record) and go out over plain
sockets as Produce v9 requests, several in flight per connection (max.in.flight), one
connection per partition leader. Metadata v8 finds the leaders. TLS and SASL PLAIN/SCRAM as
the fetcher speaks them (client.secure_socket, `connection.fetch_supports`); over TLS the
parts of a request are joined and encrypted in one write (an SSL socket has no sendmsg).

Every partition's answer is read: error codes are counted per (partition, error) and the
first one kept as text. With acks=0 the node sends no answer and closes the connection when
a request fails (as Kafka does), which `flush` notices; nothing is retried.

With acks 1 or all it follows leader changes as Kafka's producer does: a batch answered with
a retriable error (metadata.LEADER_CHANGE, NOT_ENOUGH_REPLICAS[_AFTER_APPEND],
REQUEST_TIMED_OUT, NETWORK_EXCEPTION, KAFKA_STORAGE_ERROR), or in flight on a connection
that fails, is sent again once every request in flight has been answered and the metadata
refreshed, in its partition's order, until `delivery.timeout.ms`. What that guarantees is
Kafka's: with `enable.idempotence=true` (acks=all, a producer id from InitProducerId, each
batch stamped with its partition's next sequence number, kept across the retry) every batch
is appended exactly once, in order; without it (librdkafka's default), at least once: a
batch the old leader appended but never answered is appended again.

When the leader has lost this producer's state or its sequence (UNKNOWN_PRODUCER_ID, or
OUT_OF_ORDER_SEQUENCE_NUMBER with no earlier batch of the round to send first), the
producer bumps its own epoch as KIP-360 lets an idempotent producer do (librdkafka's
drain-and-bump): every answer still due is read, the epoch goes up by one (a new producer id
from InitProducerId when it would pass 32767), every partition's sequence starts again at 0,
and the batches waiting to go again are stamped anew. An UNKNOWN_PRODUCER_ID batch goes again
(the leader never had it); an out-of-order one at the head of its partition fails (it may or
may not be in the log, so sending it again could duplicate it) and is counted in `errors`;
librdkafka raises a fatal error there, we go on under the new epoch with the next batches.

The perf tool over it (`odradek bench produce --client columnar`) is
odradek.perf.columnar_producer.
"""

from __future__ import annotations

import collections
import socket
import ssl
import struct
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from odradek.client.connection import Connection, error_name, security_of
from odradek.client.metadata import LEADER_CHANGE, RETRY_BACKOFF_S, topic_leaders
from odradek.protocol.primitives import Reader, encode_uvarint

__all__ = [
    "ColumnarProducer",
    "ProduceError",
    "Settings",
    "acks_value",
    "encode_produce_request",
    "settings_from",
]

PRODUCE, API_VERSIONS, INIT_PRODUCER_ID = 0, 18, 22
PRODUCE_VERSION = 9
UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE = 3, 5
OUT_OF_ORDER_SEQUENCE_NUMBER, DUPLICATE_SEQUENCE_NUMBER = 45, 46
UNKNOWN_PRODUCER_ID = 59
MAX_EPOCH = 32767  # int16: past it the producer needs a new producer id
# Produce answers Kafka's producer sends again (after a metadata refresh for leader changes).
RETRIABLE = LEADER_CHANGE | {7, 13, 19, 20, 56}  # REQUEST_TIMED_OUT, NETWORK_EXCEPTION,
# NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS_AFTER_APPEND, KAFKA_STORAGE_ERROR
CLOSED = -1  # the error code counted for a batch whose connection failed
_IDEMPOTENT = struct.Struct(">qhi")  # producer id, producer epoch, base sequence
_IDEMPOTENT_OFFSET = 43
_CRC_OFFSET, _CRC_FROM = 17, 21
_LEN = struct.Struct(">i")
_HEADER = struct.Struct(">hhih")  # api key, version, correlation id, client id length
_ACKS_TIMEOUT = struct.Struct(">hi")
_I32 = struct.Struct(">i")
_RECORDS_COUNT = struct.Struct(">i")
_RECORDS_COUNT_OFFSET = 57


class ProduceError(RuntimeError):
    """The node refused the topic (kept in `code`, a Kafka error code)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


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


class _Connection(Connection):
    """The fetcher's blocking connection, sending many parts with one sendmsg."""

    def __init__(self, host: str, port: int, client_id: str, timeout_s: float,
                 security: Any = None) -> None:
        super().__init__(host, port, client_id, timeout_s, 16 << 20, security)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        self.tls = isinstance(self.sock, ssl.SSLSocket)

    def send_parts(self, parts: list[bytes | bytearray | memoryview]) -> None:
        if self.tls:  # encrypting copies the bytes anyway: one join, one write
            self.sock.sendall(b"".join(parts))
            return
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
    """A request awaiting its response, with its batches (sent again if it fails)."""

    corr: int
    sent_at: float
    batches: list[tuple[int, bytes | bytearray, int]]  # (partition, batch, records)


class _Retry(NamedTuple):
    partition: int
    batch: bytes | bytearray
    count: int
    code: int  # the error that sent it back (CLOSED for a failed connection)


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
    enable_idempotence: bool = False  # librdkafka's default; needs acks=all
    delivery_timeout_ms: int = 120000
    security: Any = None  # client.secure_socket.ClientSecurity; None: PLAINTEXT


_CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def acks_value(value: str) -> int:
    if value.strip().lower() == "all":
        return -1
    acks = int(value)
    if acks not in (-1, 0, 1):
        raise ValueError(f"acks must be 0, 1 or all (-1), not {value!r}")
    return acks


def settings_from(acks: str, extra: Mapping[str, str] | None) -> Settings:
    """Settings from librdkafka's names (`batch.num.messages`, `batch.size`,
    `max.in.flight[.requests.per.connection]`, `request.timeout.ms`, `compression.type` or
    `compression.codec`, `client.id`, `enable.idempotence`, `delivery.timeout.ms`) plus `batches.per.request`; other keys (`linger.ms`:
    batches are built whole, nothing waits) are ignored."""
    x = dict(extra or {})
    s = Settings(acks=acks_value(x.get("acks", acks)))
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
    s.enable_idempotence = x.get("enable.idempotence", "false").strip().lower() == "true"
    s.delivery_timeout_ms = int(x.get("delivery.timeout.ms", x.get("message.timeout.ms",
                                                                    s.delivery_timeout_ms)))
    # security.protocol, ssl.*, sasl.*: what the native connection honours, else ValueError
    # (the caller checks connection.fetch_supports first and uses confluent-kafka instead)
    s.security = security_of(x)
    if s.enable_idempotence and s.acks != -1:
        raise ValueError("enable.idempotence=true needs acks=all (as Kafka's producer says)")
    if s.max_in_flight < 1 or s.batch_num_messages < 1 or s.batch_size < 1:
        raise ValueError("max.in.flight, batch.num.messages and batch.size must be >= 1")
    return s


def leaders_of(bootstrap: str, topic: str, client_id: str = "odradek-columnar",
               timeout_s: float = 30.0, security: Any = None,
               ) -> tuple[dict[int, tuple[str, int]], dict[int, int]]:
    """(broker id -> (host, port), partition -> leader id) of `topic`. Raises ProduceError
    with the topic's error code (UNKNOWN_TOPIC_OR_PARTITION, ...)."""
    found = topic_leaders(bootstrap, topic, client_id, timeout_s, security)
    if found is None:
        raise ProduceError(UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic}: not in the metadata")
    if found.error_code:
        raise ProduceError(found.error_code, f"topic {topic}: {error_name(found.error_code)}")
    return found.brokers, found.leaders


class ColumnarProducer:
    """Sends ready-made batches to one topic's partition leaders, `max_in_flight` requests
    per connection. `send` blocks only while a connection has that many unanswered, or
    while failed batches are sent again (see the module's text)."""

    def __init__(self, bootstrap: str, topic: str, settings: Settings | None = None) -> None:
        self.topic = topic
        self.settings = settings or Settings()
        self.bootstrap = bootstrap
        self.timeout_s = self.settings.timeout_ms / 1000 + 10
        self.brokers, self.leaders = leaders_of(bootstrap, topic, self.settings.client_id,
                                                   self.timeout_s, self.settings.security)
        self.partitions = sorted(self.leaders)
        self._conns: dict[int, _Connection] = {}
        self._inflight: dict[int, collections.deque[_InFlight]] = {}
        self._retry: list[_Retry] = []
        self._recovering = False
        self._corr = 0
        self.acked_records = 0
        self.failed_records = 0
        self.sent_records = 0
        self.retried_batches = 0
        self.errors: collections.Counter[tuple[int, int]] = collections.Counter()
        self.first_error: str | None = None
        self.latencies_ms: list[float] = []
        self.producer_id, self.producer_epoch = -1, -1
        self._sequence: dict[int, int] = collections.defaultdict(int)
        self._bump_wanted = False  # an answer said our sequences no longer hold (KIP-360)
        self.epoch_bumps = 0
        if self.settings.enable_idempotence:
            self.producer_id, self.producer_epoch = self._init_producer_id()

    def _init_producer_id(self) -> tuple[int, int]:
        """InitProducerId v1 without a transactional id, from any broker, retried while
        the cluster answers with a retriable error (no coordinator or leader yet)."""
        from kio.schema.init_producer_id.v1.request import InitProducerIdRequest

        from odradek.protocol.messages import decode_response, encode_request

        body = encode_request(InitProducerIdRequest(
            transactional_id=None, transaction_timeout=_ms(60000)))
        deadline = time.monotonic() + self.settings.delivery_timeout_ms / 1000
        last = "no answer"
        while time.monotonic() < deadline:
            for host, port in [*self.brokers.values()]:
                try:
                    conn = Connection(host, port, self.settings.client_id, self.timeout_s,
                                      1 << 20, self.settings.security)
                except OSError as exc:
                    last = str(exc)
                    continue
                try:
                    corr = conn.send(INIT_PRODUCER_ID, 1, body)
                    resp: Any = decode_response(INIT_PRODUCER_ID, 1, conn.receive(corr), 4)
                except OSError as exc:
                    last = str(exc)
                    continue
                finally:
                    conn.close()
                code = int(resp.error_code.value)
                if code == 0:
                    return int(resp.producer_id), int(resp.producer_epoch)
                last = error_name(code)
            time.sleep(RETRY_BACKOFF_S)
        raise ProduceError(-1, f"InitProducerId failed: {last}")

    def _stamp(self, partition: int, batch: bytes | bytearray) -> bytes | bytearray:
        """The batch with this producer's id, epoch and the partition's next sequence (the
        CRC covers them: computed again). Done once per batch: a retry resends these bytes,
        so the leader recognises a batch it already has."""
        from crc32c import crc32c

        count = _RECORDS_COUNT.unpack_from(batch, _RECORDS_COUNT_OFFSET)[0]
        out = batch if isinstance(batch, bytearray) else bytearray(batch)
        seq = self._sequence[partition]
        _IDEMPOTENT.pack_into(out, _IDEMPOTENT_OFFSET, self.producer_id, self.producer_epoch,
                              seq)
        self._sequence[partition] = (seq + count) & 0x7FFFFFFF  # Kafka wraps at int32
        struct.pack_into(">I", out, _CRC_OFFSET, crc32c(memoryview(out)[_CRC_FROM:]))
        return out

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

    def _leader_for(self, partition: int) -> int:
        """_node_for, waiting (up to delivery.timeout.ms) for a partition between leaders."""
        try:
            return self._node_for(partition)
        except ProduceError:
            self._refresh({partition},
                          time.monotonic() + self.settings.delivery_timeout_ms / 1000)
            return self._node_for(partition)

    def _conn(self, node: int) -> _Connection:
        conn = self._conns.get(node)
        if conn is None:
            host, port = self.brokers[node]
            conn = _Connection(host, port, self.settings.client_id, self.timeout_s,
                               self.settings.security)
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
        if self._bump_wanted:
            self._recover()  # the new epoch first: these batches are stamped with it
        if self.producer_id >= 0:
            batches = [(p, self._stamp(p, b)) for p, b in batches]
        while True:
            if self._retry:
                self._recover()
            by_node: dict[int, list[tuple[int, bytes | bytearray]]] = {}
            for partition, batch in batches:
                by_node.setdefault(self._leader_for(partition), []).append((partition, batch))
            full = [n for n in by_node
                    if len(self._inflight.get(n, ())) >= self.settings.max_in_flight]
            if not full:
                break
            self._receive(full[0])
        for node, group in by_node.items():
            self._send_request(node, group)
            self.sent_records += sum(_RECORDS_COUNT.unpack_from(b, _RECORDS_COUNT_OFFSET)[0]
                                     for _, b in group)

    def _send_request(self, node: int, group: list[tuple[int, bytes | bytearray]]) -> None:
        entries = [(p, b, _RECORDS_COUNT.unpack_from(b, _RECORDS_COUNT_OFFSET)[0])
                   for p, b in group]
        self._corr += 1
        try:
            conn = self._conn(node)
            conn.send_parts(encode_produce_request(
                self._corr, self.settings.client_id, self.settings.acks,
                self.settings.timeout_ms, self.topic, group))
        except OSError:
            if self.settings.acks == 0:
                raise
            # the leader is gone: what was in flight to it, then this, goes again
            self._drop(node)
            self._retry += [_Retry(p, b, n, CLOSED) for p, b, n in entries]
            return
        if self.settings.acks != 0:
            self._inflight[node].append(_InFlight(self._corr, time.monotonic(), entries))

    def _drop(self, node: int) -> None:
        """Close a failed connection; its unanswered batches are sent again, in order."""
        conn = self._conns.pop(node, None)
        if conn is not None:
            conn.close()
        for pending in self._inflight.pop(node, ()):
            self._retry += [_Retry(p, b, n, CLOSED) for p, b, n in pending.batches]

    def _receive(self, node: int) -> None:
        from odradek.protocol.messages import decode_response

        queue = self._inflight[node]
        pending = queue[0]
        try:
            frame = self._conns[node].receive(pending.corr)
        except OSError:
            self._drop(node)
            return
        queue.popleft()
        self.latencies_ms.append((time.monotonic() - pending.sent_at) * 1000)
        reader = Reader(frame, 4)
        reader.skip_tagged_fields()  # response header v1
        resp: Any = decode_response(PRODUCE, PRODUCE_VERSION, frame, reader.pos)
        codes = {(t.name, int(p.index)): (int(p.error_code.value), p.error_message)
                 for t in resp.responses for p in t.partition_responses}
        for partition, batch, count in pending.batches:
            code, message = codes.get((self.topic, partition), (-2, "no answer for it"))
            if code == 0 or (code == DUPLICATE_SEQUENCE_NUMBER and self.producer_id >= 0):
                # a duplicate is a batch the leader already has: written once, acknowledged
                self.acked_records += count
            elif (code in RETRIABLE
                  or (code == UNKNOWN_TOPIC_OR_PARTITION and partition in self.leaders)
                  or (code == OUT_OF_ORDER_SEQUENCE_NUMBER and self.producer_id >= 0
                      and (self._retry or self._bump_wanted))):
                # (UNKNOWN_TOPIC_OR_PARTITION for a partition the metadata names is Kafka's
                # InvalidMetadataException: again after a refresh; out of order behind a batch
                # of this round that failed: it goes again too, stamped anew if the epoch is
                # bumped)
                self._retry.append(_Retry(partition, batch, count, code))
            elif code == UNKNOWN_PRODUCER_ID and self.producer_id >= 0:
                self._bump_wanted = True  # the leader never took it: again, in a new epoch
                self._retry.append(_Retry(partition, batch, count, code))
            else:
                if code == OUT_OF_ORDER_SEQUENCE_NUMBER and self.producer_id >= 0:
                    self._bump_wanted = True
                self._fail(partition, count, code, message)

    def _fail(self, partition: int, count: int, code: int, message: str | None) -> None:
        self.failed_records += count
        self.errors[(partition, code)] += 1
        if self.first_error is None:
            name = (error_name(code) if code >= 0 else
                    "connection closed" if code == CLOSED else "MISSING_PARTITION_RESPONSE")
            self.first_error = (f"{self.topic}-{partition}: {name}"
                                + (f": {message}" if message else ""))

    def _drain(self) -> None:
        for node in list(self._inflight):
            while self._inflight.get(node):
                self._receive(node)

    def _recover(self) -> None:
        """Send the failed batches again until they are answered or delivery.timeout.ms
        runs out: first every answer still due (its failures join the list, behind the
        earlier ones of their partition), then fresh metadata, then the batches in their
        partition's order; again while any fail."""
        if self._recovering:
            return
        self._recovering = True
        deadline = time.monotonic() + self.settings.delivery_timeout_ms / 1000
        try:
            while True:
                self._drain()
                if self._bump_wanted:
                    self._bump_epoch()
                if not self._retry:
                    return
                retry, self._retry = self._retry, []
                if time.monotonic() >= deadline:
                    for r in retry:
                        self._fail(r.partition, r.count, r.code, "delivery.timeout.ms expired")
                    return
                time.sleep(RETRY_BACKOFF_S)
                self._refresh({r.partition for r in retry}, deadline)
                self.retried_batches += len(retry)
                for r in retry:
                    try:
                        node = self._node_for(r.partition)
                    except ProduceError:
                        self._retry.append(r)
                        continue
                    self._send_request(node, [(r.partition, r.batch)])
        finally:
            self._recovering = False

    def _bump_epoch(self) -> None:
        """KIP-360 for an idempotent producer, once nothing is in flight: the next epoch (a
        new producer id past the int16 range), sequences from 0, waiting batches stamped
        anew in their order."""
        self._bump_wanted = False
        if self.producer_epoch >= MAX_EPOCH:
            self.producer_id, self.producer_epoch = self._init_producer_id()
        else:
            self.producer_epoch += 1
        self.epoch_bumps += 1
        self._sequence.clear()
        self._retry = [r._replace(batch=self._stamp(r.partition, r.batch)) for r in self._retry]

    def _refresh(self, partitions: set[int], deadline: float) -> None:
        """New metadata, asked again until every one of `partitions` has a live leader."""
        while True:
            try:
                self.brokers, self.leaders = leaders_of(self.bootstrap, self.topic,
                                                        self.settings.client_id,
                                                        self.timeout_s, self.settings.security)
            except (OSError, ProduceError):
                pass
            else:
                if all(self.leaders.get(p, -1) in self.brokers for p in partitions):
                    return
            if time.monotonic() >= deadline:
                return
            time.sleep(RETRY_BACKOFF_S)

    def flush(self) -> None:
        """Wait for every answer, sending failed batches again (acks=0: wait for the node to
        have handled every request, and count a connection it closed as an error)."""
        self._drain()
        if self._retry or self._bump_wanted:
            self._recover()
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


def _ms(ms: int) -> Any:
    from datetime import timedelta

    return timedelta(milliseconds=ms)
