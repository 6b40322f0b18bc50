"""Kafka's primitive types: a bounds-checked Reader and a Writer.

Every length read from the wire is compared with the bytes left *before*
anything is sliced or allocated (the CVE-2022-34917 class of bugs), and
every failure surfaces as `ProtocolError`, never IndexError/struct.error.
"""

from __future__ import annotations

import struct
import uuid

from odradek.protocol.errors import ProtocolError

__all__ = [
    "Reader",
    "Writer",
    "decode_uvarint",
    "decode_uvarint32",
    "decode_uvarint_short",
    "decode_uvarint_within",
    "decode_varint",
    "encode_uvarint",
    "encode_varint",
    "zigzag_decode",
    "zigzag_encode",
]

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")

# A 32-bit unsigned varint needs at most 5 bytes, a 64-bit one at most 10.
# (Public: the numpy column codecs of client/ share them.)
MAX_VARINT_BYTES = _MAX_VARINT_BYTES = 5
MAX_VARLONG_BYTES = _MAX_VARLONG_BYTES = 10


def zigzag_encode(n: int) -> int:
    return n << 1 if n >= 0 else ((-n) << 1) - 1


def zigzag_decode(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def encode_uvarint(n: int) -> bytes:
    if n < 0:
        raise ValueError("uvarint must be non-negative")
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_varint(n: int) -> bytes:
    return encode_uvarint(zigzag_encode(n))


def decode_uvarint(buf: memoryview | bytes, pos: int, max_bytes: int = _MAX_VARLONG_BYTES) -> tuple[int, int]:
    """Return (value, new_pos). Raises ProtocolError on truncation or overlong encoding."""
    end = len(buf)
    if pos < end:
        b = buf[pos]
        if b < 0x80:
            return b, pos + 1
    result = 0
    shift = 0
    start = pos
    while True:
        if pos >= end:
            raise ProtocolError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if pos - start >= max_bytes:
            raise ProtocolError("varint too long")


def decode_uvarint_short(buf: memoryview | bytes, pos: int) -> tuple[int, int]:
    """decode_uvarint for hot loops whose values are nearly all one or two bytes (record
    lengths, key sizes, deltas): no len() call, and truncation within those two bytes raises
    IndexError, which the caller's loop turns into its own error. ~25 ns/call faster than
    decode_uvarint on two-byte values (timeit, 97 vs 126 ns)."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    b2 = buf[pos + 1]
    if b2 < 0x80:
        return (b & 0x7F) | (b2 << 7), pos + 2
    return decode_uvarint(buf, pos, _MAX_VARLONG_BYTES)


def decode_uvarint32(buf: memoryview | bytes, pos: int) -> tuple[int, int]:
    """An unsigned varint of at most 32 bits (compact lengths and counts), the one-byte case
    (almost every count and length) first."""
    if pos < len(buf) and buf[pos] < 0x80:
        return buf[pos], pos + 1
    value, pos = decode_uvarint(buf, pos, _MAX_VARINT_BYTES)
    if value > 0xFFFFFFFF:
        raise ProtocolError("uvarint exceeds 32 bits")
    return value, pos


def decode_uvarint_within(buf: memoryview | bytes, pos: int, end: int) -> tuple[int, int]:
    """A varint of at most 5 bytes that must end by `end` (a sub-range of `buf`)."""
    if pos >= end:
        raise ProtocolError("truncated varint")
    value, new = decode_uvarint(buf, pos, _MAX_VARINT_BYTES)
    if new > end:
        raise ProtocolError("truncated varint")
    return value, new


def decode_varint(buf: memoryview | bytes, pos: int, max_bytes: int = _MAX_VARLONG_BYTES) -> tuple[int, int]:
    value, pos = decode_uvarint(buf, pos, max_bytes)
    return zigzag_decode(value), pos


class Reader:
    """Reads Kafka primitives from a buffer, advancing `pos`."""

    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf: memoryview | bytes | bytearray, offset: int = 0) -> None:
        self.buf = buf if isinstance(buf, memoryview) else memoryview(buf)
        self.end = len(self.buf)
        if offset < 0 or offset > self.end:
            raise ProtocolError(f"offset {offset} outside buffer of {self.end} bytes")
        self.pos = offset

    # -- fixed width -------------------------------------------------------

    def _fixed(self, st: struct.Struct) -> int:
        pos = self.pos
        if self.end - pos < st.size:
            raise ProtocolError(f"truncated: need {st.size} bytes at {pos}, have {self.end - pos}")
        self.pos = pos + st.size
        return st.unpack_from(self.buf, pos)[0]

    def int8(self) -> int:
        return self._fixed(_I8)

    def int16(self) -> int:
        return self._fixed(_I16)

    def uint16(self) -> int:
        return self._fixed(_U16)

    def int32(self) -> int:
        return self._fixed(_I32)

    def uint32(self) -> int:
        return self._fixed(_U32)

    def int64(self) -> int:
        return self._fixed(_I64)

    def float64(self) -> float:
        pos = self.pos
        if self.end - pos < 8:
            raise ProtocolError("truncated float64")
        self.pos = pos + 8
        return _F64.unpack_from(self.buf, pos)[0]

    def boolean(self) -> bool:
        return self._fixed(_I8) != 0

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=bytes(self.raw(16)))

    # -- varints -----------------------------------------------------------

    def uvarint(self) -> int:
        value, self.pos = decode_uvarint(self.buf, self.pos, _MAX_VARINT_BYTES)
        if value > 0xFFFFFFFF:
            raise ProtocolError("uvarint exceeds 32 bits")
        return value

    def varint(self) -> int:
        value, self.pos = decode_uvarint(self.buf, self.pos, _MAX_VARINT_BYTES)
        if value > 0xFFFFFFFF:
            raise ProtocolError("varint exceeds 32 bits")
        return zigzag_decode(value)

    def uvarlong(self) -> int:
        value, self.pos = decode_uvarint(self.buf, self.pos, _MAX_VARLONG_BYTES)
        if value > 0xFFFFFFFFFFFFFFFF:
            raise ProtocolError("varlong exceeds 64 bits")
        return value

    def varlong(self) -> int:
        return zigzag_decode(self.uvarlong())

    # -- raw bytes -----------------------------------------------------------

    def raw(self, n: int) -> memoryview:
        """A view of the next n bytes (no copy). n is checked against what is left."""
        pos = self.pos
        if n < 0 or n > self.end - pos:
            raise ProtocolError(f"length {n} exceeds the {self.end - pos} bytes left")
        self.pos = pos + n
        return self.buf[pos : pos + n]

    def skip(self, n: int) -> None:
        self.raw(n)

    def remaining(self) -> int:
        return self.end - self.pos

    # -- strings -------------------------------------------------------------

    def _text(self, n: int) -> str:
        view = self.raw(n)
        try:
            return str(view, "utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"invalid utf-8 in string: {exc}") from None

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise ProtocolError("null in non-nullable string")
        return self._text(n)

    def nullable_string(self) -> str | None:
        n = self.int16()
        if n == -1:
            return None
        if n < 0:
            raise ProtocolError(f"bad string length {n}")
        return self._text(n)

    def compact_string(self) -> str:
        n = self.uvarint()
        if n == 0:
            raise ProtocolError("null in non-nullable compact string")
        return self._text(n - 1)

    def compact_nullable_string(self) -> str | None:
        n = self.uvarint()
        if n == 0:
            return None
        return self._text(n - 1)

    # -- bytes (views, no copy) -----------------------------------------------

    def bytes_(self) -> memoryview:
        n = self.int32()
        if n < 0:
            raise ProtocolError("null in non-nullable bytes")
        return self.raw(n)

    def nullable_bytes(self) -> memoryview | None:
        n = self.int32()
        if n == -1:
            return None
        if n < 0:
            raise ProtocolError(f"bad bytes length {n}")
        return self.raw(n)

    def compact_bytes(self) -> memoryview:
        n = self.uvarint()
        if n == 0:
            raise ProtocolError("null in non-nullable compact bytes")
        return self.raw(n - 1)

    def compact_nullable_bytes(self) -> memoryview | None:
        n = self.uvarint()
        if n == 0:
            return None
        return self.raw(n - 1)

    # -- arrays ----------------------------------------------------------------

    def _check_count(self, n: int) -> int:
        # Every element of every Kafka array takes at least one byte, so a count
        # above the bytes left is a lie; refusing it bounds any loop or allocation.
        if n > self.end - self.pos:
            raise ProtocolError(f"array count {n} exceeds the {self.end - self.pos} bytes left")
        return n

    def array_len(self) -> int | None:
        """int32 count; None for a null array (-1)."""
        n = self.int32()
        if n == -1:
            return None
        if n < 0:
            raise ProtocolError(f"bad array length {n}")
        return self._check_count(n)

    def compact_array_len(self) -> int | None:
        """uvarint count+1; None for a null array (0)."""
        n = self.uvarint()
        if n == 0:
            return None
        return self._check_count(n - 1)

    # -- tagged fields -----------------------------------------------------------

    def tagged_fields(self) -> dict[int, memoryview]:
        """Read a tagged-field section; returns tag -> raw value view."""
        count = self.uvarint()
        self._check_count(count)
        if count == 0:
            return {}
        fields: dict[int, memoryview] = {}
        last = -1
        for _ in range(count):
            tag = self.uvarint()
            if tag <= last:
                raise ProtocolError("tagged fields out of order or duplicated")
            last = tag
            fields[tag] = self.raw(self.uvarint())
        return fields

    def skip_tagged_fields(self) -> None:
        buf = self.buf
        pos = self.pos
        # Fast path: the overwhelmingly common empty section is one zero byte.
        if pos < self.end and buf[pos] == 0:
            self.pos = pos + 1
            return
        self.tagged_fields()


class Writer:
    """Appends Kafka primitives to a bytearray."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def getvalue(self) -> bytes:
        return bytes(self.buf)

    def __len__(self) -> int:
        return len(self.buf)

    def write_int8(self, v: int) -> None:
        self.buf += _I8.pack(v)

    def write_int16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def write_uint16(self, v: int) -> None:
        self.buf += _U16.pack(v)

    def write_int32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def write_uint32(self, v: int) -> None:
        self.buf += _U32.pack(v)

    def write_int64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def write_float64(self, v: float) -> None:
        self.buf += _F64.pack(v)

    def write_boolean(self, v: bool) -> None:
        self.buf.append(1 if v else 0)

    def write_uuid(self, v: uuid.UUID | None) -> None:
        self.buf += (v.bytes if v is not None else bytes(16))

    def write_uvarint(self, v: int) -> None:
        self.buf += encode_uvarint(v)

    def write_varint(self, v: int) -> None:
        self.buf += encode_varint(v)

    def write_uvarlong(self, v: int) -> None:
        self.buf += encode_uvarint(v)

    def write_varlong(self, v: int) -> None:
        self.buf += encode_varint(v)

    def write_raw(self, data: bytes | bytearray | memoryview) -> None:
        self.buf += data

    def write_string(self, v: str) -> None:
        data = v.encode()
        self.write_int16(len(data))
        self.buf += data

    def write_nullable_string(self, v: str | None) -> None:
        if v is None:
            self.write_int16(-1)
        else:
            self.write_string(v)

    def write_compact_string(self, v: str) -> None:
        data = v.encode()
        self.write_uvarint(len(data) + 1)
        self.buf += data

    def write_compact_nullable_string(self, v: str | None) -> None:
        if v is None:
            self.buf.append(0)
        else:
            self.write_compact_string(v)

    def write_bytes_(self, v: bytes | bytearray | memoryview) -> None:
        self.write_int32(len(v))
        self.buf += v

    def write_nullable_bytes(self, v: bytes | bytearray | memoryview | None) -> None:
        if v is None:
            self.write_int32(-1)
        else:
            self.write_bytes_(v)

    def write_compact_bytes(self, v: bytes | bytearray | memoryview) -> None:
        self.write_uvarint(len(v) + 1)
        self.buf += v

    def write_compact_nullable_bytes(self, v: bytes | bytearray | memoryview | None) -> None:
        if v is None:
            self.buf.append(0)
        else:
            self.write_compact_bytes(v)

    def write_array_len(self, n: int | None) -> None:
        self.write_int32(-1 if n is None else n)

    def write_compact_array_len(self, n: int | None) -> None:
        self.write_uvarint(0 if n is None else n + 1)

    def write_tagged_fields(self, fields: dict[int, bytes] | None = None) -> None:
        if not fields:
            self.buf.append(0)
            return
        self.write_uvarint(len(fields))
        for tag in sorted(fields):
            data = fields[tag]
            self.write_uvarint(tag)
            self.write_uvarint(len(data))
            self.buf += data
