"""Issue 19: Confluent's JsonSchemaConverter and ProtobufConverter against a real registry
(`odradek registry serve` on a real node): a record written by the converter registers its
schema under `<topic>-value`, goes through a topic, reads back through the converter as the
same Connect data, and decodes with confluent-kafka's own JSONDeserializer and
ProtobufDeserializer (which validate against, and parse by, the schema the registry holds).
The converters run here in the test process: what the Connect worker runs per record."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from odradek.client import consumer, producer
from odradek.connect import converters, data
from odradek.connect.data import DataError, Schema
from tests.integration.test_registry_api import RegistryProcess, running_registry
from tests.support.broker import BrokerProcess

ROW = data.struct([
    ("id", Schema("INT32")),
    ("name", Schema("STRING", optional=True)),
    ("tags", Schema("ARRAY", value_schema=Schema("STRING"))),
    ("attrs", Schema("MAP", key_schema=Schema("STRING"), value_schema=Schema("INT64"))),
    ("at", Schema("INT64", name=data.TIMESTAMP, version=1, optional=True)),
    ("inner", data.struct([("x", Schema("FLOAT64"))], name="Inner", optional=True)),
], name="shop.Row")
VALUES = [{"id": i, "name": f"n{i}", "tags": ["a", f"t{i}"], "attrs": {"k": i},
           "at": dt.datetime(2024, 1, 1, 0, 0, i, tzinfo=dt.UTC),
           "inner": {"x": i + 0.5} if i % 2 else None} for i in range(4)]


@pytest.fixture(scope="module")
def registry(shared_broker: BrokerProcess,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryProcess]:
    with running_registry(shared_broker.bootstrap,
                          tmp_path_factory.mktemp("connect-converters")) as reg:
        yield reg


def through_topic(bootstrap: str, topic: str, values: list[bytes | None]) -> list[bytes]:
    p = producer(bootstrap, {"acks": "all"})
    for value in values:
        p.produce(topic, value=value)
    assert p.flush(30) == 0
    c = consumer(bootstrap)
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got: list[bytes] = []
    try:
        while len(got) < len(values):
            msg = c.poll(10)
            assert msg is not None, f"{topic}: {len(got)} of {len(values)} records"
            assert not msg.error(), msg.error()
            got.append(msg.value())
    finally:
        c.close()
    return got


def convert(name: str, registry: RegistryProcess) -> Any:
    return converters.resolve("value.converter", {
        "value.converter": name, "value.converter.schema.registry.url": registry.url})


def test_json_schema_converter_round_trip_and_confluent_reads_it(
        shared_broker: BrokerProcess, registry: RegistryProcess) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    conv = convert(converters.JSON_SCHEMA, registry)
    topic = "conv-json"
    raw = through_topic(shared_broker.bootstrap, topic,
                        [conv.from_connect(topic, ROW, v) for v in VALUES])
    assert [conv.to_connect(topic, r) for r in raw] == [(ROW, v) for v in VALUES]
    status, latest = registry.call("GET", f"/subjects/{topic}-value/versions/latest")
    assert status == 200 and latest["schemaType"] == "JSON"
    assert all(int.from_bytes(r[1:5], "big") == latest["id"] for r in raw)
    assert json.loads(latest["schema"])["title"] == "shop.Row"

    # A second converter (a worker restarted) reads by the id alone.
    fresh = convert(converters.JSON_SCHEMA, registry)
    assert fresh.to_connect(topic, raw[1]) == (ROW, VALUES[1])

    de = JSONDeserializer(None, schema_registry_client=SchemaRegistryClient(
        {"url": registry.url}))
    ctx = SerializationContext(topic, MessageField.VALUE)
    decoded = [de(r, ctx) for r in raw]
    assert decoded[1] == {"id": 1, "name": "n1", "tags": ["a", "t1"], "attrs": {"k": 1},
                          "at": 1_704_067_201_000, "inner": {"x": 1.5}}
    assert decoded[0]["inner"] is None
    # and confluent-kafka's JSONSerializer's bytes read through the converter
    with pytest.raises(DataError, match="Unknown magic byte"):
        conv.to_connect(topic, b'{"id": 1}')


def test_protobuf_converter_round_trip_and_confluent_reads_it(
        shared_broker: BrokerProcess, registry: RegistryProcess) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    conv = convert(converters.PROTOBUF, registry)
    topic = "conv-proto"
    raw = through_topic(shared_broker.bootstrap, topic,
                        [conv.from_connect(topic, ROW, v) for v in VALUES])
    status, latest = registry.call("GET", f"/subjects/{topic}-value/versions/latest")
    assert status == 200 and latest["schemaType"] == "PROTOBUF"
    assert "message Row" in latest["schema"] and "package shop;" in latest["schema"]
    assert all(r[:6] == b"\x00" + latest["id"].to_bytes(4, "big") + b"\x00" for r in raw)

    # Read back: Confluent's reader makes every field optional, and proto3 has no null
    # scalars; the values are the same.
    schema, value = convert(converters.PROTOBUF, registry).to_connect(topic, raw[1])
    assert schema.name == "Row" and all(f.schema.optional for f in schema.fields)
    assert value == VALUES[1]
    assert conv.to_connect(topic, raw[0])[1]["inner"] is None

    cls, _ = conv.message_class(ROW)
    de = ProtobufDeserializer(cls, {"use.deprecated.format": False},
                              schema_registry_client=SchemaRegistryClient({"url": registry.url}))
    ctx = SerializationContext(topic, MessageField.VALUE)
    msg = de(raw[1], ctx)
    assert (msg.id, msg.name, list(msg.tags), dict(msg.attrs)) == (1, "n1", ["a", "t1"],
                                                                   {"k": 1})
    assert (msg.at.seconds, msg.inner.x) == (1_704_067_201, 1.5)
    assert not de(raw[0], ctx).HasField("inner")

    # What confluent-kafka's ProtobufSerializer writes, the converter reads.
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    ser = ProtobufSerializer(cls, SchemaRegistryClient({"url": registry.url}),
                             {"use.deprecated.format": False})
    theirs = cls(id=9, name="z")
    theirs.tags.append("q")
    got = conv.to_connect("conv-proto-theirs", ser(theirs, SerializationContext(
        "conv-proto-theirs", MessageField.VALUE)))[1]
    assert (got["id"], got["name"], got["tags"], got["at"]) == (9, "z", ["q"], None)


LOGICAL = data.struct([
    ("day", Schema("INT32", name=data.DATE, version=1)),
    ("at", Schema("INT32", name=data.TIME, version=1)),
    ("when", Schema("INT64", name=data.TIMESTAMP, version=1)),
    ("price", Schema("BYTES", name=data.DECIMAL, version=1,
                     parameters=(("connect.decimal.precision", "10"), ("scale", "2")))),
], name="shop.Priced")


def test_protobuf_logical_types_through_the_registry_and_confluents_reader(
        shared_broker: BrokerProcess, registry: RegistryProcess) -> None:
    import decimal

    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.confluent.type.decimal_utils import from_proto_decimal
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    conv = convert(converters.PROTOBUF, registry)
    topic = "conv-proto-logical"
    values = [{"day": dt.date(2024, 2, 29), "at": dt.time(13, 5, 7, 250_000),
               "when": dt.datetime(2024, 1, 1, 0, 0, 1, 5, tzinfo=dt.UTC),
               "price": decimal.Decimal("-1234.50")},
              {"day": dt.date(1970, 1, 1), "at": dt.time(0, 0), "when": data.EPOCH,
               "price": decimal.Decimal("0.00")}]
    raw = through_topic(shared_broker.bootstrap, topic,
                        [conv.from_connect(topic, LOGICAL, v) for v in values])

    # The imports are subjects of their own, referenced by the record's schema.
    status, latest = registry.call("GET", f"/subjects/{topic}-value/versions/latest")
    assert status == 200 and latest["schemaType"] == "PROTOBUF"
    assert {r["name"] for r in latest["references"]} == {
        "google/type/date.proto", "google/type/timeofday.proto",
        "confluent/type/decimal.proto", "confluent/meta.proto"}

    # A fresh converter reads the schema and the values back from the registry by id.
    schema, value = convert(converters.PROTOBUF, registry).to_connect(topic, raw[0])
    assert value == values[0]
    # (The Decimal's scale and precision field meta are the converter's own round trip,
    # tests/unit/connect/test_protobuf_types.py: odradek's registry keeps only standard
    # options of a stored file, so the schema read back here says scale 0; the value keeps
    # its own scale in the message.)
    price = schema.field("price")
    assert price is not None and price.schema.name == data.DECIMAL
    assert convert(converters.PROTOBUF, registry).to_connect(topic, raw[1])[1] == values[1]

    # confluent-kafka's reader parses them by the registry's schema: Confluent's own types.
    cls, _ = conv.message_class(LOGICAL)
    de = ProtobufDeserializer(cls, {"use.deprecated.format": False},
                              schema_registry_client=SchemaRegistryClient({"url": registry.url}))
    msg = de(raw[0], SerializationContext(topic, MessageField.VALUE))
    assert (msg.day.year, msg.day.month, msg.day.day) == (2024, 2, 29)
    assert (msg.at.hours, msg.at.minutes, msg.at.seconds, msg.at.nanos) == (13, 5, 7, 250_000_000)
    assert (msg.when.seconds, msg.when.nanos) == (1_704_067_201, 5_000)
    assert from_proto_decimal(msg.price) == decimal.Decimal("-1234.50")
