"""The Confluent-wire Avro codec without Spark: round trips, schema resolution, and fuzzing."""

from __future__ import annotations

import datetime
import io
import struct
from decimal import Decimal

import fastavro
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.spark.avro import (
    MAX_EMPTY_ITEMS,
    AvroCodec,
    DecodeError,
    LocalRegistry,
    SchemaError,
    check_bounds,
    frame,
    needs_bounds_walk,
    unframe,
)
from odradek.spark.avrotypes import spark_type, value_fixer

PAYMENT = {
    "type": "record", "name": "Payment", "namespace": "shop",
    "fields": [
        {"name": "payment_id", "type": "string"},
        {"name": "order_id", "type": "long"},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "method", "type": {"type": "enum", "name": "Method", "symbols": ["CARD", "BANK"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "int"}},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}
ZERO_ITEMS = {"type": "record", "name": "Z", "fields": [
    {"name": "a", "type": {"type": "array", "items": "null"}},
    {"name": "b", "type": {"type": "array", "items": {"type": "record", "name": "E", "fields": []}}},
]}


def _record(i: int) -> dict[str, object]:
    return {"payment_id": f"p{i}", "order_id": i, "amount": Decimal(f"{i}.25"),
            "ts": datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC) + datetime.timedelta(seconds=i),
            "method": "CARD" if i % 2 else "BANK", "tags": [str(i)] * (i % 3),
            "attrs": {"n": i}, "note": None if i % 2 else f"n{i}"}


def _zigzag(n: int) -> bytes:
    u = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = u & 0x7F
        u >>= 7
        if u:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def test_round_trip_and_wire_header() -> None:
    registry = LocalRegistry()
    codec = AvroCodec(registry, PAYMENT, subject="payments-value")
    for i in range(20):
        data = codec.encode(_record(i))
        assert data[0] == 0
        schema_id, body = unframe(data)
        assert schema_id == codec.schema_id() == 1
        assert struct.unpack(">I", data[1:5])[0] == 1
        assert fastavro.schemaless_reader(io.BytesIO(bytes(body)), fastavro.parse_schema(PAYMENT)) \
            == codec.decode(data)
        assert codec.decode(data) == _record(i)


def test_registry_returns_same_id_for_equal_schema_and_new_id_for_new() -> None:
    registry = LocalRegistry({7: PAYMENT})
    assert registry.register("s", PAYMENT) == 7
    assert registry.register("other", ZERO_ITEMS) == 8
    assert registry.schema_by_id(8) == ZERO_ITEMS


def test_reader_schema_resolves_older_writer() -> None:
    v1 = {"type": "record", "name": "U", "fields": [{"name": "id", "type": "long"}]}
    v2 = {"type": "record", "name": "U", "fields": [
        {"name": "id", "type": "long"}, {"name": "tier", "type": "string", "default": "basic"}]}
    registry = LocalRegistry({1: v1, 2: v2})
    old = AvroCodec(registry, v1).encode({"id": 5})
    assert AvroCodec(registry, v2).decode(old) == {"id": 5, "tier": "basic"}


@pytest.mark.parametrize("data, needle", [
    (b"", "shorter than the 5-byte"),
    (b"\x00\x00\x00", "shorter than the 5-byte"),
    (b"\x01\x00\x00\x00\x01", "magic byte 1"),
    (frame(99, b"\x02a"), "unknown schema id 99"),
    (frame(1, b"\x02"), "invalid Avro body"),
    (frame(1, _zigzag(10**12) + b"x"), "invalid Avro body"),
])
def test_bad_values_give_decode_errors(data: bytes, needle: str) -> None:
    codec = AvroCodec(LocalRegistry({1: PAYMENT}), PAYMENT)
    with pytest.raises(DecodeError, match=needle):
        codec.decode(data)


def test_trailing_bytes_are_an_error() -> None:
    codec = AvroCodec(LocalRegistry(), PAYMENT)
    with pytest.raises(DecodeError, match="trailing"):
        codec.decode(codec.encode(_record(1)) + b"\x00")


def test_huge_count_of_zero_byte_items_is_refused_before_allocation() -> None:
    assert needs_bounds_walk(ZERO_ITEMS)
    assert not needs_bounds_walk(PAYMENT)
    codec = AvroCodec(LocalRegistry({1: ZERO_ITEMS}), ZERO_ITEMS)
    # 2^40 nulls in 6 bytes: fastavro alone would build a list of them.
    with pytest.raises(DecodeError, match="empty items"):
        codec.decode(frame(1, _zigzag(2**40) + b"\x00\x00"))
    fine = fastavro.parse_schema(ZERO_ITEMS)
    check_bounds(memoryview(_zigzag(MAX_EMPTY_ITEMS) + b"\x00\x00"), fine)
    assert codec.decode(frame(1, _zigzag(3) + b"\x00" + _zigzag(-2) + _zigzag(0) + b"\x00")) \
        == {"a": [None] * 3, "b": [{}, {}]}


def test_spark_type_mapping() -> None:
    t = spark_type(PAYMENT)
    assert t.simpleString() == (
        "struct<payment_id:string,order_id:bigint,amount:decimal(10,2),ts:timestamp,"
        "method:string,tags:array<string>,attrs:map<string,int>,note:string>")
    with pytest.raises(SchemaError, match="union"):
        spark_type({"type": "record", "name": "X", "fields": [{"name": "u", "type": ["int", "string"]}]})
    uuid_schema = {"type": "record", "name": "Q", "fields": [
        {"name": "id", "type": {"type": "string", "logicalType": "uuid"}}]}
    fix = value_fixer(uuid_schema)
    assert fix is not None and value_fixer(PAYMENT) is None


def test_invalid_schema_is_refused() -> None:
    with pytest.raises(SchemaError):
        AvroCodec(LocalRegistry(), {"type": "record", "name": "X", "fields": [{"name": "a", "type": "nope"}]})


def test_codec_pickles_without_parsed_state() -> None:
    import pickle

    codec = AvroCodec(LocalRegistry(), PAYMENT)
    data = codec.encode(_record(3))
    clone = pickle.loads(pickle.dumps(codec))
    assert clone.decode(data) == _record(3)


FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.binary(max_size=64))
def test_fuzz_random_bytes_never_crash(data: bytes) -> None:
    codec = AvroCodec(LocalRegistry({0: PAYMENT, 1: ZERO_ITEMS}), PAYMENT)
    try:
        codec.decode(data)
    except DecodeError:
        pass


@FUZZ
@given(st.sampled_from([0, 1]), st.binary(max_size=64))
def test_fuzz_framed_random_bodies_never_crash(schema_id: int, body: bytes) -> None:
    # Bodies behind a valid header reach fastavro (and the bounds walk for ZERO_ITEMS).
    codec = AvroCodec(LocalRegistry({0: PAYMENT, 1: ZERO_ITEMS}), PAYMENT if schema_id == 0 else ZERO_ITEMS)
    try:
        rec = codec.decode(frame(schema_id, body))
    except DecodeError:
        return
    assert isinstance(rec, dict)


@FUZZ
@given(st.integers(0, 50), st.integers(0, 200), st.binary(min_size=1, max_size=8))
def test_fuzz_mutated_valid_records(i: int, pos: int, junk: bytes) -> None:
    codec = AvroCodec(LocalRegistry(), PAYMENT)
    good = codec.encode(_record(i))
    pos = pos % len(good)
    for data in (good[:pos], good[:pos] + junk + good[pos + len(junk):]):
        try:
            codec.decode(data)
        except DecodeError:
            pass
