"""Kafka Connect's REST API and connector model, with connectors that run as Spark Structured
Streaming queries (`odradek connect serve`).

The state is Kafka Connect's own, in its record formats (`records`): connector and task
configs and target states in connect-configs, statuses in connect-status, source offsets in
connect-offsets; a sink's offsets in the group `connect-<name>` (`sink_offsets`).
`store.ConnectStore` reads the three topics on a thread into the sans-I/O views of `state`
and writes with acks=all; `herder.Herder` is the REST API's operations, `app` their HTTP
routes (starlette), `server.run` the process; `worker.Worker` runs each connector assigned
to it as one Spark query and writes its status and offsets. `group` is the worker's
membership in its `group.id` (JoinGroup/SyncGroup/Heartbeat over the native client),
`group_protocol` Connect's subprotocol bytes and the leader's assignor. `cluster` carries the
bootstrap and client security settings every client uses. `plugins`, `configdef` and
`catalog` declare and validate connector configs. The record path: `data` is Connect's
schemas and records, `converters` (and `avro_converter`) Kafka's and Confluent's converters,
`transforms/` the Single Message Transforms and predicates, `errant` errors.tolerance and
the dead letter queue; `sink_records` and `source_records` chain them for sinks and sources.
The connectors are in `connectors/` (FileStream, lake, JDBC sink).

Layering: connect imports only client and protocol. The Spark session (with the `odradek`
data source registered) is handed in by the command line, so nothing here imports
odradek.spark; the connectors name that source by its format name.

Not yet: incremental cooperative rebalancing, TimestampConverter, JSON Schema/Protobuf
converters, the JDBC and CDC sources, mirroring (see docs/connect.md).
"""
