"""Connect's logical types in Protobuf, as Confluent's ProtobufData maps them:

- Date      `google.type.Date` {year, month, day};
- Time      `google.type.TimeOfDay` {hours, minutes, seconds, nanos} (Connect's milliseconds);
- Timestamp `google.protobuf.Timestamp` {seconds, nanos};
- Decimal   `confluent.type.Decimal` {value: the unscaled integer as big-endian two's
  complement, precision: its digit count, scale}, the Connect schema's `scale` and
  `connect.decimal.precision` carried as the field's `(confluent.field_meta).params`
  (`scale`, `precision`).

Confluent's clients and registry know google/type/*.proto and confluent/*.proto as built-in
imports; the files are made here (their messages, field for field) so the converter can write
and read them without a generated module, and registers them as referenced subjects for a
registry that does not know them.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Iterator
from typing import Any

from google.protobuf import descriptor_pb2

from odradek.connect import data
from odradek.connect.data import DataError, Schema
from odradek.protocol.errors import ProtocolError
from odradek.protocol.primitives import encode_uvarint
from odradek.protocol.protobuf_wire import LEN, WireField, wire_fields

FDP = descriptor_pb2.FileDescriptorProto
F = descriptor_pb2.FieldDescriptorProto
TIMESTAMP_FILE = "google/protobuf/timestamp.proto"
DATE_FILE = "google/type/date.proto"
TIME_FILE = "google/type/timeofday.proto"
DECIMAL_FILE = "confluent/type/decimal.proto"
META_FILE = "confluent/meta.proto"
FIELD_META = 1088  # confluent.field_meta, an extension of google.protobuf.FieldOptions

# Connect logical name -> (the file to import, the message's full name)
LOGICAL = {data.TIMESTAMP: (TIMESTAMP_FILE, "google.protobuf.Timestamp"),
           data.DATE: (DATE_FILE, "google.type.Date"),
           data.TIME: (TIME_FILE, "google.type.TimeOfDay"),
           data.DECIMAL: (DECIMAL_FILE, "confluent.type.Decimal")}
_BY_MESSAGE = {message: name for name, (_, message) in LOGICAL.items()}
MESSAGES = frozenset(_BY_MESSAGE)
_TYPES = {data.TIMESTAMP: "INT64", data.DATE: "INT32", data.TIME: "INT32",
          data.DECIMAL: "BYTES"}


def _file(name: str, package: str, message: str, fields: list[tuple[str, int]]) -> Any:
    fdp = FDP(name=name, package=package, syntax="proto3")
    msg = fdp.message_type.add(name=message)
    for number, (field_name, kind) in enumerate(fields, 1):
        msg.field.add(name=field_name, number=number, label=F.LABEL_OPTIONAL, type=kind)
    return fdp


def _meta_file() -> Any:
    fdp = FDP(name=META_FILE, package="confluent", syntax="proto3",
              dependency=["google/protobuf/descriptor.proto"])
    meta = fdp.message_type.add(name="Meta")
    meta.field.add(name="doc", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_STRING)
    meta.field.add(name="params", number=2, label=F.LABEL_REPEATED, type=F.TYPE_MESSAGE,
                   type_name=".confluent.Meta.ParamsEntry")
    meta.field.add(name="tags", number=3, label=F.LABEL_REPEATED, type=F.TYPE_STRING)
    entry = meta.nested_type.add(name="ParamsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, label=F.LABEL_OPTIONAL, type=F.TYPE_STRING)
    entry.field.add(name="value", number=2, label=F.LABEL_OPTIONAL, type=F.TYPE_STRING)
    fdp.extension.add(name="field_meta", number=FIELD_META, label=F.LABEL_OPTIONAL,
                      type=F.TYPE_MESSAGE, type_name=".confluent.Meta",
                      extendee=".google.protobuf.FieldOptions")
    return fdp


BUILT_IN = {
    DATE_FILE: _file(DATE_FILE, "google.type", "Date",
                     [("year", F.TYPE_INT32), ("month", F.TYPE_INT32), ("day", F.TYPE_INT32)]),
    TIME_FILE: _file(TIME_FILE, "google.type", "TimeOfDay",
                     [("hours", F.TYPE_INT32), ("minutes", F.TYPE_INT32),
                      ("seconds", F.TYPE_INT32), ("nanos", F.TYPE_INT32)]),
    DECIMAL_FILE: _file(DECIMAL_FILE, "confluent.type", "Decimal",
                        [("value", F.TYPE_BYTES), ("precision", F.TYPE_UINT32),
                         ("scale", F.TYPE_INT32)]),
    META_FILE: _meta_file(),
}


# ---- (confluent.field_meta).params --------------------------------------------------------
def _length_delimited(number: int, body: bytes) -> bytes:
    return encode_uvarint(number << 3 | 2) + encode_uvarint(len(body)) + body


def meta_options(params: dict[str, str]) -> bytes:
    """FieldOptions bytes holding `(confluent.field_meta) = {params: ...}`."""
    entries = b"".join(_length_delimited(2, _length_delimited(1, k.encode())
                                         + _length_delimited(2, v.encode()))
                       for k, v in params.items())
    return _length_delimited(FIELD_META, entries)


def meta_params(options: bytes) -> dict[str, str]:
    """The `(confluent.field_meta).params` in a field's serialized FieldOptions."""
    def message(field: WireField) -> Iterator[WireField]:
        if field.wire != LEN or not isinstance(field.value, bytes):
            raise ProtocolError("a message field that is not length-delimited")
        return wire_fields(field.value)

    out: dict[str, str] = {}
    try:
        for meta in wire_fields(options):
            if meta.number != FIELD_META:
                continue
            for part in message(meta):
                if part.number == 2:
                    kv = {f.number: f for f in message(part) if f.number in (1, 2)}
                    key, value = kv.get(1), kv.get(2)
                    if any(f is not None and f.wire != LEN for f in (key, value)):
                        raise ProtocolError("a param that is not a string")
                    out[_text(key)] = _text(value)
    except (ProtocolError, UnicodeDecodeError) as exc:
        raise DataError(f"ProtobufConverter: unreadable field options: {exc}") from None
    return out


def _text(field: WireField | None) -> str:
    if field is None:
        return ""
    assert isinstance(field.value, bytes)  # a LEN field's value
    return field.value.decode()


# ---- schemas ---------------------------------------------------------------------------------
def decimal_params(schema: Schema) -> dict[str, str]:
    """The field meta Confluent writes for a Decimal: its precision (if set) and scale."""
    params = schema.params
    out = {}
    if "connect.decimal.precision" in params:
        out["precision"] = params["connect.decimal.precision"]
    if "scale" in params:
        out["scale"] = params["scale"]
    return out


def logical_schema(message: str, params: dict[str, str]) -> Schema | None:
    """The Connect schema of a field of one of the logical messages (None: not one)."""
    name = _BY_MESSAGE.get(message)
    if name is None:
        return None
    parameters: tuple[tuple[str, str], ...] = ()
    if name == data.DECIMAL:
        parameters = (("scale", params.get("scale", "0")),)
        if "precision" in params:
            parameters = (("connect.decimal.precision", params["precision"]), *parameters)
    return Schema(_TYPES[name], optional=True, name=name, version=1, parameters=parameters)


# ---- values ----------------------------------------------------------------------------------
def set_value(target: Any, name: str, value: Any) -> None:
    """Fill the logical message `target` with a Connect value of logical type `name`."""
    if name == data.TIMESTAMP:
        aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
        micros = (aware - data.EPOCH) // dt.timedelta(microseconds=1)
        seconds, within = divmod(micros, 1_000_000)
        target.seconds, target.nanos = seconds, within * 1000
    elif name == data.DATE:
        target.year, target.month, target.day = value.year, value.month, value.day
    elif name == data.TIME:
        # Connect's Time has milliseconds; Confluent writes them as nanos
        target.hours, target.minutes, target.seconds = value.hour, value.minute, value.second
        target.nanos = value.microsecond // 1000 * 1_000_000
    else:
        target.value, target.precision, target.scale = decimal_parts(value)
    target.SetInParent()  # present even when every field is zero (midnight, the epoch)


def get_value(message: str, raw: Any) -> Any:
    """The Connect value of a logical message."""
    name = _BY_MESSAGE[message]
    try:
        if name == data.TIMESTAMP:
            return data.EPOCH + dt.timedelta(seconds=raw.seconds, microseconds=raw.nanos // 1000)
        if name == data.DATE:
            return dt.date(raw.year, raw.month, raw.day)
        if name == data.TIME:
            return dt.time(raw.hours, raw.minutes, raw.seconds,
                           raw.nanos // 1_000_000 * 1000)
    except (ValueError, OverflowError) as exc:
        raise DataError(f"ProtobufConverter: invalid {message}: {exc}") from None
    return from_decimal_parts(bytes(raw.value), int(raw.scale))


def decimal_parts(value: decimal.Decimal) -> tuple[bytes, int, int]:
    """(unscaled big-endian two's complement, precision, scale), as BigDecimal gives them."""
    sign, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        raise DataError(f"ProtobufConverter: {value} has no Decimal form")
    unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    # minimal, as BigInteger.toByteArray: 127 and -128 one byte, 128 two
    size = ((unscaled if unscaled >= 0 else ~unscaled).bit_length() + 8) // 8
    return unscaled.to_bytes(size, "big", signed=True), len(digits), -exponent


def from_decimal_parts(unscaled_bytes: bytes, scale: int) -> decimal.Decimal:
    unscaled = int.from_bytes(unscaled_bytes, "big", signed=True) if unscaled_bytes else 0
    digits = tuple(int(c) for c in str(abs(unscaled)))
    # built from its parts: exact whatever the digit count (no context rounds it)
    return decimal.Decimal((1 if unscaled < 0 else 0, digits, -scale))
