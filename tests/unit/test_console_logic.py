"""Issue 18, point 4: the console's logic without a cluster: server-side search and pages,
parameter parsing, the lag history's persistence across a restart, record filters, decoding."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.console.decode import Decoder, plain
from odradek.console.groups import parse_timestamp_ms
from odradek.console.lag_history import LagHistory
from odradek.console.messages import Candidate, Filters, match
from odradek.console.paging import BadRequest, int_param, page_params, paginate
from odradek.console.protobuf_view import (
    decode_message,
    pick,
    protobuf_fields,
    top_messages,
    top_types,
    well_known,
)

NAMES = [f"topic-{i:04d}" for i in range(1000)]


def test_a_page_of_a_thousand_topics() -> None:
    p = paginate(NAMES, "", 3, 50)
    assert p.items == NAMES[100:150]
    assert (p.page, p.pages, p.total) == (3, 20, 1000)


def test_search_narrows_on_the_server_and_pages_the_hits() -> None:
    p = paginate(NAMES, "TOPIC-09", 1, 50)  # case-insensitive
    assert p.total == 100 and p.pages == 2 and p.items[0] == "topic-0900"
    assert paginate(NAMES, "09 5", 1, 50).total == len([n for n in NAMES if "09" in n and "5" in n])
    assert paginate(NAMES, "nothing", 1, 50).items == []


def test_a_page_past_the_end_is_the_last_page() -> None:
    p = paginate(NAMES[:120], "", 9, 50)
    assert p.page == 3 and p.items == NAMES[100:120]
    assert paginate([], "", 4, 50).page == 1


@given(st.lists(st.text(min_size=1, max_size=5), max_size=60, unique=True),
       st.integers(1, 10), st.integers(1, 20))
def test_pages_cover_every_hit_once(names: list[str], page: int, size: int) -> None:
    got: list[str] = []
    first = paginate(names, "", 1, size)
    for n in range(1, first.pages + 1):
        got += paginate(names, "", n, size).items
    assert got == names
    assert len(paginate(names, "", page, size).items) <= size


def test_bad_parameters_are_refused_with_a_message() -> None:
    with pytest.raises(BadRequest, match="page must be an integer"):
        page_params({"page": "x"})
    with pytest.raises(BadRequest, match="size must be between 1 and 500"):
        page_params({"size": "501"})
    with pytest.raises(BadRequest, match="longer than"):
        page_params({"q": "x" * 300})
    with pytest.raises(BadRequest, match="limit is required"):
        int_param({}, "limit", None, 1, 2)
    assert page_params({}) == ("", 1, 50)


def test_lag_history_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "lag.sqlite3"
    h = LagHistory(path)
    for i in range(5):
        h.record("g", 10 * i, {"t:0": 10 * i}, ts_ms=1_000_000 + i * 5000)
    h.record("other", 3, {"t:1": 3}, ts_ms=1_000_000)
    h.close()
    again = LagHistory(path)  # a console restart
    series = again.series("g")
    assert [s.total for s in series] == [0, 10, 20, 30, 40]
    assert series[-1].partitions == {"t:0": 40}
    assert [s.total for s in again.series("g", since_ms=1_010_000)] == [20, 30, 40]
    assert [s.total for s in again.series("g", limit=2)] == [30, 40]  # the newest, in order
    again.forget("g")
    assert again.series("g") == [] and len(again.series("other")) == 1
    again.close()


def test_lag_history_drops_samples_past_retention(tmp_path: Path) -> None:
    h = LagHistory(tmp_path / "lag.sqlite3", retention_s=60)
    h.record("g", 1, {}, ts_ms=0)
    h.record("g", 2, {}, ts_ms=30_000)
    h.record("g", 3, {}, ts_ms=90_000)  # the one at 0 is now older than 60 s
    assert [s.total for s in h.series("g")] == [2, 3]
    h.close()


def _rec(key: str, value: object, headers: list[tuple[str, str]]) -> Candidate:
    raw = value.encode() if isinstance(value, str) else json.dumps(value).encode()
    return Candidate(key.encode(), raw, [(n, v.encode()) for n, v in headers], Decoder(None))


def test_record_filters() -> None:
    r = _rec("user-7", {"order": {"id": 42, "items": [{"sku": "A1"}]}}, [("source", "web")])
    assert match(r, Filters(key="USER-7"))
    assert not match(r, Filters(key="user-8"))
    assert match(r, Filters(value="a1"))
    assert match(r, Filters(value='"id": 42'))  # the value's text as written
    assert match(r, Filters(header="source")) and match(r, Filters(header="source=web"))
    assert not match(r, Filters(header="source=app")) and not match(r, Filters(header="x"))
    assert match(r, Filters(json_path="order.id=42"))
    assert match(r, Filters(json_path="$.order.items[0].sku=A1"))
    assert match(r, Filters(json_path="order.items"))  # a path alone: it must exist
    assert not match(r, Filters(json_path="order.id=43"))
    assert not match(r, Filters(json_path="order.nothing"))
    assert not match(_rec("k", "plain text", []), Filters(json_path="a"))
    assert match(r, Filters(key="user", value="42", header="source=web"))  # all must hold
    assert not match(Candidate(None, None, [], Decoder(None)), Filters(value="x"))


def test_timestamps_in_ms_or_iso() -> None:
    assert parse_timestamp_ms("1700000000000") == 1_700_000_000_000
    assert parse_timestamp_ms("2023-11-14T22:13:20") == 1_700_000_000_000  # UTC by default
    assert parse_timestamp_ms("2023-11-14T23:13:20+01:00") == 1_700_000_000_000
    with pytest.raises(BadRequest, match="milliseconds or an ISO"):
        parse_timestamp_ms("yesterday")


def test_plain_decoding() -> None:
    assert plain(b'{"a": 1}') == {"format": "json", "value": {"a": 1}, "size": 8}
    assert plain(b"hello")["format"] == "text"
    assert plain(b"\xff\x00") == {"format": "binary", "value": "ff00", "size": 2, "cut": False}
    big = plain(b"x" * 100_000)
    assert big["cut"] and len(big["value"]) == 64 * 1024
    # no registry: the wire format's bytes are shown as they are
    assert Decoder(None).decode(b"\x00\x00\x00\x00\x01abc")["format"] == "binary"
    assert Decoder(None).decode(None)["format"] == "null"


def test_protobuf_fields_by_number() -> None:
    # field 1 varint 150, field 2 string "hi", field 3 a nested message {1: 1}
    body = b"\x08\x96\x01" + b"\x12\x02hi" + b"\x1a\x02\x08\x01" + b"\x25" + struct.pack("<i", -5)
    assert protobuf_fields(body) == [{"field": 1, "varint": 150}, {"field": 2, "string": "hi"},
                                     {"field": 3, "message": [{"field": 1, "varint": 1}]},
                                     {"field": 4, "fixed32": -5}]
    with pytest.raises(ValueError):
        protobuf_fields(b"\x12\x09short")


@given(st.binary(max_size=200))
def test_protobuf_fields_never_fail_otherwise_than_by_value_error(data: bytes) -> None:
    try:
        protobuf_fields(data)
    except ValueError:
        pass


PROTO = """
syntax = "proto3";
package shop;
message Other { string x = 1; }
message Order {
  string user = 1;
  sint64 delta = 2;
  repeated int32 qty = 3;
  Line line = 4;
  Kind kind = 5;
  double price = 6;
  oneof pay { string card = 7; bool cash = 8; }
  message Line { string sku = 1; uint32 n = 2; }
  enum Kind { A = 0; B = 1; }
}
"""


def test_protobuf_named_by_the_schema() -> None:
    # the bytes made by protobuf's own encoder, from a descriptor of the same .proto
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fd = descriptor_pb2.FileDescriptorProto(name="shop.proto", package="shop", syntax="proto3")
    other = fd.message_type.add(name="Other")
    other.field.add(name="x", number=1, type=9, label=1)
    order = fd.message_type.add(name="Order")
    line = order.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, type=9, label=1)
    line.field.add(name="n", number=2, type=13, label=1)
    kind = order.enum_type.add(name="Kind")
    kind.value.add(name="A", number=0)
    kind.value.add(name="B", number=1)
    order.oneof_decl.add(name="pay")
    for name, number, typ, label, type_name in (
            ("user", 1, 9, 1, ""), ("delta", 2, 18, 1, ""), ("qty", 3, 5, 3, ""),
            ("line", 4, 11, 1, ".shop.Order.Line"), ("kind", 5, 14, 1, ".shop.Order.Kind"),
            ("price", 6, 1, 1, ""), ("card", 7, 9, 1, ""), ("cash", 8, 8, 1, "")):
        f = order.field.add(name=name, number=number, type=typ, label=label)
        if type_name:
            f.type_name = type_name
        if name in ("card", "cash"):
            f.oneof_index = 0
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))
    msg = cls(user="ada", delta=-3, qty=[1, 2, 300], kind=1, price=2.5, cash=True)
    msg.line.sku = "A1"
    msg.line.n = 7
    top = top_messages(PROTO)
    got = decode_message(msg.SerializeToString(), pick(top, [1]), top)
    assert got == {"user": "ada", "delta": -3, "qty": [1, 2, 300],
                   "line": {"sku": "A1", "n": 7}, "kind": "B", "price": 2.5, "cash": True}
    assert pick(top, []).name == "Other" and pick(top, [1, 0]).name == "Line"
    with pytest.raises(ValueError):
        pick(top, [5])


def test_protobuf_types_from_imports_and_well_known_types_are_named() -> None:
    # shop.Order as confluent-kafka's serializer registers it: Money from a referenced
    # subject's file, Timestamp from google/protobuf (no subject), an enum by its name
    from tests.integration.test_registry_protobuf import order_class

    order = ('syntax = "proto3"; package shop; import "shop/money.proto"; '
             'import "google/protobuf/timestamp.proto"; message Order { string id = 1; '
             'Money total = 2; google.protobuf.Timestamp placed = 3; repeated string tags = 4; '
             'Status status = 5; enum Status { NEW = 0; PAID = 1; } }')
    money = 'syntax = "proto3"; package shop; message Money { string currency = 1; int64 cents = 2; }'
    msg = order_class()(id="o-1", tags=["a", "b"], status=1)
    msg.total.currency, msg.total.cents = "EUR", -5
    msg.placed.seconds, msg.placed.nanos = 1_700_000_000, 42
    top = top_messages(order)
    got = decode_message(msg.SerializeToString(), pick(top, [0]),
                         [*top, *top_types(money), *well_known()])
    assert got == {"id": "o-1", "total": {"currency": "EUR", "cents": -5},
                   "placed": {"seconds": 1_700_000_000, "nanos": 42}, "tags": ["a", "b"],
                   "status": "PAID"}
    # without the imported file, its message's fields stay by number (nothing invented)
    assert decode_message(msg.SerializeToString(), pick(top, [0]), top)["total"] == [
        {"field": 1, "string": "EUR"}, {"field": 2, "varint": (1 << 64) - 5}]


def test_quota_input_is_checked_before_anything_is_sent() -> None:
    from odradek.console import quotas

    assert quotas.entity_of([{"type": "User", "name": " alice "},
                             {"type": "client-id", "name": ""}]) == [("user", "alice"),
                                                                     ("client-id", None)]
    assert quotas.label([("user", "alice"), ("client-id", None)]) == \
        "user=alice, client-id=<default>"
    for raw, why in (([{"type": "group", "name": "g"}], "unknown entity type 'group'"),
                     ([], "entity must be a list"), ("user", "entity must be a list"),
                     ([{"type": "user"}, {"type": "user", "name": "b"}], "each type once"),
                     ([{"type": "ip", "name": "1.2.3.4"}, {"type": "user"}], "stands alone"),
                     ([{"type": "user", "name": 7}], "must be a string")):
        with pytest.raises(BadRequest, match=why):
            quotas.entity_of(raw)
    assert quotas.value_of("request_percentage", "12.5") == 12.5
    assert quotas.value_of("producer_byte_rate", 1024) == 1024
    for key, raw, why in (("producer_byte_rate", "-5", "positive number, got -5"),
                          ("consumer_byte_rate", "0", "positive"),
                          ("request_percentage", "nan", "positive"),
                          ("request_percentage", "inf", "positive"),
                          ("producer_byte_rate", "1.5", "whole number"),
                          ("producer_byte_rate", "lots", "must be a number")):
        with pytest.raises(BadRequest, match=why):
            quotas.value_of(key, raw)
    with pytest.raises(BadRequest, match="unknown quota 'speed'"):
        quotas.key_of("speed")
