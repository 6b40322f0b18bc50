"""Kafka's framing: a 4-byte big-endian size, then the payload.

The decoder checks every declared size against the configured maximum before
it keeps a single byte for that frame, and never preallocates from a size:
a peer that declares 100 MB and sends 10 bytes costs us 10 bytes.
"""

from __future__ import annotations

import struct
import sys
from typing import Protocol

from odradek.protocol.errors import FrameTooLarge

__all__ = ["FrameDecoder", "FrameReceiver", "frame"]

_SIZE = struct.Struct(">i")


class _Sized(Protocol):
    size: int


class FrameDecoder:
    """Cuts a byte stream into frames (payloads without the size prefix).

    Frames that arrive whole inside one `feed` are memoryviews into that data
    (zero copy): pass immutable `bytes` (as asyncio's data_received does), or
    copy a reused buffer first.
    """

    __slots__ = ("_need", "_pending", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._pending = bytearray()
        # Size of the frame being assembled in _pending; -1 while _pending holds
        # (part of) a size prefix.
        self._need = -1

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame."""
        return len(self._pending)

    def _check(self, size: int) -> int:
        if size < 0 or size > self.max_frame_bytes:
            raise FrameTooLarge(size, self.max_frame_bytes)
        return size

    def feed(self, data: bytes | bytearray | memoryview) -> list[memoryview]:
        frames: list[memoryview] = []
        view = memoryview(data)
        if view.ndim != 1 or view.itemsize != 1:
            view = view.cast("B")
        n = len(view)
        pos = 0
        if self._need >= 0 or self._pending:
            if self._need < 0:
                take = min(4 - len(self._pending), n)
                self._pending += view[:take]
                pos = take
                if len(self._pending) < 4:
                    return frames
                self._need = self._check(_SIZE.unpack_from(self._pending, 0)[0])
                self._pending = bytearray()
            take = min(self._need - len(self._pending), n - pos)
            self._pending += view[pos : pos + take]
            pos += take
            if len(self._pending) < self._need:
                return frames
            frames.append(memoryview(self._pending))
            # A fresh bytearray: the view just handed out keeps the old one alive.
            self._pending = bytearray()
            self._need = -1
        while n - pos >= 4:
            size = self._check(_SIZE.unpack_from(view, pos)[0])
            start = pos + 4
            if n - start < size:
                self._need = size
                self._pending = bytearray(view[start:])
                return frames
            frames.append(view[start : start + size])
            pos = start + size
        if pos < n:
            self._pending = bytearray(view[pos:])
        return frames


def frame(payload_parts: list[bytes | memoryview | _Sized]) -> list[bytes | memoryview | _Sized]:
    """Prefix the parts with their total size. Parts with a `size` (FileRegion) count by it."""
    total = 0
    for part in payload_parts:
        total += len(part) if isinstance(part, bytes | bytearray | memoryview) else part.size
    return [_SIZE.pack(total), *payload_parts]


class FrameReceiver:
    """Frames for a reader that receives into buffers it is handed (asyncio.BufferedProtocol).

    Between frames the socket is read into a "small" buffer. It starts at MIN_SMALL_BYTES and
    doubles, up to SMALL_BYTES (asyncio's own read size: one read serves many small frames in
    one loop pass), each time a read fills it: a busy connection soon reads 256 KiB at a time,
    one that sends a Metadata request now and then never needs more than 16 KiB. `release()`
    (the server calls it for connections that have been quiet for a few seconds) drops every
    buffer that holds nothing, so an idle connection holds no receive buffer at all: 1,000
    idle connections used to hold 256 KiB each. A frame that arrives whole in the small
    buffer is handed out as a view of it when it is large (no copy; the buffer is then never
    written below that point again while any view of it lives) and copied out when small (so
    a few small requests never pin a whole buffer). A frame that does not fit gets a buffer of
    its own, and the socket is read straight into the rest of it. That buffer is sized from
    what has arrived, not from the declared length: twice the bytes received (at least
    INITIAL_FRAME_BYTES, at most the checked length), doubling as the reads fill it. A peer
    that declares 100 MB and sends 10 bytes costs INITIAL_FRAME_BYTES (16 KiB); one that sends
    n bytes of it, at most about 2n. The copies this growth makes happen for the first large
    frame of a connection only: the next ones are received into its buffer (below).

    After a large frame, the next read goes straight into that frame's buffer (its first
    SMALL_BYTES): when it starts another large frame (a producer sending big requests back to
    back), the frame is received in place, 4 bytes in, and nothing is copied; otherwise what
    was read is moved to the small buffer and cut as usual.

    Buffers are reused once no view of them is alive (CPython's reference count tells: every
    memoryview of a bytearray holds one reference to it through its buffer manager). A fresh
    multi-megabyte bytearray per request costs more than the request's own work: the kernel
    maps, faults in and zeroes its pages, and frees them again (most of the node's system
    time on big produce requests).

        buf = receiver.get_buffer()      # fill some prefix of it
        frames = receiver.buffer_updated(n)
    """

    SMALL_BYTES = 256 * 1024
    MIN_SMALL_BYTES = 16 * 1024
    COPY_BELOW = 16 * 1024
    INITIAL_FRAME_BYTES = 16 * 1024
    # a large frame's buffer is kept for the next one up to this size (more would pin too much
    # memory per connection for a rare request)
    SPARE_MAX_BYTES = 64 * 1024 * 1024

    __slots__ = ("_end", "_frame", "_got", "_into_spare", "_need", "_offered", "_shared",
                 "_small", "_spare", "_start", "_want", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._small = bytearray()  # allocated at the first read (an idle peer costs nothing)
        self._want = self.MIN_SMALL_BYTES  # the size _small has at the next read
        self._offered = 0  # length of the last buffer get_buffer handed out
        self._start = 0  # unparsed bytes of _small are [_start, _end)
        self._end = 0
        self._shared = False  # views of _small were handed out: never rewind it while they live
        self._frame: bytearray | None = None  # a large frame being received, size prefixed
        self._need = 0  # its declared size
        self._got = 0  # bytes of it received
        self._spare: bytearray | None = None  # the last large frame's buffer, for reuse
        self._into_spare = False  # the last get_buffer handed out the spare buffer

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete frame (its size prefix included)."""
        if self._frame is not None:
            return 4 + self._got
        return self._end - self._start

    @property
    def allocated(self) -> int:
        """Bytes held in buffers: what a peer can make us allocate."""
        return (len(self._small) + (len(self._frame) if self._frame is not None else 0)
                + (len(self._spare) if self._spare is not None else 0))

    def get_buffer(self) -> memoryview:
        frame = self._frame
        if frame is not None:
            held = 4 + self._got  # a large frame's buffer holds its size prefix too
            if held == len(frame):
                # grow geometrically: a liar's declared size never buys memory by itself
                grown = bytearray(min(4 + self._need, 2 * held))
                grown[:held] = frame
                self._frame = frame = grown
            return memoryview(frame)[held : 4 + self._need]
        spare = self._spare
        want = self._want
        if (self._end == 0 and spare is not None and len(spare) > want
                and sys.getrefcount(spare) <= 3):
            # references: the attribute, the local name, getrefcount's argument
            self._into_spare = True
            self._offered = want
            return memoryview(spare)[:want]
        if self._shared and sys.getrefcount(self._small) <= 2:
            # the attribute and getrefcount's argument: every view handed out is gone
            self._shared = False
            if self._start == self._end:
                self._start = self._end = 0
        if len(self._small) < want:
            # first read, or reads filled it: a bigger buffer, with the start of a frame
            # (if any) moved to its front; views handed out keep the old one alive
            left = self._end - self._start
            grown = bytearray(want)
            grown[:left] = memoryview(self._small)[self._start : self._end]
            self._small, self._shared = grown, False
            self._start, self._end = 0, left
        elif self._end == len(self._small):
            # full: the start of a frame (shorter than _small) is left; move it to the front
            # of this buffer, or of a fresh one when frames handed out still use this one
            left = self._end - self._start
            tail = self._small[self._start : self._end]
            if self._shared:
                self._small = bytearray(len(self._small))
                self._shared = False
            self._small[:left] = tail
            self._start, self._end = 0, left
        view = memoryview(self._small)[self._end:]
        self._offered = len(view)
        return view

    def buffer_updated(self, n: int) -> list[memoryview]:
        frame = self._frame
        if frame is not None:
            self._got += n
            if self._got < self._need:
                return []
            done = memoryview(frame)[4 : 4 + self._need]
            self._frame = None
            self._got = self._need = 0
            self._spare = frame if len(frame) <= self.SPARE_MAX_BYTES else None
            return [done]
        if n == self._offered and self._want < self.SMALL_BYTES:
            self._want *= 2  # the read filled what it was given: more is likely waiting
        if self._into_spare:
            self._into_spare = False
            if self._received_in_spare(n):
                return []
            # not the start of a large frame: what was read goes to the (empty) small buffer
            if len(self._small) < self._want:  # _want >= n: it was >= what was offered
                self._small = bytearray(self._want)
            self._small[:n] = memoryview(self._spare)[:n]  # type: ignore[index]
        self._end += n
        frames: list[memoryview] = []
        self._cut(frames)
        return frames

    def _received_in_spare(self, n: int) -> bool:
        """The read into the spare buffer starts a large frame that fits it: keep receiving
        it there (its size prefix stays in front, as in every large frame's buffer). Sizes are
        checked as `_cut` checks them."""
        spare = self._spare
        assert spare is not None
        if n < 4:
            return False
        size = _SIZE.unpack_from(spare, 0)[0]
        if size < 0 or size > self.max_frame_bytes:
            raise FrameTooLarge(size, self.max_frame_bytes)
        # a frame the small buffer (as buffer_updated sizes it) holds goes there
        if size <= max(len(self._small), self._want) - 4 or size + 4 > len(spare) or n - 4 >= size:
            return False
        self._spare = None
        self._frame, self._need, self._got = spare, size, n - 4
        return True

    def release(self) -> int:
        """Drop the buffers that hold nothing (the connection has gone quiet): the small buffer
        and the spare one. The next read starts again from MIN_SMALL_BYTES. A partly received
        frame keeps what it has. Returns the bytes let go."""
        if self._frame is not None or self._start != self._end or self._into_spare:
            return 0
        freed = len(self._small) + (len(self._spare) if self._spare is not None else 0)
        self._small = bytearray()
        self._spare = None
        self._start = self._end = 0
        self._shared = False
        self._want = self.MIN_SMALL_BYTES
        return freed

    def _large_frame_buffer(self, size: int, got: int) -> bytearray:
        """A buffer for `size` bytes (a frame and its size prefix) of which `got` have arrived:
        the spare one when no view of it is alive, else a new one of
        min(size, max(INITIAL_FRAME_BYTES, 2 * got)): what arrived buys the memory, never the
        declared size (get_buffer doubles it as reads fill it)."""
        spare = self._spare
        self._spare = None
        want = min(size, max(self.INITIAL_FRAME_BYTES, 2 * got))
        # references: the local name and getrefcount's argument; a live view adds one
        if spare is not None and len(spare) >= want and sys.getrefcount(spare) <= 2:
            return spare
        return bytearray(want)

    def _cut(self, frames: list[memoryview]) -> None:
        small = self._small
        pos, end = self._start, self._end
        while end - pos >= 4:
            size = _SIZE.unpack_from(small, pos)[0]
            if size < 0 or size > self.max_frame_bytes:
                raise FrameTooLarge(size, self.max_frame_bytes)
            start = pos + 4
            if end - start >= size:
                if size < self.COPY_BELOW:
                    frames.append(memoryview(bytes(small[start : start + size])))
                else:
                    frames.append(memoryview(small)[start : start + size])
                    self._shared = True
                pos = start + size
                continue
            if size > len(small) - 4:
                # too large for _small: give the frame its own buffer and read into it
                got = end - start
                frame = self._large_frame_buffer(size + 4, got + 4)
                frame[: got + 4] = memoryview(small)[pos:end]
                self._frame, self._need, self._got = frame, size, got
                pos = end
            break
        if pos == end and not self._shared:
            pos = end = 0  # nothing of this buffer is in use: start it over
        self._start, self._end = pos, end
