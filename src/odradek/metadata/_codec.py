"""Small reader/writer for the flexible encoding of metadata records.

Kept local to metadata so the record codec does not wait on protocol's primitives; the
encoding is Kafka's: unsigned varints, compact strings/arrays (length + 1), tagged fields.
Every length is checked against the bytes left before anything is allocated.
"""

from __future__ import annotations

import struct
import uuid

from odradek.protocol.errors import ProtocolError

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes | memoryview, pos: int = 0) -> None:
        self.buf = memoryview(buf)
        self.pos = pos

    def remaining(self) -> int:
        return len(self.buf) - self.pos

    def _take(self, n: int) -> memoryview:
        if n < 0 or n > len(self.buf) - self.pos:
            raise ProtocolError(f"need {n} bytes at {self.pos}, {self.remaining()} left")
        view = self.buf[self.pos : self.pos + n]
        self.pos += n
        return view

    def _fixed(self, st: struct.Struct) -> int:
        return st.unpack(self._take(st.size))[0]

    def int8(self) -> int:
        return self._fixed(_I8)

    def int16(self) -> int:
        return self._fixed(_I16)

    def uint16(self) -> int:
        return self._fixed(_U16)

    def int32(self) -> int:
        return self._fixed(_I32)

    def int64(self) -> int:
        return self._fixed(_I64)

    def boolean(self) -> bool:
        value = self._take(1)[0]
        if value > 1:
            raise ProtocolError(f"bad boolean {value}")
        return value == 1

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=bytes(self._take(16)))

    def uvarint(self) -> int:
        result = 0
        for shift in range(0, 35, 7):
            if self.pos >= len(self.buf):
                raise ProtocolError("truncated varint")
            byte = self.buf[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                if result > 0xFFFFFFFF:
                    raise ProtocolError("varint too large")
                return result
        raise ProtocolError("varint longer than 5 bytes")

    def compact_nullable_string(self) -> str | None:
        n = self.uvarint()
        if n == 0:
            return None
        try:
            return str(self._take(n - 1), "utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"bad utf-8 string: {exc}") from None

    def compact_string(self) -> str:
        value = self.compact_nullable_string()
        if value is None:
            raise ProtocolError("null where a string is required")
        return value

    def compact_array_len(self) -> int | None:
        """Element count or None for a null array; never more than the bytes left."""
        n = self.uvarint()
        if n == 0:
            return None
        if n - 1 > self.remaining():
            raise ProtocolError(f"array of {n - 1} elements with {self.remaining()} bytes left")
        return n - 1

    def compact_int32_array(self, nullable: bool = False) -> list[int] | None:
        n = self.compact_array_len()
        if n is None:
            if not nullable:
                raise ProtocolError("null where an array is required")
            return None
        raw = self._take(4 * n)
        return list(struct.unpack(f">{n}i", raw))

    def compact_uuid_array(self) -> list[uuid.UUID]:
        n = self.compact_array_len()
        if n is None:
            raise ProtocolError("null where an array is required")
        return [self.uuid() for _ in range(n)]

    def tagged_fields(self) -> dict[int, memoryview]:
        count = self.uvarint()
        if count > self.remaining():
            raise ProtocolError(f"{count} tagged fields with {self.remaining()} bytes left")
        fields: dict[int, memoryview] = {}
        last = -1
        for _ in range(count):
            tag = self.uvarint()
            if tag <= last:
                raise ProtocolError("tagged fields out of order")
            last = tag
            size = self.uvarint()
            fields[tag] = self._take(size)
        return fields


class Writer:
    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def getvalue(self) -> bytes:
        return bytes(self.buf)

    def int8(self, v: int) -> None:
        self.buf += _I8.pack(v)

    def int16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def uint16(self, v: int) -> None:
        self.buf += _U16.pack(v)

    def int32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def int64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def boolean(self, v: bool) -> None:
        self.buf.append(1 if v else 0)

    def uuid(self, v: uuid.UUID) -> None:
        self.buf += v.bytes

    def uvarint(self, v: int) -> None:
        if v < 0 or v > 0xFFFFFFFF:
            raise ValueError(f"uvarint out of range: {v}")
        while v >= 0x80:
            self.buf.append((v & 0x7F) | 0x80)
            v >>= 7
        self.buf.append(v)

    def compact_nullable_string(self, v: str | None) -> None:
        if v is None:
            self.uvarint(0)
            return
        data = v.encode("utf-8")
        self.uvarint(len(data) + 1)
        self.buf += data

    compact_string = compact_nullable_string

    def compact_int32_array(self, v: list[int] | None) -> None:
        if v is None:
            self.uvarint(0)
            return
        self.uvarint(len(v) + 1)
        self.buf += struct.pack(f">{len(v)}i", *v)

    def compact_uuid_array(self, v: list[uuid.UUID]) -> None:
        self.uvarint(len(v) + 1)
        for u in v:
            self.buf += u.bytes

    def tagged_fields(self, fields: dict[int, bytes]) -> None:
        self.uvarint(len(fields))
        for tag in sorted(fields):
            self.uvarint(tag)
            self.uvarint(len(fields[tag]))
            self.buf += fields[tag]
