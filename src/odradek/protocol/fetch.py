"""Fetch: the response encoded by hand as parts, the request through kio.

The response is a list of parts whose concatenation is the body: bytes for
the fields, and each partition's records as given (bytes, a memoryview or a
FileRegion the server sends with os.sendfile). The records' length prefix is
computed from the region's size, never by reading it.

Response layout (v4..v18): throttle_time_ms; v7+ error_code, session_id;
[topic (name, or topic_id from v13), [partition_index, error_code,
high_watermark, last_stable_offset, v5+ log_start_offset,
aborted_transactions nullable [producer_id, first_offset], v11+
preferred_read_replica, records]]; v12+ flexible (compact encodings, empty
tagged fields: diverging_epoch, current_leader, snapshot_id and
node_endpoints are left out).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, NamedTuple

from odradek.protocol.errors import UnsupportedVersion
from odradek.protocol.messages import decode_request
from odradek.protocol.primitives import encode_uvarint

__all__ = [
    "FetchPartitionRequest",
    "FetchPartitionResponse",
    "FetchRequest",
    "FetchTopicRequest",
    "FileRegion",
    "decode_fetch_request",
    "encode_fetch_response",
    "parts_size",
]

MIN_FETCH_VERSION = 4
MAX_FETCH_VERSION = 18
_FIRST_FLEXIBLE = 12
_ZERO_UUID = uuid.UUID(int=0)
_ONE_MS = timedelta(milliseconds=1)
# Records smaller than this are copied into the surrounding bytes: one part
# fewer costs less than a separate write for a few hundred bytes.
_INLINE_RECORDS = 4096

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_IHQQ = struct.Struct(">ihqq")
_Q = struct.Struct(">q")
_QQ = struct.Struct(">qq")
_IHI = struct.Struct(">ihi")


class FileRegion(NamedTuple):
    """`size` bytes of the open file `fd` from `position` (sent with os.sendfile)."""

    fd: int
    position: int
    size: int


RecordsSource = bytes | bytearray | memoryview | FileRegion


class FetchPartitionResponse(NamedTuple):
    partition: int
    error_code: int
    high_watermark: int
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: Sequence[tuple[int, int]] | None = None
    preferred_read_replica: int = -1
    records: RecordsSource | None = None


Part = bytes | memoryview | FileRegion


def parts_size(parts: Sequence[Part]) -> int:
    return sum(p.size if isinstance(p, FileRegion) else len(p) for p in parts)


def encode_fetch_response(
    version: int,
    throttle_time_ms: int,
    error_code: int,
    session_id: int,
    topics: Sequence[tuple[str, uuid.UUID | None, Sequence[FetchPartitionResponse]]],
) -> list[Part]:
    if not MIN_FETCH_VERSION <= version <= MAX_FETCH_VERSION:
        raise UnsupportedVersion(1, version)
    flexible = version >= _FIRST_FLEXIBLE
    parts: list[Part] = []
    out = bytearray(_I32.pack(throttle_time_ms))
    if version >= 7:
        out += _I16.pack(error_code)
        out += _I32.pack(session_id)
    if flexible:
        out += encode_uvarint(len(topics) + 1)
    else:
        out += _I32.pack(len(topics))
    for name, topic_id, partitions in topics:
        if version >= 13:
            out += (topic_id or _ZERO_UUID).bytes
        else:
            data = name.encode()
            if flexible:
                out += encode_uvarint(len(data) + 1)
            else:
                out += _I16.pack(len(data))
            out += data
        if flexible:
            out += encode_uvarint(len(partitions) + 1)
        else:
            out += _I32.pack(len(partitions))
        for p in partitions:
            out += _IHQQ.pack(p.partition, p.error_code, p.high_watermark, p.last_stable_offset)
            if version >= 5:
                out += _Q.pack(p.log_start_offset)
            aborted = p.aborted_transactions
            if aborted is None:
                out += b"\x00" if flexible else b"\xff\xff\xff\xff"
            else:
                if flexible:
                    out += encode_uvarint(len(aborted) + 1)
                else:
                    out += _I32.pack(len(aborted))
                for producer_id, first_offset in aborted:
                    out += _QQ.pack(producer_id, first_offset)
                    if flexible:
                        out += b"\x00"
            if version >= 11:
                out += _I32.pack(p.preferred_read_replica)
            records = p.records
            # Kafka sends empty records rather than null; some clients choke on null.
            size = 0 if records is None else (
                records.size if isinstance(records, FileRegion) else len(records)
            )
            if flexible:
                out += encode_uvarint(size + 1)
            else:
                out += _I32.pack(size)
            if size:
                if size <= _INLINE_RECORDS and not isinstance(records, FileRegion):
                    out += records  # type: ignore[operator]
                else:
                    parts.append(bytes(out))
                    out = bytearray()
                    parts.append(records if not isinstance(records, bytearray) else bytes(records))  # type: ignore[arg-type]
            if flexible:
                out += b"\x00"
        if flexible:
            out += b"\x00"
    if flexible:
        out += b"\x00"
    if out:
        parts.append(bytes(out))
    return parts


# --------------------------------------------------------------------------- #
# request: decoded by kio, flattened for the broker


class FetchPartitionRequest(NamedTuple):
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1


class FetchTopicRequest(NamedTuple):
    name: str | None  # up to v12
    topic_id: uuid.UUID | None  # v13+
    partitions: list[FetchPartitionRequest]


class FetchRequest(NamedTuple):
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int
    session_id: int
    session_epoch: int
    topics: list[FetchTopicRequest]
    # (name or None, topic id or None, partitions)
    forgotten_topics: list[tuple[str | None, uuid.UUID | None, list[int]]]
    rack_id: str
    cluster_id: str | None = None
    replica_epoch: int = -1


def _ms(value: Any) -> int:
    # kio maps *_ms fields to timedelta; keep ints.
    # (integer division: total_seconds() * 1000 loses a millisecond to float rounding)
    return value // _ONE_MS if isinstance(value, timedelta) else int(value)


def decode_fetch_request(frame: memoryview | bytes, offset: int, version: int) -> FetchRequest:
    """Decode through kio (bounds-checked) and flatten into plain tuples."""
    if not MIN_FETCH_VERSION <= version <= MAX_FETCH_VERSION:
        raise UnsupportedVersion(1, version)
    req = decode_request(1, version, frame, offset)
    topics = [
        FetchTopicRequest(
            getattr(t, "topic", None),
            getattr(t, "topic_id", None),
            [
                FetchPartitionRequest(
                    int(p.partition),
                    int(p.fetch_offset),
                    int(p.partition_max_bytes),
                    int(getattr(p, "current_leader_epoch", -1)),
                    int(getattr(p, "last_fetched_epoch", -1)),
                    int(getattr(p, "log_start_offset", -1)),
                )
                for p in t.partitions
            ],
        )
        for t in req.topics
    ]
    forgotten = [
        (getattr(f, "topic", None), getattr(f, "topic_id", None), [int(x) for x in f.partitions])
        for f in getattr(req, "forgotten_topics_data", ())
    ]
    replica_state = getattr(req, "replica_state", None)
    replica_id = int(replica_state.replica_id) if replica_state is not None else int(
        getattr(req, "replica_id", -1)
    )
    replica_epoch = int(replica_state.replica_epoch) if replica_state is not None else -1
    return FetchRequest(
        replica_id=replica_id,
        max_wait_ms=_ms(req.max_wait),
        min_bytes=int(req.min_bytes),
        max_bytes=int(getattr(req, "max_bytes", 0x7FFFFFFF)),
        isolation_level=int(getattr(req, "isolation_level", 0)),
        session_id=int(getattr(req, "session_id", 0)),
        session_epoch=int(getattr(req, "session_epoch", -1)),
        topics=topics,
        forgotten_topics=forgotten,
        rack_id=str(getattr(req, "rack_id", "")),
        cluster_id=getattr(req, "cluster_id", None),
        replica_epoch=replica_epoch,
    )
