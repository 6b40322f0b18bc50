"""A minimal blocking Fetch client for one partition, over a plain or TLS socket.

For readers that decode record batches themselves (odradek.client.columnar) instead of
taking one client object per record. It speaks Metadata v8 (to find the leader) and Fetch
v11 (topic names, aborted transactions, log start offset), both served by every Kafka since
2.3 and by odradek. PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL with PLAIN or SCRAM
(client/secure_socket.py); callers with other security settings (OAUTHBEARER, GSSAPI, a
PKCS12 store) use confluent-kafka instead (see `supports`).

One request may be in flight while the caller decodes the previous response, so the
broker's work overlaps ours.

It follows leader changes as Kafka's consumer does: an answer in metadata.LEADER_CHANGE
(NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, LEADER_NOT_AVAILABLE)
or a connection that closes or fails drops the connection, looks the leader up again and
sends the same fetch (same offset) to it, for up to `retry_s`; the caller sees only the
answer of the leader. A fetch never reads above the high watermark, so the new leader has
every record the old one served. Each fetch carries the leader epoch the metadata named
(KIP-320's current_leader_epoch): a Fetch v11 without client metadata checks is served by a
follower too (KIP-392, up to the follower's high watermark), so without the epoch a fetcher
left on an old leader that stayed up would read on from it as a follower, behind the
leader, instead of being told FENCED_LEADER_EPOCH and moving to the leader.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Mapping
from datetime import timedelta
from typing import NamedTuple

from odradek.client.connection import Connection, error_name, security_of, servers
from odradek.client.connection import fetch_supports as supports
from odradek.client.metadata import LEADER_CHANGE, RETRY_BACKOFF_S, topic_leaders, wait_leader

# kio (and odradek.protocol.messages over it) is imported where used: it takes seconds to
# import, and every Spark Python process that plans a query imports this module's caller.

__all__ = ["FetchError", "Fetched", "PartitionFetcher", "parse_fetch", "supports"]

FETCH = 1
NO_ERROR, LEADER_NOT_AVAILABLE = 0, 5
FETCH_VERSION = 11
# Room for the response fields around the records in one frame.
_FRAME_SLACK = 1 << 20


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


class PartitionFetcher:
    """Fetches one partition from its leader; `send` then `receive`, one in flight."""

    def __init__(self, client: Mapping[str, str], topic: str, partition: int, *,
                 read_committed: bool, timeout_s: float = 30.0,
                 max_bytes: int = 64 << 20, partition_max_bytes: int = 32 << 20,
                 max_wait_ms: int = 100, retry_s: float = 120.0) -> None:
        self.topic, self.partition = topic, partition
        self.bootstrap = client["bootstrap.servers"]
        servers(self.bootstrap)  # a bad bootstrap.servers fails here, not at the first fetch
        self.client_id = client.get("client.id", "odradek-spark")
        self.security = security_of(client)  # TLS and SASL settings, None for plaintext
        self.isolation = 1 if read_committed else 0
        self.timeout_s = timeout_s
        self.max_bytes, self.partition_max_bytes = max_bytes, partition_max_bytes
        self.max_wait_ms = max_wait_ms
        # how long a leader change may take before the error reaches the caller (Kafka's
        # consumer retries until its own deadline; 120 s is delivery.timeout.ms's default)
        self.retry_s = retry_s
        self.leader_changes = 0  # answers or connections that sent us to the leader again
        self._conn: Connection | None = None
        self._pending: int | None = None
        self._offset = 0
        self._leader_epoch = -1  # of the leader connected to, from the metadata

    def _leader(self) -> tuple[str, int, int]:
        """The first lookup: a topic the metadata refuses is the caller's error at once."""
        found = topic_leaders(self.bootstrap, self.topic, self.client_id, self.timeout_s,
                              self.security)
        if found is not None and found.error_code not in (NO_ERROR, LEADER_NOT_AVAILABLE):
            raise FetchError(found.error_code, f"metadata of {self.topic}: "
                             f"{error_name(found.error_code)}")
        node = found.leaders.get(self.partition, -1) if found is not None else -1
        if found is None or (self.partition not in found.leaders and found.leaders):
            raise FetchError(LEADER_NOT_AVAILABLE,
                             f"no leader for {self.topic}-{self.partition}")
        if node in found.brokers:
            return (*found.brokers[node], found.epochs.get(self.partition, -1))
        # a known partition between leaders: wait for the election, as for a leader change
        return wait_leader(self.bootstrap, self.topic, self.partition, self.client_id,
                           self.timeout_s, time.monotonic() + self.retry_s, self.security)

    def _send_request(self, deadline: float) -> None:
        """Send the current request to the leader, looking it up (again) until it goes out."""
        while True:
            try:
                if self._conn is None:
                    if self.leader_changes:
                        host, port, epoch = wait_leader(self.bootstrap, self.topic,
                                                        self.partition, self.client_id,
                                                        self.timeout_s, deadline, self.security)
                    else:
                        host, port, epoch = self._leader()
                    self._conn = Connection(host, port, self.client_id, self.timeout_s,
                                            self.max_bytes + _FRAME_SLACK, self.security)
                    self._leader_epoch = epoch
                self._pending = self._conn.send(FETCH, FETCH_VERSION, self._encode())
                return
            except OSError:
                self.reset()
                if time.monotonic() >= deadline:
                    raise
                self.leader_changes += 1
                time.sleep(RETRY_BACKOFF_S)

    def send(self, offset: int) -> None:
        """Ask for records from `offset` (a response not yet received is read first)."""
        if self._pending is not None:
            self.receive()
        self._offset = offset
        self._send_request(time.monotonic() + self.retry_s)

    def _encode(self) -> bytes:
        """The Fetch of `_offset`, with the epoch of the leader we are connected to."""
        from kio.schema.fetch.v11.request import FetchPartition, FetchRequest, FetchTopic
        from kio.static.primitive import i8, i32, i64

        from odradek.protocol.messages import encode_request

        return encode_request(FetchRequest(
            max_wait=timedelta(milliseconds=self.max_wait_ms), min_bytes=i32(1),
            max_bytes=i32(self.max_bytes), isolation_level=i8(self.isolation),
            topics=(FetchTopic(topic=self.topic, partitions=(FetchPartition(
                partition=i32(self.partition), current_leader_epoch=i32(self._leader_epoch),
                fetch_offset=i64(self._offset),
                partition_max_bytes=i32(self.partition_max_bytes)),)),),
            forgotten_topics_data=()))

    def receive(self, *, copy: bool = True) -> Fetched:
        """The answer to the fetch in flight. With copy=False its records are a read-only
        view into this fetcher's receive buffer (no copy of up to 32 MiB): valid only until
        the next `receive` or `send` here, so decode them before that."""
        if self._pending is None or self._conn is None:
            raise RuntimeError("receive() without a fetch in flight")
        deadline = time.monotonic() + self.retry_s
        while True:
            corr, self._pending = self._pending, None
            try:
                got = parse_fetch(self._conn.receive(corr), self.topic, self.partition)
                if got.error_code not in LEADER_CHANGE:
                    break
            except OSError:
                # the leader died or closed on us: the same fetch goes to the next leader
                if time.monotonic() >= deadline:
                    self.reset()
                    raise
            else:
                if time.monotonic() >= deadline:
                    self.reset()
                    return got
            self.reset()
            self.leader_changes += 1
            time.sleep(RETRY_BACKOFF_S)
            self._send_request(deadline)
            assert self._conn is not None
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
