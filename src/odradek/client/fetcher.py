"""A minimal blocking Fetch client for one partition, over a plain socket.

For readers that decode record batches themselves (odradek.client.columnar) instead of
taking one client object per record. It speaks Metadata v8 (to find the leader) and Fetch
v11 (topic names, aborted transactions, log start offset), both served by every Kafka since
2.3 and by odradek. Only PLAINTEXT without SASL: callers with other security settings use
confluent-kafka instead (see `supports`).

One request may be in flight while the caller decodes the previous response, so the
broker's work overlaps ours.
"""

from __future__ import annotations

import mmap
import socket
import struct
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, NamedTuple

# kio (and odradek.protocol.messages over it) is imported where used: it takes seconds to
# import, and every Spark Python process that plans a query imports this module's caller.

__all__ = ["FetchError", "Fetched", "PartitionFetcher", "parse_fetch", "supports"]

FETCH, METADATA = 1, 3
NO_ERROR, LEADER_NOT_AVAILABLE = 0, 5
FETCH_VERSION, METADATA_VERSION = 11, 8
_LEN = struct.Struct(">i")
_CORR = struct.Struct(">i")
# Room for the response fields around the records in one frame.
_FRAME_SLACK = 1 << 20
# Receive buffers from this size on are anonymous maps (see _Conn._exact).
_MMAP_AT = 1 << 20
# Settings a plain socket honours as confluent-kafka would (or that do not matter to it).
_PLAIN = {"plaintext", ""}


class FetchError(RuntimeError):
    """A fetch failed with a Kafka error code (kept in `code`)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class Fetched(NamedTuple):
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[tuple[int, int]]  # (producer_id, first_offset)
    records: bytes | memoryview  # a memoryview only from receive(copy=False)


def supports(client: Mapping[str, str]) -> bool:
    """True when the client settings need nothing beyond a plaintext socket."""
    proto = client.get("security.protocol", "plaintext").strip().lower()
    return proto in _PLAIN and not any(k.startswith(("sasl.", "ssl.")) for k in client)


def _servers(bootstrap: str) -> list[tuple[str, int]]:
    out = []
    for item in bootstrap.split(","):
        item = item.strip()
        if "://" in item:
            item = item.split("://", 1)[1]
        host, _, port = item.rpartition(":")
        if host and port.isdigit():
            out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError(f"no host:port in bootstrap.servers {bootstrap!r}")
    return out


_FETCH_TOP = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id
_FETCH_PART = struct.Struct(">ihqqq")  # index, error_code, high wm, last stable, log start
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ABORTED = struct.Struct(">qq")  # producer_id, first_offset


def parse_fetch(frame: bytes | memoryview, topic: str, partition: int) -> Fetched:
    """One partition's answer in a Fetch v11 response frame (response header v0: the
    correlation id, then the body), read with struct instead of kio: kio's decode copied
    the records (up to 32 MiB) and cost as much CPU again as receiving them. The records
    are a slice of `frame` (no copy). Malformed bytes raise ProtocolError; a response
    without the partition, ConnectionError."""
    view = memoryview(frame)
    end = len(view)
    name = topic.encode()
    found: Fetched | None = None
    try:
        _, error, _ = _FETCH_TOP.unpack_from(view, 4)
        if error != NO_ERROR:
            return Fetched(error, -1, -1, -1, [], b"")
        pos = 4 + _FETCH_TOP.size
        (topics,) = _I32.unpack_from(view, pos)
        pos += 4
        for _ in range(_count(topics, end - pos, 6)):
            (n,) = _I16.unpack_from(view, pos)
            pos += 2
            if n < 0 or pos + n > end:
                raise ValueError(f"topic name of {n} bytes")
            ours = view[pos:pos + n] == name
            pos += n
            (parts,) = _I32.unpack_from(view, pos)
            pos += 4
            for _ in range(_count(parts, end - pos, _FETCH_PART.size + 12)):
                index, error, high, stable, start = _FETCH_PART.unpack_from(view, pos)
                pos += _FETCH_PART.size
                (n,) = _I32.unpack_from(view, pos)
                pos += 4
                aborted = []
                for _ in range(_count(n, end - pos, _ABORTED.size, nullable=True)):
                    aborted.append(_ABORTED.unpack_from(view, pos))
                    pos += _ABORTED.size
                (n,) = _I32.unpack_from(view, pos + 4)  # after preferred_read_replica
                pos += 8
                if n < -1 or pos + max(n, 0) > end:
                    raise ValueError(f"records of {n} bytes")
                records = view[pos:pos + max(n, 0)]
                pos += max(n, 0)
                if ours and index == partition and found is None:
                    found = Fetched(error, high, stable, start, aborted, records)
    except (struct.error, ValueError) as exc:
        from odradek.protocol.errors import ProtocolError

        raise ProtocolError(f"malformed Fetch v{FETCH_VERSION} response: {exc}") from None
    if found is None:
        raise ConnectionError(f"fetch response without {topic}-{partition}")
    return found


def _count(n: int, left: int, least: int, nullable: bool = False) -> int:
    """An array's length, checked against the bytes left (each entry takes >= `least`)."""
    if n == -1 and nullable:
        return 0
    if n < 0 or n * least > left:
        raise ValueError(f"array of {n} entries in {left} bytes")
    return n


class _Conn:
    def __init__(self, host: str, port: int, client_id: str, timeout_s: float, max_frame: int) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.client_id = client_id
        self.max_frame = max_frame
        self.corr = 0
        self.buf: bytearray | mmap.mmap = bytearray(0)

    def send(self, api_key: int, version: int, body: bytes) -> int:
        from odradek.protocol.headers import encode_request_header

        self.corr += 1
        head = encode_request_header(api_key, version, self.corr, self.client_id)
        self.sock.sendall(_LEN.pack(len(head) + len(body)) + head + body)
        return self.corr

    def receive(self, corr: int) -> memoryview:
        """The next response frame, read-only; it lives in this connection's buffer, so it
        is valid only until the next `receive` (decode it first: kio copies what it keeps)."""
        size = _LEN.unpack(self._exact(4))[0]
        if size < 4 or size > self.max_frame:
            raise ConnectionError(f"response frame of {size} bytes is out of bounds "
                                  f"(at most {self.max_frame})")
        frame = self._exact(size).toreadonly()
        got = _CORR.unpack_from(frame, 0)[0]
        if got != corr:
            raise ConnectionError(f"response correlation id {got}, expected {corr}")
        return frame

    def _exact(self, n: int) -> memoryview:
        # One buffer per connection, grown (with room to spare: response sizes wander) to
        # the biggest frame seen: a fresh one per response cost a zero-filled allocation of
        # up to 32 MiB, and copying it into `bytes` for kio another pass (measured: 12% of
        # the columnar consumer's CPU). Anonymous mmap: its pages are zeroed by the kernel
        # as they are first written, not filled once more up front.
        if len(self.buf) < n:
            self.buf = mmap.mmap(-1, n + (n >> 3)) if n >= _MMAP_AT else bytearray(n)
        view = memoryview(self.buf)[:n]
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:], n - got)
            if k == 0:
                raise ConnectionError("the broker closed the connection")
            got += k
        return view

    def close(self) -> None:
        self.sock.close()


class PartitionFetcher:
    """Fetches one partition from its leader; `send` then `receive`, one in flight."""

    def __init__(self, client: Mapping[str, str], topic: str, partition: int, *,
                 read_committed: bool, timeout_s: float = 30.0,
                 max_bytes: int = 64 << 20, partition_max_bytes: int = 32 << 20,
                 max_wait_ms: int = 100) -> None:
        self.topic, self.partition = topic, partition
        self.bootstrap = _servers(client["bootstrap.servers"])
        self.client_id = client.get("client.id", "odradek-spark")
        self.isolation = 1 if read_committed else 0
        self.timeout_s = timeout_s
        self.max_bytes, self.partition_max_bytes = max_bytes, partition_max_bytes
        self.max_wait_ms = max_wait_ms
        self._conn: _Conn | None = None
        self._pending: int | None = None

    def _connect(self) -> _Conn:
        if self._conn is None:
            host, port = self._leader()
            self._conn = _Conn(host, port, self.client_id, self.timeout_s,
                               self.max_bytes + _FRAME_SLACK)
        return self._conn

    def _leader(self) -> tuple[str, int]:
        from kio.schema.metadata.v8.request import MetadataRequest, MetadataRequestTopic

        from odradek.protocol.messages import decode_response, encode_request

        last: Exception | None = None
        for host, port in self.bootstrap:
            try:
                conn = _Conn(host, port, self.client_id, self.timeout_s, 64 << 20)
            except OSError as exc:
                last = exc
                continue
            try:
                req = MetadataRequest(topics=(MetadataRequestTopic(name=self.topic),),
                                      allow_auto_topic_creation=False,
                                      include_cluster_authorized_operations=False,
                                      include_topic_authorized_operations=False)
                corr = conn.send(METADATA, METADATA_VERSION, encode_request(req))
                meta: Any = decode_response(METADATA, METADATA_VERSION, conn.receive(corr), 4)
            finally:
                conn.close()
            brokers = {b.node_id: (b.host, int(b.port)) for b in meta.brokers}
            for t in meta.topics:
                if t.name != self.topic:
                    continue
                if int(t.error_code.value) != NO_ERROR:
                    raise FetchError(int(t.error_code.value), f"metadata of {self.topic}: "
                                     f"{t.error_code.name}")
                for p in t.partitions:
                    if p.partition_index == self.partition and p.leader_id in brokers:
                        return brokers[p.leader_id]
            raise FetchError(LEADER_NOT_AVAILABLE,
                             f"no leader for {self.topic}-{self.partition}")
        raise ConnectionError(f"cannot reach any bootstrap server: {last}")

    def send(self, offset: int) -> None:
        """Ask for records from `offset` (a response not yet received is read first)."""
        from kio.schema.fetch.v11.request import FetchPartition, FetchRequest, FetchTopic
        from kio.static.primitive import i8, i32, i64

        from odradek.protocol.messages import encode_request

        if self._pending is not None:
            self.receive()
        req = FetchRequest(
            max_wait=timedelta(milliseconds=self.max_wait_ms), min_bytes=i32(1),
            max_bytes=i32(self.max_bytes), isolation_level=i8(self.isolation),
            topics=(FetchTopic(topic=self.topic, partitions=(FetchPartition(
                partition=i32(self.partition), fetch_offset=i64(offset),
                partition_max_bytes=i32(self.partition_max_bytes)),)),),
            forgotten_topics_data=())
        conn = self._connect()
        try:
            self._pending = conn.send(FETCH, FETCH_VERSION, encode_request(req))
        except OSError:
            self.reset()
            raise

    def receive(self, *, copy: bool = True) -> Fetched:
        """The answer to the fetch in flight. With copy=False its records are a read-only
        view into this fetcher's receive buffer (no copy of up to 32 MiB): valid only until
        the next `receive` or `send` here, so decode them before that."""
        if self._pending is None or self._conn is None:
            raise RuntimeError("receive() without a fetch in flight")
        corr, self._pending = self._pending, None
        try:
            frame = self._conn.receive(corr)
        except OSError:
            self.reset()
            raise
        got = parse_fetch(frame, self.topic, self.partition)
        if copy and not isinstance(got.records, bytes):
            got = got._replace(records=bytes(got.records))
        return got

    def reset(self) -> None:
        """Drop the connection (after an error, or when the leader moved)."""
        self._pending = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self) -> None:
        self.reset()
