"""A partition's log on disk, in Kafka's layout; plain files only, no sockets, no asyncio
(callers move blocking work off the event loop). `log.Log` is one partition (append, read,
truncate, recovery, retention) over `segment.Segment` files with `index` (OffsetIndex,
TimeIndex) and `txn_index`; beside it `epochs.LeaderEpochCache`, `producer_state`
(ProducerStateManager: idempotence, open transactions), `config.LogConfig`, `checkpoints`.
`log_manager.LogManager` holds every log of a data directory and its checkpoints;
`log_dir_failure.LogDirFailureChannel` takes a failing directory offline. Compaction: `cleaner`."""
