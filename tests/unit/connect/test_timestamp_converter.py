"""Issue 19: TimestampConverter$Key/$Value against Kafka's documented examples and its own
test values (1970-01-02 00:00:01.234 UTC as Unix time, string, Date, Time and Timestamp),
with and without schemas; SimpleDateFormat patterns translated, unsupported letters refused."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.connect import data, transforms
from odradek.connect.data import ConnectRecord, DataError, Schema
from odradek.connect.transforms import Chain
from odradek.connect.transforms.simple_date_format import SimpleDateFormat

T = "org.apache.kafka.connect.transforms.TimestampConverter"
# Kafka's TimestampConverterTest: one day, one second and 234 ms after the epoch
MILLIS = 86_401_234
STAMP = dt.datetime(1970, 1, 2, 0, 0, 1, 234_000, tzinfo=dt.UTC)
DATE = dt.date(1970, 1, 2)
TIME = dt.time(0, 0, 1, 234_000)
FMT = "yyyy MM dd HH mm ss SSS z"
TEXT = "1970 01 02 00 00 01 234 UTC"
TS_SCHEMA = Schema("INT64", name=data.TIMESTAMP, version=1)
DATE_SCHEMA = Schema("INT32", name=data.DATE, version=1)
TIME_SCHEMA = Schema("INT32", name=data.TIME, version=1)


def conv(target: str, key: bool = False, **settings: str) -> Chain:
    config = {"transforms": "ts", "transforms.ts.type": f"{T}${'Key' if key else 'Value'}",
              "transforms.ts.target.type": target}
    config.update({f"transforms.ts.{k.replace('__', '.')}": v for k, v in settings.items()})
    return Chain.from_config(config)


def rec(value: object, schema: Schema | None = None) -> ConnectRecord:
    return ConnectRecord("t", 0, None, None, schema, value)


def out(chain: Chain, record: ConnectRecord) -> tuple[Schema | None, object]:
    got = chain.apply(record)
    assert got is not None
    return got.value_schema, got.value


def test_schemaless_conversions_as_kafkas_tests() -> None:
    assert out(conv("Timestamp"), rec(MILLIS)) == (None, STAMP)
    assert out(conv("Date"), rec(MILLIS)) == (None, DATE)
    assert out(conv("Time"), rec(MILLIS)) == (None, TIME)
    assert out(conv("unix"), rec(STAMP)) == (None, MILLIS)
    assert out(conv("string", format=FMT), rec(STAMP)) == (None, TEXT)
    assert out(conv("unix", format=FMT), rec(TEXT)) == (None, MILLIS)
    assert out(conv("Timestamp", format=FMT), rec(TEXT)) == (None, STAMP)
    assert out(conv("Timestamp"), rec(None)) == (None, None)


def test_with_schema_the_schema_says_the_input() -> None:
    assert out(conv("unix"), rec(STAMP, TS_SCHEMA)) == (Schema("INT64"), MILLIS)
    assert out(conv("Timestamp"), rec(MILLIS, Schema("INT64"))) == (TS_SCHEMA, STAMP)
    assert out(conv("string", format=FMT), rec(DATE, DATE_SCHEMA)) == (
        Schema("STRING"), "1970 01 02 00 00 00 000 UTC")
    assert out(conv("unix"), rec(TIME, TIME_SCHEMA)) == (Schema("INT64"), 1234)
    assert out(conv("Date", format=FMT), rec(TEXT, Schema("STRING"))) == (DATE_SCHEMA, DATE)
    assert out(conv("Time"), rec(STAMP, TS_SCHEMA)) == (TIME_SCHEMA, TIME)
    # an optional input gives an optional output, and a null stays null
    assert out(conv("Timestamp"), rec(None, Schema("INT64", optional=True))) == (
        TS_SCHEMA.as_optional(), None)
    with pytest.raises(DataError, match="does not correspond to a known timestamp type"):
        conv("unix").apply(rec(1, Schema("INT32")))


def test_a_field_of_a_struct_and_of_a_map() -> None:
    schema = data.struct([("id", Schema("INT32")), ("ts", Schema("INT64", optional=True))],
                         name="row")
    got = conv("Timestamp", field="ts").apply(rec({"id": 7, "ts": MILLIS}, schema))
    assert got is not None and got.value == {"id": 7, "ts": STAMP}
    assert got.value_schema == data.struct(
        [("id", Schema("INT32")), ("ts", TS_SCHEMA.as_optional())], name="row")
    got = conv("string", field="ts", format="yyyy-MM-dd").apply(rec({"id": 1, "ts": None},
                                                                     schema))
    assert got is not None and got.value == {"id": 1, "ts": None}
    got = conv("unix", field="when", unix__precision="seconds").apply(
        rec({"when": STAMP, "other": "x"}))
    assert got is not None and got.value == {"when": 86401, "other": "x"}
    key = conv("Date", key=True, field="d").apply(
        ConnectRecord("t", 0, None, {"d": MILLIS}, None, "v"))
    assert key is not None and (key.key, key.value) == ({"d": DATE}, "v")
    with pytest.raises(DataError, match="Only Map objects supported"):
        conv("unix", field="x").apply(rec("not a map"))


def test_kafkas_documented_example_date_string() -> None:
    """docs: format yyyy-MM-dd, target.type string on the whole value."""
    when = int(dt.datetime(2017, 6, 15, 13, 45, tzinfo=dt.UTC).timestamp() * 1000)
    assert out(conv("string", format="yyyy-MM-dd"), rec(when)) == (None, "2017-06-15")
    # Confluent's example: a string field read with a pattern into a Timestamp
    got = conv("Timestamp", field="event_date", format="yyyy-MM-dd'T'HH:mm:ss.SSSX").apply(
        rec({"event_date": "2017-06-15T13:45:30.125Z"}))
    assert got is not None
    assert got.value == {"event_date": dt.datetime(2017, 6, 15, 13, 45, 30, 125_000,
                                                   tzinfo=dt.UTC)}


@pytest.mark.parametrize(("precision", "unix", "millis"), [
    ("seconds", 1_700_000_000, 1_700_000_000_000),
    ("milliseconds", 1_700_000_000_123, 1_700_000_000_123),
    ("microseconds", 1_700_000_000_123_456, 1_700_000_000_123),  # below ms: lost, as in Kafka
    ("nanoseconds", 1_700_000_000_123_456_789, 1_700_000_000_123),
    ("microseconds", -1_500, -1),  # Java's division, toward zero
])
def test_unix_precision(precision: str, unix: int, millis: int) -> None:
    stamp = data.EPOCH + dt.timedelta(milliseconds=millis)
    assert out(conv("Timestamp", unix__precision=precision), rec(unix)) == (None, stamp)
    back = out(conv("unix", unix__precision=precision), rec(stamp))[1]
    assert back == {"seconds": millis // 1000 if millis >= 0 else -(-millis // 1000),
                    "milliseconds": millis, "microseconds": millis * 1000,
                    "nanoseconds": millis * 1_000_000}[precision]


def test_configs_kafka_refuses() -> None:
    for config, message in [
        ({"target.type": "epoch"}, "String must be one of: string, unix, Date, Time, "
                                   "Timestamp"),
        ({"target.type": "string"}, "requires format option to be specified"),
        ({"target.type": "unix", "unix.precision": "minutes"}, "String must be one of"),
        ({"target.type": "string", "format": "yyyy-MM-ddTHH"}, "Illegal pattern character 'T'"),
        ({"target.type": "string", "format": "YYYY-ww"}, "'Y' is not supported here"),
        ({"target.type": "string", "format": "G yyyy"}, "'G' is not supported here"),
        ({"target.type": "string", "format": "'open"}, "Unterminated quote"),
    ]:
        settings = {"transforms": "ts", "transforms.ts.type": T + "$Value"}
        settings.update({f"transforms.ts.{k}": v for k, v in config.items()})
        assert message in transforms.errors(settings).get("transforms.ts", [""])[0], config
    with pytest.raises(DataError, match=r"does not match pattern \(yyyy-MM-dd\)"):
        conv("unix", format="yyyy-MM-dd").apply(rec("15/06/2017"))


@pytest.mark.parametrize(("pattern", "text"), [
    ("yyyy-MM-dd'T'HH:mm:ss.SSS'Z'", "2024-03-09T23:59:07.005Z"),
    ("EEE, d MMM yyyy HH:mm:ss Z", "Sat, 9 Mar 2024 23:59:07 +0000"),
    ("EEEE, MMMM dd, yy h:mm a", "Saturday, March 09, 24 11:59 PM"),
    ("yyyyMMddHHmmss", "20240309235907"),
    ("D 'day of' yyyy, k:mm, K a, 'o''clock' u", "69 day of 2024, 23:59, 11 PM, o'clock 6"),
    ("yyyy.MM.dd G", None),
    ("SSSSSS", "000005"),  # milliseconds in six digits, not microseconds
])
def test_patterns_format_as_java_does(pattern: str, text: str | None) -> None:
    millis = int(dt.datetime(2024, 3, 9, 23, 59, 7, 5000, tzinfo=dt.UTC).timestamp() * 1000)
    if text is None:
        with pytest.raises(ValueError, match="not supported here"):
            SimpleDateFormat(pattern)
        return
    fmt = SimpleDateFormat(pattern)
    assert fmt.format(millis) == text
    parsed = fmt.parse(text)
    assert parsed is not None
    # what the pattern keeps comes back
    assert fmt.format(parsed) == text


def test_parsing_is_lenient_as_javas() -> None:
    fmt = SimpleDateFormat("yyyy-MM-dd")
    assert fmt.parse("2023-13-01") == fmt.parse("2024-01-01")  # month 13 rolls over
    assert fmt.parse("2024-02-30") == fmt.parse("2024-03-01")
    assert fmt.parse("2024-03-09 trailing text") == fmt.parse("2024-03-09")
    assert fmt.parse("nope") is None
    zoned = SimpleDateFormat("yyyy-MM-dd HH:mm XXX")
    assert zoned.parse("2024-03-09 12:00 +02:00") == zoned.parse("2024-03-09 10:00 Z")


@given(st.integers(min_value=-(10 ** 12), max_value=253_402_300_799_000))
def test_round_trips_through_every_kind(millis: int) -> None:
    fmt = "yyyy-MM-dd HH:mm:ss.SSS"
    text = out(conv("string", format=fmt), rec(millis))[1]
    assert out(conv("unix", format=fmt), rec(text)) == (None, millis)
    stamp = out(conv("Timestamp"), rec(millis))[1]
    assert out(conv("unix", unix__precision="nanoseconds"), rec(stamp)) == (
        None, millis * 1_000_000)
