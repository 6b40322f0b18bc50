"""A Confluent-compatible Schema Registry: a REST service that keeps its state in `_schemas`.

It talks to the broker over the Kafka protocol like any client (layering: client, protocol).
"""
