"""Kafka's framing: a 4-byte big-endian size, then the payload.

The decoder checks every declared size against the configured maximum before
it keeps a single byte for that frame, and never preallocates from a size:
a peer that declares 100 MB and sends 10 bytes costs us 10 bytes.
"""

from __future__ import annotations

import struct
from typing import Protocol

from odradek.protocol.errors import FrameTooLarge

__all__ = ["FrameDecoder", "frame"]

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
