"""FrameReceiver: whatever sizes the socket fills, the same frames come out; lengths are
checked before anything is kept, and a lying length buys no memory by itself."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.errors import FrameTooLarge
from odradek.protocol.framing import FrameReceiver


def _stream(payloads: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


def _receive(rx: FrameReceiver, stream: bytes, reads: list[int]) -> list[bytes]:
    """Feed `stream` as a socket would: each read fills up to the next size in `reads`
    (cycled) of the buffer it is handed."""
    # frames are kept as handed out and read only at the end: a buffer handed out as a frame
    # must never be written again
    got: list[memoryview] = []
    pos = 0
    i = 0
    while pos < len(stream):
        buf = rx.get_buffer()
        assert len(buf) > 0
        n = min(len(buf), reads[i % len(reads)], len(stream) - pos)
        i += 1
        buf[:n] = stream[pos : pos + n]
        pos += n
        del buf
        got += rx.buffer_updated(n)
    return [bytes(f) for f in got]


payload = st.one_of(st.binary(max_size=300),
                    st.integers(0, 600_000).map(lambda n: bytes(range(256)) * (n // 256)))


@settings(max_examples=150, deadline=None)
@given(payloads=st.lists(payload, max_size=8),
       reads=st.lists(st.integers(1, 400_000), min_size=1, max_size=6))
def test_any_read_sizes_give_the_same_frames(payloads: list[bytes], reads: list[int]) -> None:
    rx = FrameReceiver(1 << 20)
    assert _receive(rx, _stream(payloads), reads) == payloads
    assert rx.buffered == 0


def test_byte_by_byte_across_the_small_buffer_edge() -> None:
    # frames that straddle the end of the small buffer, small and large
    S = FrameReceiver.SMALL_BYTES
    payloads = [b"x" * (S - 1000), b"y" * 600, b"z" * (S + 5000), b"", b"w" * (S - 5)]
    rx = FrameReceiver(1 << 20)
    assert _receive(rx, _stream(payloads), [1, 7, 4096, 3]) == payloads


def test_a_large_frame_is_received_into_its_own_buffer() -> None:
    body = bytes(range(256)) * 4000  # 1,024,000 bytes
    rx = FrameReceiver(2 << 20)
    stream = _stream([body])
    first = rx.get_buffer()
    first[:1000] = stream[:1000]
    del first
    assert rx.buffer_updated(1000) == []
    got = 1000
    frames: list[memoryview] = []
    while got < len(stream):
        rest = rx.get_buffer()
        # never more than the rest of the frame; the buffer grows with what arrived
        assert 0 < len(rest) <= len(stream) - got
        n = len(rest)
        rest[:] = stream[got:got + n]
        del rest
        assert frames == []
        frames = rx.buffer_updated(n)
        got += n
        assert rx.allocated <= FrameReceiver.MIN_SMALL_BYTES + max(16 * 1024, 2 * got)
    (frame,) = frames
    assert frame == body


@pytest.mark.parametrize("size", [-1, -(2**31), 1001, 2**31 - 1])
def test_sizes_are_checked_before_anything_is_kept(size: int) -> None:
    rx = FrameReceiver(1000)
    buf = rx.get_buffer()
    buf[:8] = struct.pack(">i", size) + b"abcd"
    del buf
    with pytest.raises(FrameTooLarge):
        rx.buffer_updated(8)


def test_a_lying_length_buys_no_memory() -> None:
    # declares 100 MB, sends 10 bytes: the first read's buffer and a 16 KiB frame buffer
    rx = FrameReceiver(200 * 1024 * 1024)
    buf = rx.get_buffer()
    buf[:14] = struct.pack(">i", 100 * 1024 * 1024) + b"0123456789"
    del buf
    assert rx.buffer_updated(14) == []
    assert rx.buffered == 14
    assert rx.allocated <= FrameReceiver.MIN_SMALL_BYTES + 16 * 1024
    # and grows only as fast as bytes arrive
    buf = rx.get_buffer()
    n = len(buf)
    buf[:] = b"\x00" * n
    del buf
    rx.buffer_updated(n)
    assert rx.allocated <= FrameReceiver.SMALL_BYTES + 2 * rx.buffered
