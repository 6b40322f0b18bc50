"""The cluster's state as a log of records, as in KRaft: `records` (TopicRecord, PartitionRecord,
RegisterBrokerRecord... the contents of `__cluster_metadata`), `quorum.MetadataQuorum` (makes
them durable and ordered; a commit is flushed before it is visible), `image.MetadataImage` (the
in-memory state replayed from them) and `controller.Controller` (decides topic creation,
replica placement, config changes, broker registration and writes them as records). `configs`
is Kafka's topic and broker config table (ConfigDef, BrokerConfig, validation, synonyms);
`properties` reads and writes a log directory's `meta.properties`."""
