"""Array helpers the metadata records need on top of the protocol primitives."""

from __future__ import annotations

import struct
import uuid

from odradek.protocol import primitives
from odradek.protocol.errors import ProtocolError


class Reader(primitives.Reader):
    def compact_int32_array(self, nullable: bool = False) -> list[int] | None:
        n = self.compact_array_len()
        if n is None:
            if not nullable:
                raise ProtocolError("null where an array is required")
            return None
        return list(struct.unpack(f">{n}i", self.raw(4 * n)))

    def compact_uuid_array(self) -> list[uuid.UUID]:
        n = self.compact_array_len()
        if n is None:
            raise ProtocolError("null where an array is required")
        return [self.uuid() for _ in range(n)]


class Writer(primitives.Writer):
    def write_compact_int32_array(self, v: list[int] | None) -> None:
        if v is None:
            self.write_compact_array_len(None)
            return
        self.write_compact_array_len(len(v))
        self.write_raw(struct.pack(f">{len(v)}i", *v))

    def write_compact_uuid_array(self, v: list[uuid.UUID]) -> None:
        self.write_compact_array_len(len(v))
        for item in v:
            self.write_uuid(item)
