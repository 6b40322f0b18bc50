"""A Confluent-compatible Schema Registry: a REST service that keeps its state in `_schemas`.

It talks to the broker over the Kafka protocol like any client (layering: client, protocol).
`server.run` serves `app.build_app` (starlette on uvicorn; `odradek registry serve`);
`store.KafkaStore` reads `_schemas` on a thread and writes with acks=all; `state.RegistryState`
is the sans-I/O view built from the records (`records`: Confluent's keys and values);
`schemas`, `compat`, `avro_compat`, `json_compat`, `protobuf` (with `protobuf_text` and
`protobuf_compat`) parse schemas and judge compatibility; `election.Election` picks the one
writer through a consumer group.

Not yet: contexts (`:.ctx:subject` is taken as a plain subject name), and starting the registry
inside `odradek serve` (`schema.registry.listeners`).
"""
