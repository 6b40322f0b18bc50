"""The log cleaner (compaction of `cleanup.policy=compact` logs): `log_cleaner.LogCleaner` runs
passes in a background thread (CleanerConfig, LogToClean), `offset_map.OffsetMap` keeps the
latest offset per key in a fixed block of memory, and `swap` names the files of the crash-safe
segment swap and recovers them at log open (`recover_swaps`). `storage.log` imports `swap` at
open, so this package itself imports nothing: import `odradek.storage.cleaner.log_cleaner`."""
