"""The one Protobuf wire-field reader (protocol/protobuf_wire): what protobuf's own serializer
writes reads back field for field, any field list round-trips, and any bytes either read or
raise ProtocolError (fuzzed)."""

from __future__ import annotations

import struct

import pytest
from google.protobuf import descriptor_pb2
from hypothesis import given
from hypothesis import strategies as st

from odradek.protocol.errors import ProtocolError
from odradek.protocol.primitives import encode_uvarint
from odradek.protocol.protobuf_wire import (
    I32,
    I64,
    LEN,
    VARINT,
    WireField,
    packed_ints,
    wire_fields,
)


def encode(fields: list[WireField]) -> bytes:
    out = b""
    for f in fields:
        out += encode_uvarint(f.number << 3 | f.wire)
        if f.wire == VARINT:
            assert isinstance(f.value, int)
            out += encode_uvarint(f.value)
        elif f.wire == LEN:
            assert isinstance(f.value, bytes)
            out += encode_uvarint(len(f.value)) + f.value
        else:
            assert isinstance(f.value, bytes)
            out += f.value
    return out


def test_reads_what_protobuf_writes() -> None:
    field = descriptor_pb2.FieldDescriptorProto(
        name="price", number=7, label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_SINT64)
    field.options.packed = True
    got = list(wire_fields(field.SerializeToString()))
    assert got == [WireField(1, LEN, b"price"), WireField(3, VARINT, 7),
                   WireField(4, VARINT, 3), WireField(5, VARINT, 18),
                   WireField(8, LEN, field.options.SerializeToString())]
    assert list(wire_fields(field.options.SerializeToString())) == [WireField(2, VARINT, 1)]
    # a negative int32 is written as ten bytes, its 64-bit two's complement
    negative = descriptor_pb2.FieldDescriptorProto(number=-1).SerializeToString()
    assert list(wire_fields(negative)) == [WireField(3, VARINT, (1 << 64) - 1)]
    # double and float: the fixed wire types, little-endian bytes
    opts = descriptor_pb2.UninterpretedOption(double_value=1.5)
    assert list(wire_fields(opts.SerializeToString())) == [
        WireField(6, I64, struct.pack("<d", 1.5))]


def test_packed_ints() -> None:
    assert packed_ints(b"\x01\x96\x01\x00") == [1, 150, 0]
    assert packed_ints(b"") == []
    with pytest.raises(ProtocolError):
        packed_ints(b"\x96")


@pytest.mark.parametrize("raw", [
    b"\x12\x09short",  # LEN longer than what is left
    b"\x09\x00\x00",  # fixed64 cut short
    b"\x0d\x00",  # fixed32 cut short
    b"\x08",  # a varint missing
    b"\x08\x96",  # a varint cut short
    b"\x0b",  # wire type 3 (a group start)
    b"\x0e\x00",  # wire type 6
    b"\x00\x01",  # field number 0
])
def test_refuses_bytes_that_are_no_message(raw: bytes) -> None:
    with pytest.raises(ProtocolError):
        list(wire_fields(raw))


_FIELDS = st.lists(st.one_of(
    st.builds(WireField, st.integers(1, 2**29 - 1), st.just(VARINT), st.integers(0, 2**64 - 1)),
    st.builds(WireField, st.integers(1, 2**29 - 1), st.just(LEN), st.binary(max_size=40)),
    st.builds(WireField, st.integers(1, 2**29 - 1), st.just(I64),
              st.binary(min_size=8, max_size=8)),
    st.builds(WireField, st.integers(1, 2**29 - 1), st.just(I32),
              st.binary(min_size=4, max_size=4)),
), max_size=12)


@given(_FIELDS)
def test_any_fields_round_trip(fields: list[WireField]) -> None:
    assert list(wire_fields(encode(fields))) == fields


@given(st.binary(max_size=200))
def test_any_bytes_read_or_raise_protocol_error(raw: bytes) -> None:
    try:
        fields = list(wire_fields(raw))
    except ProtocolError:
        return
    for f in fields:
        assert f.number >= 1 and f.wire in (VARINT, I64, LEN, I32)
        assert isinstance(f.value, int) == (f.wire == VARINT)
        if f.wire in (I64, I32):
            assert len(f.value) == (8 if f.wire == I64 else 4)  # type: ignore[arg-type]
