"""A partition's log on disk, in Kafka's layout; plain files only, no sockets, no asyncio
(callers move blocking work off the event loop). `log.Log` is one partition (append, read,
truncate, retention) over `segment.Segment` files with `index` (OffsetIndex, TimeIndex) and
`txn_index`; `recovery` loads and repairs its segments at open (`LogDamaged` below a protected
offset); `log_validator.validate_records` is Kafka's LogValidator for produced batches (no record
decoded, no copy). Beside them: `epochs.LeaderEpochCache`, `producer_state`
(ProducerStateManager: idempotence, open transactions), `config.LogConfig` (typed values only),
`checkpoints`. `log_manager.LogManager` holds every log of the node's log directories (JBOD:
`log_placement` picks a new log's directory) and their checkpoints, and the `-future` logs of
replicas moving between directories (`log_move`: the move's decisions, sans-I/O);
`dir_lock.acquire_data_dir_lock` makes a data directory one process's;
`log_dir_failure.LogDirFailureChannel` takes a failing directory offline. Compaction: `cleaner`
(`log_cleaner.LogCleaner`, `offset_map`, `swap`, and `batches` to rebuild cleaned batches)."""
