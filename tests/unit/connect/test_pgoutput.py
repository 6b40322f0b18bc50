"""The pgoutput v1 decoder against messages built byte by byte from PostgreSQL's "Logical
Replication Message Formats", and fuzzed: any bytes decode or raise PgOutputError."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.connect.connectors import pgoutput as po


def s(text: str) -> bytes:
    return text.encode() + b"\0"


def tup(*values: str | object | None) -> bytes:
    out = struct.pack(">h", len(values))
    for v in values:
        if v is None:
            out += b"n"
        elif v is po.UNCHANGED:
            out += b"u"
        else:
            raw = str(v).encode()
            out += b"t" + struct.pack(">i", len(raw)) + raw
    return out


def begin(final_lsn: int, ts_pg_us: int, xid: int) -> bytes:
    return b"B" + struct.pack(">QqI", final_lsn, ts_pg_us, xid)


def commit(commit_lsn: int, end_lsn: int, ts_pg_us: int) -> bytes:
    return b"C" + struct.pack(">BQQq", 0, commit_lsn, end_lsn, ts_pg_us)


def relation(relid: int, ns: str, name: str, cols: list[tuple[str, int, int, bool]]) -> bytes:
    out = b"R" + struct.pack(">I", relid) + s(ns) + s(name) + b"d" + struct.pack(">h", len(cols))
    for col, oid, mod, key in cols:
        out += struct.pack(">B", 1 if key else 0) + s(col) + struct.pack(">Ii", oid, mod)
    return out


def insert(relid: int, *values: str | object | None) -> bytes:
    return b"I" + struct.pack(">I", relid) + b"N" + tup(*values)


def update(relid: int, new: tuple[str | object | None, ...],
           old: tuple[str | object | None, ...] | None = None, marker: bytes = b"K") -> bytes:
    head = b"U" + struct.pack(">I", relid)
    if old is not None:
        head += marker + tup(*old)
    return head + b"N" + tup(*new)


def delete(relid: int, *old: str | object | None, marker: bytes = b"K") -> bytes:
    return b"D" + struct.pack(">I", relid) + marker + tup(*old)


CUSTOMERS = [("id", 23, -1, True), ("name", 25, -1, False), ("balance", 1700, 655366, False)]
SAMPLES = [begin(0x16B3748, 10**15, 750), commit(0x16B3748, 0x16B3778, 10**15),
           relation(16385, "public", "customers", CUSTOMERS),
           insert(16385, "1", "ann", "2.50"), update(16385, ("1", "anne", None)),
           update(16385, ("2", "anne", po.UNCHANGED), ("1", None, None)),
           delete(16385, "1", None, None),
           b"T" + struct.pack(">iBII", 2, 1, 16385, 16390),
           b"O" + struct.pack(">Q", 5) + s("origin-a"),
           b"Y" + struct.pack(">I", 99999) + s("public") + s("mood"),
           b"M" + struct.pack(">BQ", 1, 77) + s("pfx") + struct.pack(">i", 3) + b"abc"]


def test_begin_commit_carry_lsns_xid_and_unix_microseconds() -> None:
    b = po.decode(begin(0x16B3748, 1_000_000, 750))
    assert b == po.Begin(0x16B3748, po.PG_EPOCH_US + 1_000_000, 750)
    assert po.PG_EPOCH_US == 946_684_800_000_000
    c = po.decode(commit(0x16B3748, 0x16B3778, 5))
    assert c == po.Commit(0, 0x16B3748, 0x16B3778, po.PG_EPOCH_US + 5)
    assert po.lsn_text(0x16B3778) == "0/16B3778"
    assert po.parse_lsn("1/A0") == (1 << 32) + 0xA0


def test_relation_and_changes() -> None:
    rel = po.decode(relation(16385, "public", "customers", CUSTOMERS))
    assert rel == po.Relation(16385, "public", "customers", "d", (
        po.Column("id", 23, -1, True), po.Column("name", 25, -1, False),
        po.Column("balance", 1700, 655366, False)))
    assert po.decode(insert(16385, "1", "ann", None)) == po.Insert(16385, ("1", "ann", None))
    plain = po.decode(update(16385, ("1", "anne", None)))
    assert plain == po.Update(16385, None, False, ("1", "anne", None))
    moved = po.decode(update(16385, ("2", "x", po.UNCHANGED), ("1", None, None)))
    assert isinstance(moved, po.Update) and moved.old == ("1", None, None) and moved.old_is_key
    assert moved.new[2] is po.UNCHANGED
    full = po.decode(update(16385, ("1", "b", None), ("1", "a", None), marker=b"O"))
    assert isinstance(full, po.Update) and not full.old_is_key
    assert po.decode(delete(16385, "1", None, None)) == po.Delete(16385, ("1", None, None), True)
    assert po.decode(SAMPLES[7]) == po.Truncate((16385, 16390), True, False)
    assert po.decode(SAMPLES[8]) == po.Origin(5, "origin-a")
    assert po.decode(SAMPLES[9]) == po.TypeInfo(99999, "public", "mood")
    assert po.decode(SAMPLES[10]) == po.LogicalMessage(True, 77, "pfx", b"abc")


@pytest.mark.parametrize(("data", "words"), [
    (b"", "empty message"),
    (b"Z\0", "unknown pgoutput message type"),
    (b"S" + b"\0" * 4, "later protocol version"),
    (b"B\0\0", "truncated reading final LSN"),
    (b"R" + struct.pack(">I", 1) + b"public", "unterminated string"),
    (b"I" + struct.pack(">I", 1) + b"X", "expected 'N'"),
    (b"I" + struct.pack(">I", 1) + b"N" + struct.pack(">h", 1) + b"b", "binary tuple"),
    (b"I" + struct.pack(">I", 1) + b"N" + struct.pack(">h", 1) + b"q", "unknown tuple value"),
    (b"I" + struct.pack(">I", 1) + b"N" + struct.pack(">h", -1), "negative tuple column"),
    (b"I" + struct.pack(">I", 1) + b"N" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 9)
     + b"ab", "truncated reading value of column 0"),
    (begin(1, 2, 3) + b"x", "trailing bytes"),
    (b"D" + struct.pack(">I", 1) + b"N", "unknown delete marker"),
    (b"U" + struct.pack(">I", 1) + b"Q", "unknown update marker"),
])
def test_malformed_messages_are_clear_errors(data: bytes, words: str) -> None:
    with pytest.raises(po.PgOutputError, match=words):
        po.decode(data)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200))
def test_fuzz_any_bytes_decode_or_raise_pgoutput_error(data: bytes) -> None:
    try:
        po.decode(data)
    except po.PgOutputError:
        pass


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(SAMPLES), st.data())
def test_fuzz_cut_and_flipped_messages(message: bytes, data: st.DataObject) -> None:
    cut = data.draw(st.integers(0, len(message)))
    flips = data.draw(st.lists(st.tuples(st.integers(0, max(0, len(message) - 1)),
                                         st.integers(0, 255)), max_size=3))
    mutated = bytearray(message[:cut] if data.draw(st.booleans()) else message)
    for at, byte in flips:
        if at < len(mutated):
            mutated[at] = byte
    try:
        po.decode(bytes(mutated))
    except po.PgOutputError:
        pass
