"""Issue 19: the ProtobufConverter's logical types, sans I/O, as Confluent's ProtobufData maps
them: Date google.type.Date, Time google.type.TimeOfDay, Timestamp google.protobuf.Timestamp,
Decimal confluent.type.Decimal (scale and precision in the field's confluent.field_meta);
hypothesis for the values both ways and for the field-meta parser."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.connect import data
from odradek.connect import protobuf_converter as pb
from odradek.connect import protobuf_types as types
from odradek.connect.data import DataError, Schema

DATE = Schema("INT32", name=data.DATE, version=1)
TIME = Schema("INT32", name=data.TIME, version=1)
STAMP = Schema("INT64", name=data.TIMESTAMP, version=1)
PRICE = Schema("BYTES", name=data.DECIMAL, version=1,
               parameters=(("connect.decimal.precision", "12"), ("scale", "2")))
LOGICAL = data.struct([
    ("day", DATE), ("at", TIME), ("when", STAMP), ("price", PRICE),
    ("days", Schema("ARRAY", value_schema=DATE)),
    ("prices", Schema("MAP", key_schema=Schema("STRING"), value_schema=data.decimal_schema(3))),
], name="shop.Logical")
CONVERTER = pb.ProtobufConverter(pb._Registry(["http://127.0.0.1:9"]))


def round_trip(schema: Schema, value: dict[str, object]) -> tuple[Schema, object]:
    cls, _ = CONVERTER.message_class(schema)
    msg = cls()
    pb.fill(msg, schema, value)
    back = cls.FromString(msg.SerializeToString())
    read_schema = pb.schema_of(back.DESCRIPTOR)
    return read_schema, pb.read(back, read_schema)


def test_the_file_imports_and_names_confluents_types() -> None:
    fdp, full = pb.file_of(LOGICAL)
    assert full == "shop.Logical"
    assert list(fdp.dependency) == [types.DATE_FILE, types.TIME_FILE, types.TIMESTAMP_FILE,
                                    types.DECIMAL_FILE, types.META_FILE]
    fields = {f.name: f for f in fdp.message_type[0].field}
    assert fields["day"].type_name == ".google.type.Date"
    assert fields["at"].type_name == ".google.type.TimeOfDay"
    assert fields["when"].type_name == ".google.protobuf.Timestamp"
    assert fields["price"].type_name == ".confluent.type.Decimal"
    assert fields["days"].label == pb.F.LABEL_REPEATED
    assert types.meta_params(fields["price"].options.SerializeToString()) == {
        "precision": "12", "scale": "2"}
    assert types.meta_params(fields["day"].options.SerializeToString()) == {}


def test_logical_values_both_ways() -> None:
    value = {"day": dt.date(2024, 2, 29), "at": dt.time(0, 0),  # midnight: all zero, present
             "when": data.EPOCH, "price": decimal.Decimal("-1234.50"),
             "days": [dt.date(1, 1, 1), dt.date(9999, 12, 31)],
             "prices": {"a": decimal.Decimal("0.001"), "b": decimal.Decimal("-128")}}
    schema, back = round_trip(LOGICAL, value)
    assert back == value
    got = {f.name: f.schema for f in schema.fields}
    assert got["day"] == DATE.as_optional() and got["at"] == TIME.as_optional()
    assert got["when"] == STAMP.as_optional() and got["price"] == PRICE.as_optional()
    assert got["prices"].value_schema == Schema("BYTES", name=data.DECIMAL, version=1,
                                                parameters=(("scale", "3"),), optional=True)
    _, nulls = round_trip(LOGICAL, {"day": None, "at": None, "when": None, "price": None,
                                    "days": [], "prices": {}})
    assert nulls == {"day": None, "at": None, "when": None, "price": None, "days": [],
                     "prices": {}}


def test_decimal_parts_as_bigdecimal_gives_them() -> None:
    assert types.decimal_parts(decimal.Decimal("1.00")) == (b"\x64", 3, 2)
    assert types.decimal_parts(decimal.Decimal("-1.28")) == (b"\x80", 3, 2)
    assert types.decimal_parts(decimal.Decimal("1.28")) == (b"\x00\x80", 3, 2)
    assert types.decimal_parts(decimal.Decimal("0")) == (b"\x00", 1, 0)
    assert types.decimal_parts(decimal.Decimal("1E+2")) == (b"\x01", 1, -2)
    with pytest.raises(DataError):
        types.decimal_parts(decimal.Decimal("NaN"))


def test_bad_logical_messages_are_data_errors() -> None:
    cls, _ = CONVERTER.message_class(data.struct([("day", DATE)], name="D"))
    msg = cls()
    msg.day.month = 13
    msg.day.year, msg.day.day = 2024, 1
    schema = pb.schema_of(msg.DESCRIPTOR)
    with pytest.raises(DataError, match=r"google\.type\.Date"):
        pb.read(cls.FromString(msg.SerializeToString()), schema)


DECIMALS = st.decimals(allow_nan=False, allow_infinity=False, places=None,
                       min_value=-10**30, max_value=10**30)


@given(st.dates(), st.times().map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000)),
       st.datetimes(min_value=dt.datetime(1, 1, 2), timezones=st.just(dt.UTC)),
       DECIMALS, st.lists(st.dates(), max_size=3),
       st.dictionaries(st.text(max_size=4), DECIMALS, max_size=3))
def test_logical_values_round_trip(day: dt.date, at: dt.time, when: dt.datetime,
                                   price: decimal.Decimal, days: list[dt.date],
                                   prices: dict[str, decimal.Decimal]) -> None:
    value = {"day": day, "at": at, "when": when, "price": price, "days": days,
             "prices": prices}
    _, back = round_trip(LOGICAL, value)
    assert back == value
    unscaled, _, scale = types.decimal_parts(price)
    assert types.from_decimal_parts(unscaled, scale).as_tuple()[1:] == price.as_tuple()[1:]


@given(st.binary(max_size=60))
def test_field_meta_parser_reads_or_refuses_any_bytes(raw: bytes) -> None:
    try:
        params = types.meta_params(raw)
    except DataError:
        return
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in params.items())


@given(st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=4))
def test_field_meta_round_trips(params: dict[str, str]) -> None:
    assert types.meta_params(types.meta_options(params)) == params


@given(st.binary(max_size=24), st.integers(-2**31, 2**31 - 1))
def test_any_decimal_message_reads(unscaled: bytes, scale: int) -> None:
    value = types.from_decimal_parts(unscaled, scale)
    again = types.decimal_parts(value)
    assert types.from_decimal_parts(again[0], again[2]) == value
