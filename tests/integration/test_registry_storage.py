"""Issue 17: `_schemas` holds Confluent's record format both ways, and confluent-kafka's Avro
serdes round-trip records through a topic with ids from the registry."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from odradek.client import consumer, producer
from tests.integration.test_registry_api import (
    USER_V1,
    USER_V2,
    RegistryProcess,
    running_registry,
)
from tests.support.broker import BrokerProcess


@pytest.fixture
def registry(broker: BrokerProcess, tmp_path: Path) -> Iterator[RegistryProcess]:
    with running_registry(broker.bootstrap, tmp_path) as reg:
        yield reg


def read_schemas_topic(bootstrap: str) -> list[tuple[dict[str, object], object]]:
    c = consumer(bootstrap)
    tp = TopicPartition("_schemas", 0)
    _, end = c.get_watermark_offsets(tp, timeout=30)
    c.assign([TopicPartition("_schemas", 0, OFFSET_BEGINNING)])
    out: list[tuple[dict[str, object], object]] = []
    position = 0
    while position < end:
        msg = c.poll(10)
        assert msg is not None, "_schemas did not deliver its records"
        assert not msg.error(), msg.error()
        out.append((json.loads(msg.key()), None if msg.value() is None else json.loads(msg.value())))
        position = msg.offset() + 1
    c.close()
    return out


def test_records_are_confluents_format(broker: BrokerProcess, tmp_path: Path) -> None:
    with running_registry(broker.bootstrap, tmp_path) as reg:
        first = reg.call("POST", "/subjects/u/versions", {"schema": USER_V1})[1]["id"]
        reg.call("PUT", "/config/u", {"compatibility": "FULL"})
        reg.call("DELETE", "/subjects/u/versions/1")
    got = read_schemas_topic(broker.bootstrap)
    assert got[0] == ({"keytype": "SCHEMA", "subject": "u", "version": 1, "magic": 1},
                      {"subject": "u", "version": 1, "id": first, "schema": USER_V1,
                       "deleted": False})
    assert got[1] == ({"keytype": "CONFIG", "subject": "u", "magic": 0},
                      {"compatibilityLevel": "FULL"})
    assert got[2][0] == {"keytype": "SCHEMA", "subject": "u", "version": 1, "magic": 1}
    assert got[2][1]["deleted"] is True  # type: ignore[index]


def test_reads_a_topic_written_in_confluents_format(broker: BrokerProcess,
                                                    tmp_path: Path) -> None:
    """Records as Confluent's registry writes them (including a NOOP, a global CONFIG, a
    DELETE_SUBJECT and a tombstone), produced by the test before any registry runs."""
    json_schema = json.dumps({"type": "object", "properties": {"a": {"type": "string"}}})
    recs = [
        ({"keytype": "NOOP", "magic": 0}, None),
        ({"keytype": "CONFIG", "subject": None, "magic": 0}, {"compatibilityLevel": "FULL"}),
        ({"keytype": "SCHEMA", "subject": "orders-value", "version": 1, "magic": 1},
         {"subject": "orders-value", "version": 1, "id": 7, "schema": USER_V1,
          "deleted": False}),
        ({"keytype": "SCHEMA", "subject": "orders-value", "version": 2, "magic": 1},
         {"subject": "orders-value", "version": 2, "id": 9, "schema": USER_V2,
          "deleted": False}),
        ({"keytype": "SCHEMA", "subject": "docs-value", "version": 1, "magic": 1},
         {"subject": "docs-value", "version": 1, "id": 12, "schema": json_schema,
          "schemaType": "JSON", "deleted": False}),
        ({"keytype": "SCHEMA", "subject": "gone", "version": 1, "magic": 1},
         {"subject": "gone", "version": 1, "id": 7, "schema": USER_V1, "deleted": False}),
        ({"keytype": "DELETE_SUBJECT", "subject": "gone", "magic": 0},
         {"subject": "gone", "version": 1}),
        ({"keytype": "SCHEMA", "subject": "purged", "version": 1, "magic": 1},
         {"subject": "purged", "version": 1, "id": 7, "schema": USER_V1, "deleted": True}),
        ({"keytype": "SCHEMA", "subject": "purged", "version": 1, "magic": 1}, None),
    ]
    p = producer(broker.bootstrap, {"acks": "all"})
    for key, value in recs:
        p.produce("_schemas", key=json.dumps(key),
                  value=None if value is None else json.dumps(value), partition=0)
    assert p.flush(30) == 0
    with running_registry(broker.bootstrap, tmp_path) as reg:
        assert reg.call("GET", "/subjects") == (200, ["docs-value", "orders-value"])
        assert reg.call("GET", "/subjects?deleted=true") == (
            200, ["docs-value", "gone", "orders-value"])
        assert reg.call("GET", "/config") == (200, {"compatibilityLevel": "FULL"})
        assert reg.call("GET", "/subjects/orders-value/versions/latest")[1]["id"] == 9
        assert reg.call("GET", "/schemas/ids/12")[1] == {"schema": json_schema,
                                                         "schemaType": "JSON"}
        assert reg.call("GET", "/schemas/ids/7/subjects?deleted=true") == (
            200, ["gone", "orders-value"])
        # The same schema registered in a new subject keeps the id the topic gave it, and a
        # new schema gets the next id after the highest one read.
        assert reg.call("POST", "/subjects/copy/versions", {"schema": USER_V2})[1]["id"] == 9
        new = json.dumps({"type": "record", "name": "N", "fields": []})
        assert reg.call("POST", "/subjects/new/versions", {"schema": new})[1]["id"] == 13


def test_avro_serde_round_trip(broker: BrokerProcess, registry: RegistryProcess) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = SchemaRegistryClient({"url": registry.url})
    ser = AvroSerializer(client, USER_V2)
    topic = "users"
    p = producer(broker.bootstrap, {"acks": "all"})
    sent = [{"name": f"n{i}", "age": i} for i in range(20)]
    for value in sent:
        p.produce(topic, value=ser(value, SerializationContext(topic, MessageField.VALUE)))
    assert p.flush(30) == 0
    registered = client.get_latest_version(f"{topic}-value")
    assert registered.version == 1

    # A fresh client (no cache) reads the ids back from the registry.
    de = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))
    c = consumer(broker.bootstrap)
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = []
    while len(got) < len(sent):
        msg = c.poll(10)
        assert msg is not None and not msg.error()
        raw = msg.value()
        assert raw[0] == 0 and int.from_bytes(raw[1:5], "big") == registered.schema_id
        got.append(de(raw, SerializationContext(topic, MessageField.VALUE)))
    c.close()
    assert got == sent


def test_concurrent_registers_get_distinct_stable_ids(registry: RegistryProcess) -> None:
    results: dict[int, int] = {}

    def register(i: int) -> None:
        schema = json.dumps({"type": "record", "name": f"R{i}", "fields": []})
        status, body = registry.call("POST", f"/subjects/c{i % 3}/versions?normalize=false",
                                     {"schema": schema})
        assert status == 200, body
        results[i] = body["id"]

    # Names differ, so FULL/BACKWARD would refuse a change of record name: use NONE.
    registry.call("PUT", "/config", {"compatibility": "NONE"})
    threads = [threading.Thread(target=register, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results.values()) == list(range(1, 13))
    for i, schema_id in results.items():
        _, body = registry.call("GET", f"/schemas/ids/{schema_id}")
        assert json.loads(body["schema"])["name"] == f"R{i}"


def test_json_serde_round_trip_and_json_compatibility(broker: BrokerProcess,
                                                      registry: RegistryProcess) -> None:
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    schema = json.dumps({"type": "object", "properties": {"sku": {"type": "string"},
                                                          "qty": {"type": "integer"}},
                         "required": ["sku"]})
    client = SchemaRegistryClient({"url": registry.url})
    ser = JSONSerializer(schema, client)
    topic = "orders"
    ctx = SerializationContext(topic, MessageField.VALUE)
    p = producer(broker.bootstrap, {"acks": "all"})
    sent = [{"sku": f"s{i}", "qty": i} for i in range(10)]
    for value in sent:
        p.produce(topic, value=ser(value, ctx))
    assert p.flush(30) == 0
    de = JSONDeserializer(None, schema_registry_client=SchemaRegistryClient({"url": registry.url}))
    c = consumer(broker.bootstrap)
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = []
    while len(got) < len(sent):
        msg = c.poll(10)
        assert msg is not None and not msg.error()
        got.append(de(msg.value(), ctx))
    c.close()
    assert got == sent
    registered = client.get_latest_version(f"{topic}-value")
    assert registered.schema.schema_type == "JSON"

    # BACKWARD: requiring a new property is refused (409); widening qty is accepted.
    narrower = json.loads(schema)
    narrower["required"] = ["sku", "qty"]
    status, body = registry.call("POST", f"/subjects/{topic}-value/versions",
                                 {"schema": json.dumps(narrower), "schemaType": "JSON"})
    assert (status, body["error_code"]) == (409, 409), body
    wider = json.loads(schema)
    wider["properties"]["qty"] = {"type": "number"}
    assert client.register_schema(f"{topic}-value", Schema(json.dumps(wider), "JSON")) \
        != registered.schema_id
