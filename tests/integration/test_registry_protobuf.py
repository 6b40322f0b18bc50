"""Issue 17: Protobuf in the registry. confluent-kafka's ProtobufSerializer registers a schema
with a reference (an imported file) and a well-known import, its ProtobufDeserializer reads the
records back through a topic with the writer schema fetched as `format=serialized`; `.proto`
text registers, normalizes and is judged by Protobuf's wire rules."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, TopicPartition
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

from odradek.client import consumer, producer
from tests.integration.test_registry_api import RegistryProcess, running_registry
from tests.support.broker import BrokerProcess

F = descriptor_pb2.FieldDescriptorProto


@pytest.fixture
def registry(broker: BrokerProcess, tmp_path: Path) -> Iterator[RegistryProcess]:
    with running_registry(broker.bootstrap, tmp_path) as reg:
        yield reg


def _field(msg: Any, name: str, number: int, kind: int, type_name: str = "",
           label: int = F.LABEL_OPTIONAL) -> None:
    f = msg.field.add(name=name, number=number, type=kind, label=label)
    if type_name:
        f.type_name = type_name


def order_class() -> Any:
    """shop.Order (shop/order.proto) importing shop.Money (shop/money.proto) and Timestamp,
    built as descriptors: what protoc would generate, without protoc."""
    money = descriptor_pb2.FileDescriptorProto(name="shop/money.proto", package="shop",
                                               syntax="proto3")
    m = money.message_type.add(name="Money")
    _field(m, "currency", 1, F.TYPE_STRING)
    _field(m, "cents", 2, F.TYPE_INT64)
    order = descriptor_pb2.FileDescriptorProto(
        name="shop/order.proto", package="shop", syntax="proto3",
        dependency=["shop/money.proto", "google/protobuf/timestamp.proto"])
    o = order.message_type.add(name="Order")
    _field(o, "id", 1, F.TYPE_STRING)
    _field(o, "total", 2, F.TYPE_MESSAGE, ".shop.Money")
    _field(o, "placed", 3, F.TYPE_MESSAGE, ".google.protobuf.Timestamp")
    _field(o, "tags", 4, F.TYPE_STRING, label=F.LABEL_REPEATED)
    _field(o, "status", 5, F.TYPE_ENUM, ".shop.Order.Status")
    status = o.enum_type.add(name="Status")
    status.value.add(name="NEW", number=0)
    status.value.add(name="PAID", number=1)
    pool = descriptor_pool.DescriptorPool()
    ts = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(ts)
    for fdp in (ts, money, order):
        pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def test_protobuf_serde_round_trip_with_references(broker: BrokerProcess,
                                                   registry: RegistryProcess) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    Order = order_class()
    client = SchemaRegistryClient({"url": registry.url})
    ser = ProtobufSerializer(Order, client, {"use.deprecated.format": False})
    topic = "shop-orders"
    ctx = SerializationContext(topic, MessageField.VALUE)
    p = producer(broker.bootstrap, {"acks": "all"})
    sent = []
    for i in range(10):
        msg = Order(id=f"o{i}", tags=["a", f"t{i}"], status=i % 2)
        msg.total.currency, msg.total.cents = "EUR", 100 * i
        msg.placed.seconds = 1_700_000_000 + i
        sent.append(msg)
        p.produce(topic, value=ser(msg, ctx))
    assert p.flush(30) == 0

    # The imported file was registered as its own subject and is referenced by the order.
    assert registry.call("GET", "/subjects")[1] == ["shop-orders-value", "shop/money.proto"]
    status, latest = registry.call("GET", f"/subjects/{topic}-value/versions/latest")
    assert status == 200 and latest["schemaType"] == "PROTOBUF", latest
    assert latest["references"] == [{"name": "shop/money.proto", "subject": "shop/money.proto",
                                     "version": 1}]
    assert "message Order" in latest["schema"]  # stored as .proto text, not base64
    assert registry.call("GET", "/subjects/shop%2Fmoney.proto/versions/1/referencedby") == (
        200, [latest["id"]])
    # A referenced schema cannot be deleted while the order uses it.
    status, body = registry.call("DELETE", "/subjects/shop%2Fmoney.proto")
    assert (status, body["error_code"]) == (422, 42206), body
    # format=serialized gives the descriptor back, with its imports.
    _, serialized = registry.call("GET", f"/schemas/ids/{latest['id']}?format=serialized")
    fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized["schema"]))
    assert list(fdp.dependency) == ["shop/money.proto", "google/protobuf/timestamp.proto"]

    de = ProtobufDeserializer(Order, {"use.deprecated.format": False},
                              schema_registry_client=SchemaRegistryClient({"url": registry.url}))
    c = consumer(broker.bootstrap)
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = []
    while len(got) < len(sent):
        msg = c.poll(10)
        assert msg is not None and not msg.error()
        raw = msg.value()
        assert raw[0] == 0 and int.from_bytes(raw[1:5], "big") == latest["id"]
        got.append(de(raw, ctx))
    c.close()
    assert got == sent

    # The same schema as text, in another subject, gets the same id.
    status, body = registry.call("POST", "/subjects/copy/versions", {
        "schemaType": "PROTOBUF", "schema": latest["schema"], "references": latest["references"]})
    assert (status, body) == (200, {"id": latest["id"]})


V1 = """syntax = "proto3";
package t;
message User {
  string name = 1;
  int32 age = 2;
}
"""
V1_REORDERED = """syntax = "proto3"; package t;
message User { int32 age = 2; string name = 1; }"""
V2_RENAMED = V1.replace("int32 age", "int64 years")  # same wire group, new name: compatible
V3_BAD = V1.replace("int32 age", "string age")        # varint -> length-delimited: not


def test_proto_text_normalize_and_wire_rules(registry: RegistryProcess) -> None:
    def post(path: str, schema: str, **extra: Any) -> tuple[int, Any]:
        return registry.call("POST", path, {"schemaType": "PROTOBUF", "schema": schema, **extra})

    status, body = post("/subjects/u/versions", V1)
    assert status == 200, body
    first = body["id"]
    # Reordered fields are another schema unless normalized.
    assert post("/subjects/u", V1_REORDERED)[0] == 404
    assert post("/subjects/u?normalize=true", V1_REORDERED)[1]["id"] == first
    assert post("/subjects/u/versions?normalize=true", V1_REORDERED) == (200, {"id": first})
    assert registry.call("GET", "/subjects/u/versions")[1] == [1]
    # The normalize config key makes it the subject's default.
    assert registry.call("PUT", "/config/u", {"normalize": True}) == (200, {"normalize": True})
    assert registry.call("GET", "/config/u") == (
        200, {"compatibilityLevel": "BACKWARD", "normalize": True})
    assert post("/subjects/u", V1_REORDERED)[1]["id"] == first
    assert registry.call("DELETE", "/config/u")[0] == 200

    status, body = registry.call("POST", "/compatibility/subjects/u/versions/latest?verbose=true",
                                 {"schemaType": "PROTOBUF", "schema": V3_BAD})
    assert status == 200 and body["is_compatible"] is False
    assert any("wire type" in m for m in body["messages"]), body
    status, body = post("/subjects/u/versions", V3_BAD)
    assert (status, body["error_code"]) == (409, 409) and "age" in body["message"], body
    assert post("/subjects/u/versions", V2_RENAMED)[0] == 200
    assert registry.call("GET", "/subjects/u/versions")[1] == [1, 2]

    # Bad .proto text is 42201 and changes nothing.
    for bad in ["message {", 'syntax = "proto3"; message M { Missing m = 1; }',
                'syntax = "proto3"; import "nowhere.proto"; message M {}',
                "message M { int32 a = 1; int32 b = 1; }", "!!!!"]:
        status, body = post("/subjects/u/versions", bad)
        assert (status, body["error_code"]) == (422, 42201), (bad, body)
    assert registry.call("GET", "/subjects/u/versions")[1] == [1, 2]
    assert registry.call("GET", "/schemas/types")[1] == ["JSON", "PROTOBUF", "AVRO"]
    listing = registry.call("GET", "/schemas?subjectPrefix=u&latestOnly=true")[1]
    assert [(s["subject"], s["version"], s["schemaType"]) for s in listing] == [
        ("u", 2, "PROTOBUF")]
    assert registry.call("DELETE", "/subjects/u/versions/1") == (200, 1)
    assert registry.call("GET", "/subjects/u/versions?deletedOnly=true") == (200, [1])
