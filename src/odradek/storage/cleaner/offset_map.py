"""The cleaner's key -> latest offset map in a fixed block of memory (Kafka's SkimpyOffsetMap).

Open addressing over one bytearray of `log.cleaner.dedupe.buffer.size` bytes: each slot holds the
16-byte MD5 of a key and an 8-byte offset. Memory never grows with the number of keys; the map
reports itself full at `load_factor` of its slots, and the cleaner then cleans only up to the
offset it reached. As in Kafka, two keys with the same MD5 would be treated as one.
"""

from __future__ import annotations

import hashlib
import struct

HASH_SIZE = 16
ENTRY_SIZE = HASH_SIZE + 8
_OFFSET = struct.Struct(">q")
_EMPTY = bytes(HASH_SIZE)
_md5 = hashlib.md5
_unpack_offset = _OFFSET.unpack_from


class OffsetMap:
    def __init__(self, memory_bytes: int, load_factor: float = 0.9) -> None:
        self.slots = max(memory_bytes // ENTRY_SIZE, 2)
        self.max_entries = max(1, int(self.slots * load_factor))
        self._buf = bytearray(self.slots * ENTRY_SIZE)
        self.size = 0
        self.latest_offset = -1

    @property
    def memory_bytes(self) -> int:
        return len(self._buf)

    @property
    def is_full(self) -> bool:
        return self.size >= self.max_entries

    def clear(self) -> None:
        self._buf[:] = bytes(len(self._buf))
        self.size = 0
        self.latest_offset = -1

    @staticmethod
    def hash_key(key: bytes | memoryview) -> bytes:
        digest = _md5(key).digest()
        # an all-zero slot means empty: nudge the (astronomically unlikely) zero digest
        return digest if digest != _EMPTY else b"\x01" + digest[1:]

    def _slot_of(self, digest: bytes) -> int:
        """Byte position of the slot holding `digest`, or of the empty slot where it would go."""
        buf = self._buf
        slots = self.slots
        i = int.from_bytes(digest[:8], "big") % slots
        while True:
            pos = i * ENTRY_SIZE
            here = buf[pos : pos + HASH_SIZE]
            if here in (digest, _EMPTY):
                return pos
            i += 1
            if i == slots:
                i = 0

    def put(self, key: bytes | memoryview, offset: int) -> bool:
        """Record `offset` as the latest for `key`. False (nothing stored) when the key is new
        and the map is full."""
        digest = _md5(key).digest()
        if digest == _EMPTY:
            digest = b"\x01" + digest[1:]
        pos = self._slot_of(digest)
        buf = self._buf
        if buf[pos : pos + HASH_SIZE] == _EMPTY:
            if self.size >= self.max_entries:
                return False
            buf[pos : pos + HASH_SIZE] = digest
            self.size += 1
        _OFFSET.pack_into(buf, pos + HASH_SIZE, offset)
        if offset > self.latest_offset:
            self.latest_offset = offset
        return True

    def get(self, key: bytes | memoryview) -> int:
        """The latest offset recorded for `key`, -1 when it has none."""
        digest = _md5(key).digest()
        if digest == _EMPTY:
            digest = b"\x01" + digest[1:]
        pos = self._slot_of(digest)
        buf = self._buf
        if buf[pos : pos + HASH_SIZE] == _EMPTY:
            return -1
        return int(_unpack_offset(buf, pos + HASH_SIZE)[0])

    def __len__(self) -> int:
        return self.size
