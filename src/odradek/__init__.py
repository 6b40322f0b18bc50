"""odradek: an event streaming platform that speaks the Apache Kafka wire protocol. Packages,
lowest first (a package imports only those below it, ../shared/DESIGN.md): `protocol` (wire
format), `storage` (a partition's log on disk), `metadata` (KRaft log, image, controller,
configs), `replication` (the partitions this node hosts), `coordinator` (group and transaction
coordinators), `security` (reserved), `broker` (server, handlers, one node). Beside them, over
the Kafka protocol: `client` (clients and perf tools), `spark` (PySpark source, sink and
pipelines); on top, `cli` (the `odradek` command). Start at `broker.node.run_node`."""

__version__ = "0.1.0"
