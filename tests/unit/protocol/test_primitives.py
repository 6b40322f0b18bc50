"""Reader/Writer round trips and bounds checks."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.errors import ProtocolError
from odradek.protocol.primitives import (
    Reader,
    Writer,
    decode_uvarint,
    encode_uvarint,
    encode_varint,
    zigzag_decode,
    zigzag_encode,
)

_text = st.text(max_size=40)
_blob = st.binary(max_size=40)

# (writer method, reader method, strategy)
CASES = [
    ("int8", "int8", st.integers(-(2**7), 2**7 - 1)),
    ("int16", "int16", st.integers(-(2**15), 2**15 - 1)),
    ("uint16", "uint16", st.integers(0, 2**16 - 1)),
    ("int32", "int32", st.integers(-(2**31), 2**31 - 1)),
    ("uint32", "uint32", st.integers(0, 2**32 - 1)),
    ("int64", "int64", st.integers(-(2**63), 2**63 - 1)),
    ("float64", "float64", st.floats(allow_nan=False)),
    ("boolean", "boolean", st.booleans()),
    ("uuid", "uuid", st.uuids()),
    ("uvarint", "uvarint", st.integers(0, 2**32 - 1)),
    ("varint", "varint", st.integers(-(2**31), 2**31 - 1)),
    ("varlong", "varlong", st.integers(-(2**63), 2**63 - 1)),
    ("uvarlong", "uvarlong", st.integers(0, 2**64 - 1)),
    ("string", "string", _text),
    ("nullable_string", "nullable_string", st.one_of(st.none(), _text)),
    ("compact_string", "compact_string", _text),
    ("compact_nullable_string", "compact_nullable_string", st.one_of(st.none(), _text)),
    ("bytes_", "bytes_", _blob),
    ("nullable_bytes", "nullable_bytes", st.one_of(st.none(), _blob)),
    ("compact_bytes", "compact_bytes", _blob),
    ("compact_nullable_bytes", "compact_nullable_bytes", st.one_of(st.none(), _blob)),
]


@pytest.mark.parametrize(("wname", "rname", "strategy"), CASES, ids=[c[0] for c in CASES])
def test_round_trip(wname: str, rname: str, strategy: st.SearchStrategy) -> None:
    @settings(max_examples=25, deadline=None)
    @given(values=st.lists(strategy, max_size=5))
    def check(values: list) -> None:
        w = Writer()
        for v in values:
            getattr(w, "write_" + wname)(v)
        data = w.getvalue()
        r = Reader(data)
        got = [getattr(r, rname)() for _ in values]
        got = [bytes(g) if isinstance(g, memoryview) else g for g in got]
        assert got == values
        assert r.remaining() == 0
        # every strict prefix fails cleanly
        for cut in range(len(data)):
            r = Reader(data[:cut])
            with pytest.raises(ProtocolError):
                for _ in values:
                    getattr(r, rname)()

    check()


def test_arrays_and_tagged_fields() -> None:
    w = Writer()
    w.write_array_len(3)
    w.write_array_len(None)
    w.write_compact_array_len(2)
    w.write_compact_array_len(None)
    w.write_tagged_fields({5: b"abc", 1: b""})
    w.write_tagged_fields()
    data = w.getvalue() + b"\x00" * 5
    r = Reader(data)
    assert r.array_len() == 3
    assert r.array_len() is None
    assert r.compact_array_len() == 2
    assert r.compact_array_len() is None
    assert {k: bytes(v) for k, v in r.tagged_fields().items()} == {1: b"", 5: b"abc"}
    r.skip_tagged_fields()


def test_counts_and_lengths_beyond_the_buffer_are_refused() -> None:
    with pytest.raises(ProtocolError, match="array count"):
        Reader(b"\x7f\xff\xff\xff").array_len()
    with pytest.raises(ProtocolError, match="array count"):
        Reader(encode_uvarint(2**32 - 1)).compact_array_len()
    with pytest.raises(ProtocolError):
        Reader(b"\x7f\xff\xff\xffabc").bytes_()
    with pytest.raises(ProtocolError):
        Reader(b"\x7f\xffabc").string()
    with pytest.raises(ProtocolError):
        Reader(b"\xff\xff").string()  # null in non-nullable
    with pytest.raises(ProtocolError):
        Reader(b"\x00").compact_string()
    with pytest.raises(ProtocolError, match="out of order"):
        Reader(b"\x02\x05\x00\x01\x00").tagged_fields()
    with pytest.raises(ProtocolError):
        Reader(b"\x01\x00\x7f").tagged_fields()  # size beyond buffer
    with pytest.raises(ProtocolError):
        Reader(b"\x80\x80\x80\x80\x80\x01").uvarint()  # too long
    with pytest.raises(ProtocolError):
        Reader(b"\xff\xff\xff\xff\x7f").uvarint()  # > 32 bits
    with pytest.raises(ProtocolError):
        Reader(b"\x02\xff\xfe").compact_string()  # invalid utf-8
    with pytest.raises(ProtocolError):
        Reader(b"", 5)


def test_varint_helpers() -> None:
    for n in (0, -1, 1, 63, -64, 64, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)):
        assert zigzag_decode(zigzag_encode(n)) == n
        assert zigzag_decode(decode_uvarint(encode_varint(n), 0)[0]) == n
    assert encode_varint(-1) == b"\x01"
    assert encode_uvarint(300) == b"\xac\x02"


def test_views_are_zero_copy() -> None:
    data = bytearray(b"\x00\x00\x00\x03abc")
    view = Reader(data).bytes_()
    data[4] = ord("X")
    assert bytes(view) == b"Xbc"


def test_uuid_reader() -> None:
    u = uuid.uuid4()
    assert Reader(u.bytes).uuid() == u


@settings(max_examples=300, deadline=None)
@given(junk=st.binary(max_size=64), method=st.sampled_from([c[1] for c in CASES] + [
    "array_len", "compact_array_len", "tagged_fields", "skip_tagged_fields"]))
def test_fuzz_reader(junk: bytes, method: str) -> None:
    r = Reader(junk)
    try:
        while r.remaining():
            getattr(r, method)()
    except ProtocolError:
        pass
