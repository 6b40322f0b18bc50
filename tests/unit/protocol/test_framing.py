"""FrameDecoder: any split of the stream yields the same frames; sizes are checked first."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.errors import FrameTooLarge, ProtocolError
from odradek.protocol.fetch import FileRegion
from odradek.protocol.framing import FrameDecoder, frame


def _stream(payloads: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


@settings(max_examples=200, deadline=None)
@given(payloads=st.lists(st.binary(max_size=50), max_size=8), data=st.data())
def test_any_split_gives_the_same_frames(payloads: list[bytes], data: st.DataObject) -> None:
    stream = _stream(payloads)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    dec = FrameDecoder(100)
    got: list[bytes] = []
    prev = 0
    for c in [*cuts, len(stream)]:
        got += [bytes(f) for f in dec.feed(stream[prev:c])]
        prev = c
    assert got == payloads
    assert dec.buffered == 0


def test_byte_by_byte() -> None:
    payloads = [b"", b"a", b"hello world", b"\x00" * 7]
    stream = _stream(payloads)
    dec = FrameDecoder(1000)
    got = []
    for i in range(len(stream)):
        got += [bytes(f) for f in dec.feed(stream[i : i + 1])]
    assert got == payloads


def test_whole_frames_are_views_of_the_input() -> None:
    data = _stream([b"abc", b"defg"])
    frames = FrameDecoder(10).feed(data)
    assert all(f.obj is data for f in frames)


@pytest.mark.parametrize("size", [-1, -(2**31), 101, 2**31 - 1])
def test_bad_sizes_raise_before_buffering(size: int) -> None:
    dec = FrameDecoder(100)
    with pytest.raises(FrameTooLarge) as err:
        dec.feed(struct.pack(">i", size) + b"xx")
    assert err.value.size == size
    assert isinstance(err.value, ProtocolError)
    # split size prefix too
    dec = FrameDecoder(100)
    dec.feed(struct.pack(">i", size)[:2])
    with pytest.raises(FrameTooLarge):
        dec.feed(struct.pack(">i", size)[2:])


def test_large_declared_size_buffers_only_what_arrived() -> None:
    dec = FrameDecoder(10_000_000)
    assert dec.feed(struct.pack(">i", 9_000_000) + b"abc") == []
    assert dec.buffered == 3


def test_frame_prepends_total_size() -> None:
    parts = frame([b"ab", memoryview(b"cde"), FileRegion(3, 0, 10)])
    assert parts[0] == struct.pack(">i", 15)
    assert len(parts) == 4


@settings(max_examples=200, deadline=None)
@given(chunks=st.lists(st.binary(max_size=40), max_size=6))
def test_fuzz_random_stream(chunks: list[bytes]) -> None:
    dec = FrameDecoder(64)
    try:
        for c in chunks:
            for f in dec.feed(c):
                assert len(f) <= 64
    except FrameTooLarge:
        pass
    assert dec.buffered <= 64 + 4
