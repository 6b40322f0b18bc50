"""The fraud example's record types: orders as JSON, payments as Avro in the Confluent wire format."""

from __future__ import annotations

from odradek.spark.avro import AvroCodec, LocalRegistry, SchemaRegistry

ORDER_SCHEMA = "order_id STRING, user STRING, amount_cents BIGINT, ts TIMESTAMP"

PAYMENT_SCHEMA = {
    "type": "record", "name": "Payment", "namespace": "odradek.examples.fraud",
    "fields": [
        {"name": "payment_id", "type": "string"},
        {"name": "order_id", "type": "string"},
        {"name": "amount_cents", "type": "long"},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}
PAYMENT_SCHEMA_ID = 1


def local_registry() -> LocalRegistry:
    """Until the Schema Registry runs, producer and pipeline agree on ids through this."""
    return LocalRegistry({PAYMENT_SCHEMA_ID: PAYMENT_SCHEMA})


def payment_codec(registry: SchemaRegistry | None = None) -> AvroCodec:
    return AvroCodec(registry or local_registry(), PAYMENT_SCHEMA, subject="payments-value")
