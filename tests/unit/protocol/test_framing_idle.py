"""FrameReceiver's memory between requests: the small buffer grows only as reads fill it, and
`release()` (a connection gone quiet) gives every empty buffer back, whatever came before."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.framing import FrameReceiver

IDLE_MAX = 32 * 1024  # issue 22: an idle connection costs at most 32 KB


def _stream(payloads: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


def _receive(rx: FrameReceiver, stream: bytes, reads: list[int]) -> list[bytes]:
    got: list[bytes] = []
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
        got += [bytes(f) for f in rx.buffer_updated(n)]  # views dropped: buffers reusable
    return got


payload = st.one_of(st.binary(max_size=300),
                    st.integers(0, 1_500_000).map(lambda n: bytes(range(256)) * (n // 256)))


@settings(max_examples=120, deadline=None)
@given(rounds=st.lists(st.lists(payload, max_size=5), min_size=1, max_size=4),
       reads=st.lists(st.integers(1, 600_000), min_size=1, max_size=6),
       release_between=st.booleans())
def test_frames_parse_the_same_and_release_returns_to_idle(
        rounds: list[list[bytes]], reads: list[int], release_between: bool) -> None:
    rx = FrameReceiver(2 << 20)
    for payloads in rounds:
        assert _receive(rx, _stream(payloads), reads) == payloads
        assert rx.buffered == 0
        if release_between:
            rx.release()
            assert rx.allocated <= IDLE_MAX
    rx.release()
    assert rx.allocated <= IDLE_MAX


def test_a_new_receiver_holds_no_buffer() -> None:
    assert FrameReceiver(1 << 20).allocated == 0


def test_small_requests_keep_the_smallest_buffer() -> None:
    # a client that sends a few hundred bytes at a time never grows the buffer
    rx = FrameReceiver(1 << 20)
    payloads = [bytes([i % 256]) * 200 for i in range(500)]
    assert _receive(rx, _stream(payloads), [204]) == payloads
    assert rx.allocated == FrameReceiver.MIN_SMALL_BYTES


def test_full_reads_grow_the_buffer_up_to_its_maximum() -> None:
    # a busy peer: every read fills the buffer, so reads get bigger (fewer passes per MB)
    rx = FrameReceiver(1 << 20)
    payloads = [bytes([i % 256]) * 1000 for i in range(2000)]
    stream = _stream(payloads)
    sizes = []
    pos = 0
    got: list[bytes] = []
    while pos < len(stream):
        buf = rx.get_buffer()
        n = min(len(buf), len(stream) - pos)
        sizes.append(len(buf))
        buf[:n] = stream[pos : pos + n]
        pos += n
        del buf
        got += [bytes(f) for f in rx.buffer_updated(n)]
    assert got == payloads
    assert max(sizes) <= FrameReceiver.SMALL_BYTES
    assert len(rx._small) == FrameReceiver.SMALL_BYTES
    rx.release()
    assert rx.allocated == 0


def test_release_keeps_a_partly_received_frame() -> None:
    rx = FrameReceiver(1 << 20)
    stream = _stream([b"a" * 100_000, b"b" * 10])
    buf = rx.get_buffer()
    buf[:5000] = stream[:5000]
    del buf
    assert rx.buffer_updated(5000) == []
    assert rx.release() == 0  # a frame is under way: nothing is let go
    assert _receive(rx, stream[5000:], [70_000]) == [b"a" * 100_000, b"b" * 10]
    assert rx.release() > 0
    assert rx.allocated == 0
