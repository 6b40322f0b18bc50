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

from odradek.protocol.errors import ProtocolError, UnsupportedVersion
from odradek.protocol.messages import decode_request
from odradek.protocol.primitives import Reader, encode_uvarint
from odradek.protocol.primitives import decode_uvarint32 as _uvarint32

__all__ = [
    "FetchPartitionRequest",
    "FetchPartitionResponse",
    "FetchRequest",
    "FetchTopicRequest",
    "FileRegion",
    "decode_fetch_request",
    "decode_fetch_request_kio",
    "encode_fetch_response",
    "parts_size",
]

MIN_FETCH_VERSION = 4
MAX_FETCH_VERSION = 18
_FIRST_FLEXIBLE = 12
_ZERO_UUID = uuid.UUID(int=0)
_ZERO_UUID_BYTES = bytes(16)
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
# a partition without aborted transactions, up to its records' length: partition, error,
# HW, LSO, [v5+ log start], aborted (null), [v11+ preferred replica], [size when not flexible]
_V4_FIXED = struct.Struct(">ihqqii")
_V5_FIXED = struct.Struct(">ihqqqii")
_V11_FIXED = struct.Struct(">ihqqqiii")
_FLEX_FIXED = struct.Struct(">ihqqqBi")  # aborted: compact null (0), then a uvarint size
_SMALL_UVARINTS = [bytes((n,)) for n in range(128)]
_new_tuple = tuple.__new__


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
            records = p.records
            # Kafka sends empty records rather than null; some clients choke on null.
            size = 0 if records is None else (
                records.size if isinstance(records, FileRegion) else len(records)
            )
            aborted = p.aborted_transactions
            if aborted is None:
                # the common case in one pack: no aborted transactions (null array)
                if flexible:
                    out += _FLEX_FIXED.pack(p.partition, p.error_code, p.high_watermark,
                                            p.last_stable_offset, p.log_start_offset, 0,
                                            p.preferred_read_replica)
                    out += _SMALL_UVARINTS[size + 1] if size < 127 else encode_uvarint(size + 1)
                elif version >= 11:
                    out += _V11_FIXED.pack(p.partition, p.error_code, p.high_watermark,
                                           p.last_stable_offset, p.log_start_offset, -1,
                                           p.preferred_read_replica, size)
                elif version >= 5:
                    out += _V5_FIXED.pack(p.partition, p.error_code, p.high_watermark,
                                          p.last_stable_offset, p.log_start_offset, -1, size)
                else:
                    out += _V4_FIXED.pack(p.partition, p.error_code, p.high_watermark,
                                          p.last_stable_offset, -1, size)
            else:
                out += _IHQQ.pack(p.partition, p.error_code, p.high_watermark,
                                  p.last_stable_offset)
                if version >= 5:
                    out += _Q.pack(p.log_start_offset)
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


# the request's fixed fields before the topics, by version
_HEAD_V4 = struct.Struct(">iiiib")  # replica_id, max_wait, min_bytes, max_bytes, isolation
_HEAD_V7 = struct.Struct(">iiiibii")  # + session_id, session_epoch
_HEAD_V15 = struct.Struct(">iiibii")  # replica_id moved into the replica_state tag
# one partition of a topic: partition, [v9+ current leader epoch], fetch offset,
# [v12+ last fetched epoch], [v5+ log start offset], partition max bytes
_PART_V4 = struct.Struct(">iqi")
_PART_V5 = struct.Struct(">iqqi")
_PART_V9 = struct.Struct(">iiqqi")
_PART_V12 = struct.Struct(">iiqiqi")
_REPLICA_STATE = struct.Struct(">iq")


def _count(buf: memoryview, pos: int, flexible: bool) -> tuple[int, int]:
    """An array's length, bounded by the bytes left (every element takes at least one). No
    array of a Fetch request is nullable: a null one is malformed, as Kafka sees it."""
    if flexible:
        n, pos = _uvarint32(buf, pos)
        if n == 0:
            raise ProtocolError("null in non-nullable array")
        n -= 1
    else:
        if len(buf) - pos < 4:
            raise ProtocolError("truncated array length")
        (n,) = _I32.unpack_from(buf, pos)
        pos += 4
        if n < 0:
            raise ProtocolError(f"bad array length {n}")
    if n > len(buf) - pos:
        raise ProtocolError(f"array count {n} exceeds the {len(buf) - pos} bytes left")
    return n, pos


def _string(buf: memoryview, pos: int, flexible: bool) -> tuple[str, int]:
    if flexible:
        n, pos = _uvarint32(buf, pos)
        if n == 0:
            raise ProtocolError("null in non-nullable compact string")
        n -= 1
    else:
        if len(buf) - pos < 2:
            raise ProtocolError("truncated string length")
        (n,) = _I16.unpack_from(buf, pos)
        pos += 2
        if n < 0:
            raise ProtocolError("null in non-nullable string")
    end = pos + n
    if end > len(buf):
        raise ProtocolError(f"length {n} exceeds the {len(buf) - pos} bytes left")
    try:
        return str(buf[pos:end], "utf-8"), end
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"invalid utf-8 in string: {exc}") from None


_UUIDS: dict[bytes, uuid.UUID] = {}
_MAX_CACHED_UUIDS = 4096


def _uuid(buf: memoryview, pos: int) -> tuple[uuid.UUID | None, int]:
    """A uuid; the zero one (Kafka's "none") is None, as kio reads it."""
    end = pos + 16
    if end > len(buf):
        raise ProtocolError("truncated uuid")
    raw = bytes(buf[pos:end])
    found = _UUIDS.get(raw)
    if found is None:
        if raw == _ZERO_UUID_BYTES:
            return None, end
        # the same few topic ids come back in every fetch; uuid.UUID() costs more than a lookup
        if len(_UUIDS) >= _MAX_CACHED_UUIDS:
            _UUIDS.clear()
        found = _UUIDS[raw] = uuid.UUID(bytes=raw)
    return found, end


def _tags(buf: memoryview, pos: int) -> tuple[dict[int, memoryview], int]:
    if pos < len(buf) and buf[pos] == 0:
        return {}, pos + 1
    r = Reader(buf, pos)
    fields = r.tagged_fields()
    return fields, r.pos


def _fixed(st: struct.Struct, buf: memoryview, pos: int) -> tuple[Any, ...]:
    if len(buf) - pos < st.size:
        raise ProtocolError(f"truncated: need {st.size} bytes at {pos}")
    return st.unpack_from(buf, pos)


def decode_fetch_request(frame: memoryview | bytes, offset: int, version: int) -> FetchRequest:
    """Decode the request body at `offset`, every length bounds-checked; raises ProtocolError.

    By hand rather than through kio: a consumer's long poll sends one of these every
    fetch.wait.max.ms per broker, and kio's generic reader costs more than the rest of an
    empty fetch. What it accepts and returns is kio's (tests compare them field by field).
    Unknown tagged fields are skipped; known ones are cluster_id, replica_state (v15+), and
    per partition replica_directory_id (v17+) and high_watermark (v18+), read but unused.
    """
    if not MIN_FETCH_VERSION <= version <= MAX_FETCH_VERSION:
        raise UnsupportedVersion(1, version)
    buf = frame if isinstance(frame, memoryview) else memoryview(frame)
    if offset < 0 or offset > len(buf):
        raise ProtocolError(f"body offset {offset} outside the {len(buf)}-byte frame")
    flexible = version >= _FIRST_FLEXIBLE
    pos = offset
    session_id, session_epoch, replica_id = 0, -1, -1
    if version >= 15:
        max_wait, min_bytes, max_bytes, isolation, session_id, session_epoch = _fixed(
            _HEAD_V15, buf, pos)
        pos += _HEAD_V15.size
    elif version >= 7:
        replica_id, max_wait, min_bytes, max_bytes, isolation, session_id, session_epoch = (
            _fixed(_HEAD_V7, buf, pos))
        pos += _HEAD_V7.size
    else:
        replica_id, max_wait, min_bytes, max_bytes, isolation = _fixed(_HEAD_V4, buf, pos)
        pos += _HEAD_V4.size
    part_st = (_PART_V12 if version >= 12 else _PART_V9 if version >= 9
               else _PART_V5 if version >= 5 else _PART_V4)
    psize = part_st.size
    unpack = part_st.unpack_from
    topics: list[FetchTopicRequest] = []
    n_topics, pos = _count(buf, pos, flexible)
    for _ in range(n_topics):
        name: str | None = None
        topic_id: uuid.UUID | None = None
        if version >= 13:
            topic_id, pos = _uuid(buf, pos)
        else:
            name, pos = _string(buf, pos, flexible)
        n_parts, pos = _count(buf, pos, flexible)
        parts: list[FetchPartitionRequest] = []
        for _ in range(n_parts):
            if len(buf) - pos < psize:
                raise ProtocolError(f"truncated: need {psize} bytes at {pos}")
            f = unpack(buf, pos)
            pos += psize
            if version >= 12:
                parts.append(_new_tuple(FetchPartitionRequest, (f[0], f[2], f[5], f[1], f[3], f[4])))
                tags, pos = _tags(buf, pos)
                if tags:
                    _check_partition_tags(tags, version)
            elif version >= 9:
                parts.append(_new_tuple(FetchPartitionRequest, (f[0], f[2], f[4], f[1], -1, f[3])))
            elif version >= 5:
                parts.append(_new_tuple(FetchPartitionRequest, (f[0], f[1], f[3], -1, -1, f[2])))
            else:
                parts.append(_new_tuple(FetchPartitionRequest, (f[0], f[1], f[2], -1, -1, -1)))
        if flexible:
            _, pos = _tags(buf, pos)
        topics.append(_new_tuple(FetchTopicRequest, (name, topic_id, parts)))
    forgotten: list[tuple[str | None, uuid.UUID | None, list[int]]] = []
    if version >= 7:
        n_forgotten, pos = _count(buf, pos, flexible)
        for _ in range(n_forgotten):
            fname: str | None = None
            fid: uuid.UUID | None = None
            if version >= 13:
                fid, pos = _uuid(buf, pos)
            else:
                fname, pos = _string(buf, pos, flexible)
            n, pos = _count(buf, pos, flexible)
            if len(buf) - pos < 4 * n:
                raise ProtocolError("truncated forgotten partitions")
            forgotten.append((fname, fid, list(struct.unpack_from(f">{n}i", buf, pos))))
            pos += 4 * n
            if flexible:
                _, pos = _tags(buf, pos)
    rack_id = ""
    if version >= 11:
        rack_id, pos = _string(buf, pos, flexible)
    cluster_id: str | None = None
    replica_epoch = -1
    if flexible:
        tags, pos = _tags(buf, pos)
        if 0 in tags:
            r = Reader(tags[0])
            cluster_id = r.compact_nullable_string()
            _filled(r)
        if 1 in tags and version >= 15:
            r = Reader(tags[1])
            replica_id = r.int32()
            replica_epoch = r.int64()
            r.skip_tagged_fields()
            _filled(r)
    # tuple.__new__ straight: a NamedTuple's own __new__ is a Python frame per call
    return _new_tuple(FetchRequest, (replica_id, max_wait, min_bytes, max_bytes, isolation,
                                     session_id, session_epoch, topics, forgotten, rack_id,
                                     cluster_id, replica_epoch))


def _filled(r: Reader) -> None:
    # a known tagged field holds exactly its value
    if r.remaining():
        raise ProtocolError(f"tagged field does not fill its {r.end} bytes")


def _check_partition_tags(tags: dict[int, memoryview], version: int) -> None:
    # known tags are read (and refused when malformed); unknown ones are skipped, as Kafka does
    if version >= 17 and 0 in tags and len(tags[0]) != 16:
        raise ProtocolError("replica_directory_id is not 16 bytes")
    if version >= 18 and 1 in tags and len(tags[1]) != 8:
        raise ProtocolError("high_watermark is not 8 bytes")


def decode_fetch_request_kio(frame: memoryview | bytes, offset: int,
                             version: int) -> FetchRequest:
    """The same through kio's generic reader: the reference the tests compare with."""
    if not MIN_FETCH_VERSION <= version <= MAX_FETCH_VERSION:
        raise UnsupportedVersion(1, version)
    req = decode_request(1, version, frame, offset)
    # kio reads a null array as None; no array of a Fetch request may be null
    if req.topics is None or any(t.partitions is None for t in req.topics) or (
            version >= 7 and (req.forgotten_topics_data is None or any(
                f.partitions is None for f in req.forgotten_topics_data))):
        raise ProtocolError("null in non-nullable array")
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
        max_wait_ms=req.max_wait // _ONE_MS,
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
