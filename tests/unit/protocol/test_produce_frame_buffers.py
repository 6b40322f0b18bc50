"""FrameReceiver's buffer reuse (big produce requests): a buffer comes back only when no view of
it is alive, so a frame a handler still holds is never overwritten by a later one."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.errors import FrameTooLarge
from odradek.protocol.framing import FrameReceiver

SMALL = FrameReceiver.SMALL_BYTES


def _stream(payloads: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


def _feed(rx: FrameReceiver, data: bytes, read: int) -> list[memoryview]:
    out: list[memoryview] = []
    pos = 0
    while pos < len(data):
        buf = rx.get_buffer()
        n = min(len(buf), read, len(data) - pos)
        buf[:n] = data[pos : pos + n]
        pos += n
        del buf
        out += rx.buffer_updated(n)
    return out


def _body(n: int, tag: int) -> bytes:
    return bytes([tag]) * n


def test_a_large_frame_buffer_is_reused_once_its_views_are_gone() -> None:
    rx = FrameReceiver(64 << 20)
    (first,) = _feed(rx, _stream([_body(3 << 20, 1)]), 1 << 20)
    assert first == _body(3 << 20, 1)
    held = id(first.obj)  # not the object: a reference of ours would pin it
    del first
    allocated = rx.allocated
    (second,) = _feed(rx, _stream([_body(3 << 20, 2)]), 1 << 20)
    assert id(second.obj) == held  # no new buffer, no page faults
    assert second == _body(3 << 20, 2)
    assert rx.allocated == allocated


def test_a_held_large_frame_is_never_overwritten() -> None:
    rx = FrameReceiver(64 << 20)
    (first,) = _feed(rx, _stream([_body(2 << 20, 1)]), 1 << 20)
    (second,) = _feed(rx, _stream([_body(2 << 20, 2)]), 1 << 20)
    assert second.obj is not first.obj
    assert first == _body(2 << 20, 1)
    assert second == _body(2 << 20, 2)


def test_a_smaller_frame_fits_in_the_spare_buffer() -> None:
    rx = FrameReceiver(64 << 20)
    (big,) = _feed(rx, _stream([_body(4 << 20, 1)]), 1 << 20)
    del big
    (small,) = _feed(rx, _stream([_body(SMALL + 10, 2)]), 1 << 20)
    assert len(small) == SMALL + 10
    assert small == _body(SMALL + 10, 2)


def test_the_small_buffer_is_reused_once_its_views_are_gone() -> None:
    rx = FrameReceiver(64 << 20)
    size = 60 * 1024  # handed out as views of the small buffer (no copy)
    for tag in range(6):  # the small buffer grows from MIN_SMALL_BYTES as reads fill it
        (frame,) = _feed(rx, _stream([_body(size, tag)]), size + 4)
        del frame
    small = id(rx._small)
    for tag in range(20):  # several times the small buffer's size
        (frame,) = _feed(rx, _stream([_body(size, tag)]), size + 4)
        assert frame == _body(size, tag)
        del frame
    assert id(rx._small) == small


payload = st.one_of(st.binary(max_size=300),
                    st.integers(0, 3 << 20).map(lambda n: bytes(range(256)) * (n // 256)))


@settings(max_examples=60, deadline=None)
@given(payloads=st.lists(payload, max_size=8),
       keep=st.lists(st.booleans(), min_size=8, max_size=8),
       read=st.integers(1, 2 << 20))
def test_frames_kept_or_dropped_at_random_stay_intact(
        payloads: list[bytes], keep: list[bool], read: int) -> None:
    # a handler keeps some frames (async work, a held view) and drops others: what it kept
    # still reads as received, whatever the receiver reused meanwhile
    rx = FrameReceiver(8 << 20)
    kept: list[tuple[memoryview, bytes]] = []
    for i, p in enumerate(payloads):
        # at most ~2,000 reads a frame: a 3 MB frame read a byte at a time took minutes and
        # tests nothing a 1.5 KB read of it does not
        frames = _feed(rx, _stream([p]), max(read, len(p) // 2000))
        assert [bytes(f) for f in frames] == [p]
        if keep[i]:
            kept.append((frames[0], p))
        del frames
        for view, expected in kept:
            assert view == expected
    assert rx.buffered == 0


def test_back_to_back_large_frames_are_received_in_place() -> None:
    # after a large frame, the next read lands in its buffer: a large frame starting there is
    # received where it is (4 bytes in), a run of small ones is moved to the small buffer
    rx = FrameReceiver(64 << 20)
    (first,) = _feed(rx, _stream([_body(2 << 20, 1)]), 1 << 20)
    held = id(first.obj)
    del first
    (second,) = _feed(rx, _stream([_body(2 << 20, 2)]), 1 << 20)
    assert id(second.obj) == held
    assert second == _body(2 << 20, 2)
    del second
    smalls = [_body(10, 3), _body(SMALL // 2, 4), b"", _body(5, 5)]
    assert [bytes(f) for f in _feed(rx, _stream(smalls), 1 << 20)] == smalls
    assert rx.buffered == 0


def test_a_lying_length_after_a_large_frame_is_still_refused() -> None:
    rx = FrameReceiver(4 << 20)
    (first,) = _feed(rx, _stream([_body(2 << 20, 1)]), 1 << 20)
    del first
    buf = rx.get_buffer()
    buf[:8] = struct.pack(">i", 5 << 20) + b"abcd"
    del buf
    with pytest.raises(FrameTooLarge):
        rx.buffer_updated(8)
