"""The log cleaner (compaction): offset map, segment rewriting and the crash-safe swap.

This package's `swap` module is imported by `storage.log` (recovery at open), so the
package itself imports nothing: use `odradek.storage.cleaner.log_cleaner` for the cleaner.
"""
