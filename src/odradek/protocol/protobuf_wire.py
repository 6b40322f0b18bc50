"""Protobuf's wire format read field by field, without a schema: the one reader for the places
that look inside Protobuf bytes by hand (Connect's field options in connect/protobuf_types, the
console's record view in console/protobuf_view). It lives here, below both, as the Kafka
primitives do: bytes in, values out, no I/O.

A message is a run of fields, each a varint key (field number << 3 | wire type) and a value:
VARINT a varint, I64 eight bytes, LEN a varint length and that many bytes, I32 four bytes.
The group wire types (3, 4: proto2's deprecated groups) and 6, 7 are refused, as is field
number 0, which no .proto may declare.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from odradek.protocol.errors import ProtocolError
from odradek.protocol.primitives import decode_uvarint

VARINT, I64, LEN, I32 = 0, 1, 2, 5
_FIXED = {I64: 8, I32: 4}


class WireField(NamedTuple):
    number: int
    wire: int  # VARINT, I64, LEN or I32
    # VARINT: the varint as an unsigned int (a negative int32/int64 is its two's complement);
    # I64, I32: the little-endian bytes; LEN: the payload
    value: int | bytes


def wire_fields(buf: bytes) -> Iterator[WireField]:
    """The fields of one message in their order on the wire (a repeated field once per
    occurrence). ProtocolError (a ValueError) at the first field the bytes cannot hold."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = decode_uvarint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ProtocolError("protobuf field number 0")
        value: int | bytes
        if wire == VARINT:
            value, pos = decode_uvarint(buf, pos)
        elif wire == LEN:
            size, pos = decode_uvarint(buf, pos)
            if pos + size > end:
                raise ProtocolError(f"protobuf field {number}: {size} bytes announced, "
                                    f"{end - pos} left")
            value, pos = buf[pos:pos + size], pos + size
        elif wire in _FIXED:
            size = _FIXED[wire]
            if pos + size > end:
                raise ProtocolError(f"protobuf field {number}: fixed{size * 8} cut short")
            value, pos = buf[pos:pos + size], pos + size
        else:
            raise ProtocolError(f"protobuf field {number}: wire type {wire}")
        yield WireField(number, wire, value)


def packed_ints(buf: bytes) -> list[int]:
    """The values of a packed repeated field of a varint type (its LEN payload), as
    decode_uvarint reads each."""
    out, pos = [], 0
    while pos < len(buf):
        value, pos = decode_uvarint(buf, pos)
        out.append(value)
    return out
