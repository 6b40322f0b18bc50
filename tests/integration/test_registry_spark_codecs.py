"""Issue 17, point 6: the Spark serde's codecs against a real registry, without Spark.
confluent-kafka's own serializers write Avro, JSON and Protobuf through `odradek registry`;
odradek.spark's codecs read them by schema id, and AvroCodec writes with Confluent's
`auto.register.schemas` and `use.latest.version` semantics, read back by AvroDeserializer."""

from __future__ import annotations

import datetime
import json
import pickle
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.serialization import MessageField, SerializationContext

from odradek.spark.avro import AvroCodec, DecodeError, frame
from odradek.spark.confluent_wire import JsonCodec, ProtobufCodec
from odradek.spark.registry_client import RegistryClient, RegistryRefused
from tests.integration.test_registry_api import RegistryProcess, running_registry
from tests.integration.test_registry_protobuf import order_class
from tests.support.broker import BrokerProcess

ITEM_V1 = {"type": "record", "name": "Item", "namespace": "t", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": "string"}]}
ITEM_V2 = {"type": "record", "name": "Item", "namespace": "t", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": "string"},
    {"name": "price", "type": "double", "default": 0.0}]}


@pytest.fixture
def registry(broker: BrokerProcess, tmp_path: Path) -> Iterator[RegistryProcess]:
    with running_registry(broker.bootstrap, tmp_path) as reg:
        yield reg


def test_avro_codec_settings(registry: RegistryProcess) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer

    ctx = SerializationContext("items", MessageField.VALUE)
    conf = {"schema.registry.url": registry.url}
    # auto.register.schemas=false: an unregistered schema cannot be written.
    strict = AvroCodec.from_config({**conf, "auto.register.schemas": "false"}, ITEM_V1,
                                   subject="items-value")
    with pytest.raises(RegistryRefused) as info:
        strict.encode({"id": 1, "name": "a"})
    assert info.value.code == 40401
    # The default registers; the codec travels pickled, as to a Spark worker.
    codec = pickle.loads(pickle.dumps(AvroCodec.from_config(conf, ITEM_V1,
                                                            subject="items-value")))
    first = codec.encode({"id": 1, "name": "a"})
    assert first[:5] == frame(1, b"")
    assert strict.encode({"id": 2, "name": "b"})[:5] == frame(1, b"")  # now it is registered
    de = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))
    assert de(first, ctx) == {"id": 1, "name": "a"}

    # confluent-kafka writes v2; the v1 reader resolves it; use.latest.version writes with v2.
    ser = AvroSerializer(SchemaRegistryClient({"url": registry.url}), json.dumps(ITEM_V2))
    v2_bytes = ser({"id": 3, "name": "c", "price": 1.5}, ctx)
    assert codec.decode(v2_bytes) == {"id": 3, "name": "c"}
    latest = AvroCodec.from_config({**conf, "use.latest.version": True}, subject="items-value")
    assert latest.schema == ITEM_V2
    written = pickle.loads(pickle.dumps(latest)).encode({"id": 4, "name": "d", "price": 2.0})
    assert written[:5] == frame(2, b"")
    assert de(written, ctx) == {"id": 4, "name": "d", "price": 2.0}
    # An id the registry does not have is a DecodeError (a bad record), not a crash.
    with pytest.raises(DecodeError, match="unknown schema id 99"):
        codec.decode(frame(99, b"\x02"))


def test_json_and_protobuf_codecs_read_confluents_serializers(registry: RegistryProcess) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    client = SchemaRegistryClient({"url": registry.url})
    rc = RegistryClient(registry.url)

    schema = {"type": "object", "properties": {
        "sku": {"type": "string"}, "qty": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "dims": {"type": "object", "properties": {"w": {"type": "number"}}}},
        "required": ["sku"]}
    ctx = SerializationContext("stock", MessageField.VALUE)
    ser = JSONSerializer(json.dumps(schema), client)
    doc = {"sku": "s1", "qty": 3, "tags": ["a"], "dims": {"w": 1.5}}
    data = ser(doc, ctx)
    codec = pickle.loads(pickle.dumps(JsonCodec(rc, subject="stock-value")))
    assert [f.name for f in codec.spark_type.fields] == ["sku", "qty", "tags", "dims"]
    assert codec.decode(data) == doc
    assert codec.decode(data[:5] + b'{"sku": "s2"}') == {"sku": "s2", "qty": None, "tags": None,
                                                          "dims": None}
    # Writing: auto.register.schemas finds the registered id; a new schema gets a new one.
    writer = JsonCodec(rc, json_schema=schema, subject="stock-value")
    assert writer.schema_id() == int.from_bytes(data[1:5], "big")
    assert [f.name for f in writer.spark_type.fields] == ["sku", "qty", "tags", "dims"]
    strict = JsonCodec(rc, json_schema={**schema, "title": "new"}, subject="stock-value",
                       auto_register=False)
    with pytest.raises(RegistryRefused):
        strict.schema_id()
    for bad, needle in [(data[:5] + b'{"qty": 1}', "'sku' is a required property"),
                        (data[:5] + b"[1]", "not an object"), (data[:5] + b"{", "not JSON"),
                        (b"\x01" + data[1:], "magic byte"), (frame(77, b"{}"), "40403")]:
        with pytest.raises(DecodeError, match=needle):
            codec.decode(bad)

    Order = order_class()
    pser = ProtobufSerializer(Order, client, {"use.deprecated.format": False})
    octx = SerializationContext("orders", MessageField.VALUE)
    msg = Order(id="o1", tags=["x", "y"], status=1)
    msg.total.currency, msg.total.cents = "EUR", 250
    msg.placed.seconds = 1_700_000_000
    raw = pser(msg, octx)
    pcodec = pickle.loads(pickle.dumps(ProtobufCodec(rc, subject="orders-value")))
    assert pcodec.message == "shop.Order"
    assert [f.name for f in pcodec.spark_type.fields] == ["id", "total", "placed", "tags",
                                                          "status"]
    assert pcodec.decode(raw) == {
        "id": "o1", "total": {"currency": "EUR", "cents": 250},
        "placed": datetime.datetime(2023, 11, 14, 22, 13, 20, tzinfo=datetime.UTC),
        "tags": ["x", "y"], "status": "PAID"}
    empty = pser(Order(), octx)
    assert pcodec.decode(empty) == {"id": "", "total": None, "placed": None, "tags": [],
                                    "status": "NEW"}
    # Written back by the codec (the latest schema's id), read by ProtobufDeserializer.
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer

    written = pcodec.encode(pcodec.decode(raw))
    assert written == raw
    de = ProtobufDeserializer(Order, {"use.deprecated.format": False},
                              schema_registry_client=SchemaRegistryClient({"url": registry.url}))
    assert de(written, octx) == msg
    for bad, needle in [(raw[:6] + b"\xff\xff\xff", "invalid Protobuf body"),
                        (raw[:5] + b"\x02\x0a", "message index"),
                        (raw[:5], "message indexes: truncated varint")]:
        with pytest.raises(DecodeError, match=needle):
            pcodec.decode(bad)
