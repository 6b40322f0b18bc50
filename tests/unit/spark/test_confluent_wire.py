"""The Protobuf framing's message indexes: any bytes give indexes or a DecodeError, and what
the writer frames reads back."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.primitives import encode_varint
from odradek.spark.avro import DecodeError
from odradek.spark.confluent_wire import _json_spark_type, message_indexes


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=64))
def test_any_bytes_give_indexes_or_decode_error(data: bytes) -> None:
    try:
        indexes, rest = message_indexes(memoryview(data))
    except DecodeError:
        return
    assert indexes and len(rest) <= len(data)


@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=5), st.binary(max_size=8))
def test_framed_indexes_read_back(path: list[int], payload: bytes) -> None:
    framed = b"\x00" if path == [0] else b"".join(encode_varint(n) for n in [len(path), *path])
    indexes, rest = message_indexes(memoryview(framed + payload))
    assert indexes == path and bytes(rest) == payload


@pytest.mark.parametrize(("data", "needle"), [
    (b"", "truncated"), (b"\x02", "truncated"), (b"\x01", "-1 message indexes"),
    (b"\xff" * 11, "message indexes: varint too long"), (b"\xca\x01", "101 message indexes"),
])
def test_bad_indexes(data: bytes, needle: str) -> None:
    with pytest.raises(DecodeError, match=needle):
        message_indexes(memoryview(data))


def test_json_schema_to_spark_type() -> None:
    dt = _json_spark_type({"type": "object", "properties": {
        "a": {"type": "integer"}, "b": {"type": ["string", "null"]},
        "c": {"type": "array", "items": {"type": "number"}}, "d": {"oneOf": []}}})
    assert dt.simpleString() == "struct<a:bigint,b:string,c:array<double>,d:string>"
