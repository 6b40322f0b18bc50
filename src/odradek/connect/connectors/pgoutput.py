"""PostgreSQL's pgoutput logical replication messages (protocol version 1), decoded, sans I/O.

The formats are PostgreSQL's "Logical Replication Message Formats": every integer big-endian,
strings NUL-terminated, a tuple as a column count and per column a kind byte (`n` null, `u`
an unchanged TOASTed value, `t` text with a length). Version 1 carries no streamed (in
progress) transactions and no binary values, so neither is accepted here.

`decode(data)` returns one message dataclass or raises `PgOutputError`: a truncated or
malformed message is an error the caller reports, never an IndexError or struct.error.
"""

from __future__ import annotations

import datetime as dt
import struct
from dataclasses import dataclass

# pgoutput's timestamps count microseconds from PostgreSQL's epoch.
PG_EPOCH_US = int(dt.datetime(2000, 1, 1, tzinfo=dt.UTC).timestamp()) * 1_000_000


class PgOutputError(ValueError):
    """A message that is not a well-formed pgoutput v1 message."""


@dataclass(frozen=True)
class Begin:
    final_lsn: int
    commit_ts_us: int  # microseconds since the Unix epoch
    xid: int


@dataclass(frozen=True)
class Commit:
    flags: int
    commit_lsn: int
    end_lsn: int
    commit_ts_us: int


@dataclass(frozen=True)
class Origin:
    commit_lsn: int
    name: str


@dataclass(frozen=True)
class Column:
    name: str
    type_oid: int
    type_modifier: int
    key: bool  # part of the replica identity (the primary key by default)


@dataclass(frozen=True)
class Relation:
    relid: int
    namespace: str
    name: str
    replica_identity: str  # d default, n nothing, f full, i index
    columns: tuple[Column, ...]


@dataclass(frozen=True)
class TypeInfo:
    oid: int
    namespace: str
    name: str


UNCHANGED = object()  # a TOASTed value the update did not touch: not sent
Tuple = tuple[str | object | None, ...]  # text values, None (SQL NULL) or UNCHANGED


@dataclass(frozen=True)
class Insert:
    relid: int
    new: Tuple


@dataclass(frozen=True)
class Update:
    relid: int
    old: Tuple | None  # the old key ('K') or whole old row ('O'), when the identity sends it
    old_is_key: bool
    new: Tuple


@dataclass(frozen=True)
class Delete:
    relid: int
    old: Tuple
    old_is_key: bool


@dataclass(frozen=True)
class Truncate:
    relids: tuple[int, ...]
    cascade: bool
    restart_identity: bool


@dataclass(frozen=True)
class LogicalMessage:
    transactional: bool
    lsn: int
    prefix: str
    content: bytes


Message = (Begin | Commit | Origin | Relation | TypeInfo | Insert | Update | Delete | Truncate
           | LogicalMessage)


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int, what: str) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise PgOutputError(f"message truncated reading {what} at byte {self.pos} "
                                f"(length {len(self.data)})")
        out = self.data[self.pos:end]
        self.pos = end
        return out

    def unpack(self, fmt: str, what: str) -> int:
        s = struct.Struct(fmt)
        value: int = s.unpack(self.take(s.size, what))[0]
        return value

    def u8(self, what: str) -> int:
        return self.unpack(">B", what)

    def i16(self, what: str) -> int:
        return self.unpack(">h", what)

    def i32(self, what: str) -> int:
        return self.unpack(">i", what)

    def u32(self, what: str) -> int:
        return self.unpack(">I", what)

    def u64(self, what: str) -> int:
        return self.unpack(">Q", what)

    def i64(self, what: str) -> int:
        return self.unpack(">q", what)

    def string(self, what: str) -> str:
        end = self.data.find(b"\0", self.pos)
        if end < 0:
            raise PgOutputError(f"unterminated string for {what} at byte {self.pos}")
        raw = self.data[self.pos:end]
        self.pos = end + 1
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PgOutputError(f"{what} is not UTF-8: {exc}") from None

    def timestamp(self, what: str) -> int:
        return self.i64(what) + PG_EPOCH_US

    def tuple(self) -> Tuple:
        count = self.i16("tuple column count")
        if count < 0:
            raise PgOutputError(f"negative tuple column count {count}")
        values: list[str | object | None] = []
        for i in range(count):
            kind = self.take(1, f"kind of column {i}")
            if kind == b"n":
                values.append(None)
            elif kind == b"u":
                values.append(UNCHANGED)
            elif kind == b"t":
                length = self.i32(f"length of column {i}")
                raw = self.take(length, f"value of column {i}")
                try:
                    values.append(raw.decode("utf-8"))
                except UnicodeDecodeError as exc:
                    raise PgOutputError(f"column {i} is not UTF-8 text: {exc}") from None
            elif kind == b"b":
                raise PgOutputError("binary tuple values need protocol version 2+ with the "
                                    "binary option; this decoder speaks version 1")
            else:
                raise PgOutputError(f"unknown tuple value kind {kind!r} in column {i}")
        return tuple(values)

    def done(self, kind: str) -> None:
        if self.pos != len(self.data):
            raise PgOutputError(f"{len(self.data) - self.pos} trailing bytes after a {kind} "
                                "message")


def _relation(r: _Reader) -> Relation:
    relid = r.u32("relation id")
    namespace = r.string("namespace")
    name = r.string("relation name")
    identity = chr(r.u8("replica identity"))
    if identity not in "dnfi":
        raise PgOutputError(f"unknown replica identity {identity!r}")
    count = r.i16("column count")
    if count < 0:
        raise PgOutputError(f"negative column count {count}")
    columns = []
    for i in range(count):
        flags = r.u8(f"flags of column {i}")
        col_name = r.string(f"name of column {i}")
        columns.append(Column(col_name, r.u32(f"type of column {i}"),
                              r.i32(f"type modifier of column {i}"), bool(flags & 1)))
    return Relation(relid, namespace, name, identity, tuple(columns))


def _new_tuple(r: _Reader, what: str) -> Tuple:
    marker = r.take(1, f"{what} marker")
    if marker != b"N":
        raise PgOutputError(f"expected 'N' before the new tuple of {what}, got {marker!r}")
    return r.tuple()


def decode(data: bytes) -> Message:
    """One pgoutput message (the bytes of one XLogData payload or one peeked row)."""
    if not data:
        raise PgOutputError("empty message")
    r = _Reader(bytes(data))
    kind = r.take(1, "message type")
    msg: Message
    if kind == b"B":
        msg = Begin(r.u64("final LSN"), r.timestamp("commit timestamp"), r.u32("xid"))
    elif kind == b"C":
        msg = Commit(r.u8("flags"), r.u64("commit LSN"), r.u64("end LSN"),
                     r.timestamp("commit timestamp"))
    elif kind == b"O":
        msg = Origin(r.u64("origin LSN"), r.string("origin name"))
    elif kind == b"R":
        msg = _relation(r)
    elif kind == b"Y":
        msg = TypeInfo(r.u32("type oid"), r.string("type namespace"), r.string("type name"))
    elif kind == b"I":
        msg = Insert(r.u32("relation id"), _new_tuple(r, "insert"))
    elif kind == b"U":
        relid = r.u32("relation id")
        marker = r.take(1, "update marker")
        old: Tuple | None = None
        if marker in (b"K", b"O"):
            old = r.tuple()
            msg = Update(relid, old, marker == b"K", _new_tuple(r, "update"))
        elif marker == b"N":
            msg = Update(relid, None, False, r.tuple())
        else:
            raise PgOutputError(f"unknown update marker {marker!r}")
    elif kind == b"D":
        relid = r.u32("relation id")
        marker = r.take(1, "delete marker")
        if marker not in (b"K", b"O"):
            raise PgOutputError(f"unknown delete marker {marker!r}")
        msg = Delete(relid, r.tuple(), marker == b"K")
    elif kind == b"T":
        count = r.i32("relation count")
        if count < 0:
            raise PgOutputError(f"negative relation count {count}")
        options = r.u8("truncate options")
        relids = tuple(r.u32(f"relation id {i}") for i in range(count))
        msg = Truncate(relids, bool(options & 1), bool(options & 2))
    elif kind == b"M":
        flags = r.u8("message flags")
        lsn = r.u64("message LSN")
        prefix = r.string("message prefix")
        msg = LogicalMessage(bool(flags & 1), lsn, prefix, r.take(r.i32("message length"),
                                                                 "message content"))
    elif kind in (b"S", b"E", b"A", b"c", b"P", b"K", b"r", b"b"):
        raise PgOutputError(f"message type {kind.decode()!r} belongs to a later protocol "
                            "version (streaming or two-phase); this decoder speaks version 1")
    else:
        raise PgOutputError(f"unknown pgoutput message type {kind!r}")
    r.done(type(msg).__name__)
    return msg


def lsn_text(lsn: int) -> str:
    """PostgreSQL's X/Y form of an LSN."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def parse_lsn(text: str) -> int:
    high, _, low = text.partition("/")
    try:
        return (int(high, 16) << 32) | int(low, 16)
    except ValueError:
        raise ValueError(f"not an LSN: {text!r}") from None
