"""The cluster's state as a log of records, as in KRaft: `records` (TopicRecord, PartitionRecord,
RegisterBrokerRecord... the contents of `__cluster_metadata`), `quorum.Quorum` (makes them
durable and ordered; a commit is flushed before it is visible: `raft.kraft.KRaftQuorum`), `image.MetadataImage` (the
in-memory state replayed from them) and `controller.Controller` (decides topic creation,
replica placement, config changes, broker registration and writes them as records). `config/`
is Kafka's topic and broker config table (`config_def.ConfigDef`, `broker_configs.BrokerConfig`,
`topic_configs`, `describe`, `log_config` for storage's LogConfig, `java_properties`);
`meta_properties` reads and writes a log directory's `meta.properties`. `raft/` is the KRaft
quorum: a sans-I/O state machine (`RaftClient`), its file log and its asyncio driver."""
