"""Issue 17, point 6: Spark pipelines read and write the Confluent wire format through a real
`odradek registry serve`. The fraud example joins orders with Avro payments that
confluent-kafka's AvroSerializer registered; batch queries read Protobuf and JSON written by
confluent-kafka's serializers and write Avro, Protobuf and JSON that its deserializers read."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from examples.fraud import generator, pipeline
from examples.fraud.schemas import PAYMENT_SCHEMA
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from odradek.spark.avro import AvroCodec
from odradek.spark.confluent_wire import JsonCodec, ProtobufCodec
from odradek.spark.registry_client import RegistryClient
from odradek.spark.serde import (
    parse_confluent_json,
    parse_protobuf,
    to_avro_value,
    to_confluent_json_value,
    to_protobuf_value,
)
from tests.integration.test_registry_api import running_registry
from tests.integration.test_registry_protobuf import order_class
from tests.spark.records import read_records, send
from tests.spark.support import create_topic, topic_name
from tests.spark.test_example_fraud import expected_flags
from tests.support.broker import BrokerProcess


def test_fraud_example_against_the_registry(spark: SparkSession, spark_broker: BrokerProcess,
                                            tmp_path: Path) -> None:
    b = spark_broker.bootstrap
    orders_topic = create_topic(b, topic_name("reg-orders"), 2)
    payments_topic = create_topic(b, topic_name("reg-payments"), 2)
    dst = create_topic(b, topic_name("reg-fraud-flags"), 1)
    orders, payments = generator.generate(60, seed=5)
    with running_registry(b, tmp_path) as reg:
        # The payments are written by confluent-kafka's serializer, which registers the schema.
        ser = AvroSerializer(SchemaRegistryClient({"url": reg.url}), json.dumps(PAYMENT_SCHEMA))
        ctx = SerializationContext(payments_topic, MessageField.VALUE)
        producer = Producer({"bootstrap.servers": b, "linger.ms": 5})
        for o in orders:
            producer.produce(orders_topic, value=generator.order_json(o), key=o.order_id.encode())
        for p in payments:
            producer.produce(payments_topic, key=p.order_id.encode(), value=ser(
                {"payment_id": p.payment_id, "order_id": p.order_id,
                 "amount_cents": p.amount_cents, "ts": p.ts}, ctx))
        assert producer.flush(30) == 0
        registered = reg.call("GET", f"/subjects/{payments_topic}-value/versions/latest")[1]
        query = pipeline.build(spark, b, orders_topic, payments_topic, dst, str(tmp_path / "cp"),
                               registry=RegistryClient.from_config(
                                   {"schema.registry.url": reg.url}),
                               trigger={"availableNow": True},
                               source_options={"maxOffsetsPerTrigger": "40"})
        try:
            query.awaitTermination(300)
            assert query.exception() is None, query.exception()
        finally:
            query.stop()
    assert "schemaType" not in registered and "Payment" in registered["schema"]  # Avro
    got: Counter[tuple] = Counter()
    for r in read_records(b, dst, 1):
        f = json.loads(r.value)
        got[(f["order_id"], f["user"], f["reason"], f["order_amount_cents"],
             f.get("paid_amount_cents"), f.get("payment_id"), f["order_ts"])] += 1
    assert got == expected_flags(orders, payments)


def test_protobuf_and_json_in_and_avro_out_in_batch(spark: SparkSession,
                                                    spark_broker: BrokerProcess,
                                                    tmp_path: Path) -> None:
    b = spark_broker.bootstrap
    ptopic = create_topic(b, topic_name("reg-proto"), 1)
    jtopic = create_topic(b, topic_name("reg-json"), 1)
    atopic = create_topic(b, topic_name("reg-avro"), 1)
    with running_registry(b, tmp_path) as reg:
        client = SchemaRegistryClient({"url": reg.url})
        registry = RegistryClient(reg.url)
        Order = order_class()
        pser = ProtobufSerializer(Order, client, {"use.deprecated.format": False})
        pctx = SerializationContext(ptopic, MessageField.VALUE)
        values = []
        for i in range(5):
            msg = Order(id=f"o{i}", tags=[f"t{i}"], status=i % 2)
            msg.total.currency, msg.total.cents = "EUR", i * 100
            values.append((None, pser(msg, pctx), 0))
        values.append((None, values[0][1][:6] + b"\xff\xff", 0))  # the right id, a bad body
        send(b, ptopic, values)
        schema = {"type": "object", "properties": {"sku": {"type": "string"},
                                                   "qty": {"type": "integer"}},
                  "required": ["sku"]}
        jser = JSONSerializer(json.dumps(schema), client)
        jctx = SerializationContext(jtopic, MessageField.VALUE)
        send(b, jtopic, [(None, jser({"sku": f"s{i}", "qty": i}, jctx), 0) for i in range(4)])

        def load(topic: str):  # type: ignore[no-untyped-def]
            return (spark.read.format("odradek").option("kafka.bootstrap.servers", b)
                    .option("subscribe", topic).load())

        pcodec = ProtobufCodec(registry, subject=f"{ptopic}-value")
        parsed = parse_protobuf(load(ptopic), pcodec, on_error="column")
        orders = parsed.orderBy("offset").collect()
        assert [(r.data.id, r.data.total.cents, r.data.status, list(r.data.tags))
                for r in orders[:5]] == [(f"o{i}", i * 100, ["NEW", "PAID"][i % 2], [f"t{i}"])
                                         for i in range(5)]
        assert orders[5].data is None and "invalid Protobuf body" in orders[5].error
        stock = parse_confluent_json(load(jtopic), JsonCodec(registry, subject=f"{jtopic}-value"))
        assert sorted((r.sku, r.qty) for r in stock.select("data.*").collect()) == [
            (f"s{i}", i) for i in range(4)]

        # Protobuf and JSON written back (latest schema / auto-registered), read by
        # confluent-kafka's deserializers.
        pout = create_topic(b, topic_name("reg-proto-out"), 1)
        to_protobuf_value(parsed.where("error IS NULL").select("data"), pcodec) \
            .write.format("odradek").option("kafka.bootstrap.servers", b) \
            .option("topic", pout).mode("append").save()
        pde = ProtobufDeserializer(Order, {"use.deprecated.format": False},
                                   schema_registry_client=client)
        again = sorted((m.id, m.total.cents, m.status) for m in (
            pde(r.value, pctx) for r in read_records(b, pout, 1)))
        assert again == [(f"o{i}", i * 100, i % 2) for i in range(5)]
        jout = create_topic(b, topic_name("reg-json-out"), 1)
        jcodec = JsonCodec(registry, json_schema=schema, subject=f"{jout}-value")
        to_confluent_json_value(stock.select("data"), jcodec) \
            .write.format("odradek").option("kafka.bootstrap.servers", b) \
            .option("topic", jout).mode("append").save()
        jde = JSONDeserializer(None, schema_registry_client=client)
        docs = sorted((d["sku"], d["qty"]) for d in (
            jde(r.value, SerializationContext(jout, MessageField.VALUE))
            for r in read_records(b, jout, 1)))
        assert docs == [(f"s{i}", i) for i in range(4)]

        # Written with the registry (auto-registered under the topic's subject), read back by
        # confluent-kafka's AvroDeserializer.
        item = {"type": "record", "name": "Item", "fields": [
            {"name": "id", "type": "int"}, {"name": "name", "type": "string"}]}
        codec = AvroCodec.from_config({"schema.registry.url": reg.url}, item,
                                      subject=f"{atopic}-value")
        rows = spark.createDataFrame([(i, f"n{i}") for i in range(6)], "id int, name string")
        to_avro_value(rows.select(F.struct("id", "name").alias("data")), codec) \
            .write.format("odradek").option("kafka.bootstrap.servers", b) \
            .option("topic", atopic).mode("append").save()
        de = AvroDeserializer(SchemaRegistryClient({"url": reg.url}))
        actx = SerializationContext(atopic, MessageField.VALUE)
        got = sorted((d["id"], d["name"]) for d in
                     (de(r.value, actx) for r in read_records(b, atopic, 1)))
        assert got == [(i, f"n{i}") for i in range(6)]
        assert reg.call("GET", f"/subjects/{atopic}-value/versions")[1] == [1]
