"""The one-unpack request header read agrees with the Reader's, on any bytes."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.errors import ProtocolError
from odradek.protocol.headers import _client_id_fast
from odradek.protocol.primitives import Reader


def _slow(frame: bytes, hv: int) -> tuple[str | None, int] | type[ProtocolError]:
    try:
        r = Reader(frame, 8)
        client_id = r.nullable_string()
        if hv >= 2:
            r.skip_tagged_fields()
        return client_id, r.pos
    except ProtocolError:
        return ProtocolError


def _agree(frame: bytes, hv: int) -> None:
    fast = _client_id_fast(frame, hv)
    slow = _slow(frame, hv)
    if fast is not None:
        # whenever the fast read answers, it is the Reader's answer
        assert fast == slow
    else:
        # declining is always allowed; the Reader then reads (or refuses) it
        assert slow is ProtocolError or isinstance(slow, tuple)


@settings(max_examples=400)
@given(st.binary(max_size=8).map(lambda b: b.ljust(8, b"\0")),
       st.one_of(st.none(), st.text(max_size=40)), st.sampled_from([1, 2]),
       st.binary(max_size=6))
def test_well_formed_headers_are_read_the_same(fixed: bytes, client_id: str | None, hv: int,
                                              tail: bytes) -> None:
    if client_id is None:
        cid = struct.pack(">h", -1)
    else:
        data = client_id.encode()
        cid = struct.pack(">h", len(data)) + data
    frame = fixed + cid + (b"\0" if hv >= 2 else b"") + tail
    _agree(frame, hv)
    fast = _client_id_fast(frame, hv)
    # the usual header is exactly what the fast read is for: it must not decline it
    assert fast == (client_id, len(frame) - len(tail))


@settings(max_examples=600)
@given(st.binary(max_size=64), st.sampled_from([1, 2]))
def test_any_bytes_are_read_the_same_or_left_to_the_reader(frame: bytes, hv: int) -> None:
    _agree(frame, hv)


def test_unusual_headers_go_the_long_way() -> None:
    bad_utf8 = b"\0" * 8 + struct.pack(">h", 2) + b"\xff\xfe"
    assert _client_id_fast(bad_utf8, 1) is None
    tagged = b"\0" * 8 + struct.pack(">h", 1) + b"a" + b"\x01\x00\x00"
    assert _client_id_fast(tagged, 2) is None
    short = b"\0" * 8 + struct.pack(">h", 5) + b"ab"
    assert _client_id_fast(short, 1) is None
