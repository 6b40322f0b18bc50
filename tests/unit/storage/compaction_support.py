"""Helpers for the log cleaner tests: keyed appends and a model of what compaction keeps."""

from __future__ import annotations

from pathlib import Path

from odradek.protocol.records import BatchHeader, Record, build_batch, decode_records, iter_batches
from odradek.storage.cleaner.log_cleaner import CleanerConfig, LogCleaner
from odradek.storage.config import LogConfig
from odradek.storage.log import Log

KV = tuple[bytes | None, bytes | None]


def compact_config(**kw: object) -> LogConfig:
    base: dict[str, object] = {
        "segment_bytes": 1 << 20,
        "index_interval_bytes": 100,
        "cleanup_policy": "compact",
        "delete_retention_ms": 1_000,
        "min_cleanable_dirty_ratio": 0.01,
        "file_delete_delay_ms": 60_000,
    }
    base.update(kw)
    return LogConfig(**base)  # type: ignore[arg-type]


def append_kv(
    log: Log, records: list[KV], ts: int = 1_000, compression: int = 0,
    transactional: bool = False, producer_id: int = -1,
) -> int:
    """Append one batch of (key, value) records; returns its first offset."""
    recs = [Record(-1, ts + i, k, v, [("h", b"x")]) for i, (k, v) in enumerate(records)]
    raw = build_batch(recs, compression=compression, transactional=transactional,
                      producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                      base_sequence=0 if producer_id >= 0 else -1)
    view = memoryview(raw)
    return log.append(view, BatchHeader.parse(view), 0).first_offset


def batches_of(log: Log) -> list[tuple[BatchHeader, bytes]]:
    """Every batch from the log start, fetching like a consumer. Unlike `read_all` a fetch may
    come back empty below the log end offset: compaction removed everything after it."""
    out: list[tuple[BatchHeader, bytes]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        result = log.read(offset, 1 << 20)
        if result.region is None:
            break
        batches = [(h, bytes(v)) for h, v in iter_batches(log.read_bytes(result.region), strict=True)]
        assert batches and batches[-1][0].last_offset >= offset
        out.extend(batches)
        offset = batches[-1][0].last_offset + 1
    return out


def records_of(log: Log) -> list[tuple[BatchHeader, Record]]:
    return [(h, r) for h, raw in batches_of(log) for r in decode_records(h, raw)]


def cleaner_for(log: Log, tmp: Path, buffer: int = 1 << 20, clock_ms: list[int] | None = None) -> LogCleaner:
    clock = clock_ms if clock_ms is not None else [10_000]
    return LogCleaner(tmp, lambda: [log], CleanerConfig(dedupe_buffer_size=buffer),
                      clock=lambda: clock[0])


def latest_by_key(written: list[tuple[int, bytes, bytes | None]]) -> dict[bytes, tuple[int, bytes | None]]:
    """key -> (offset, value) of its newest record."""
    out: dict[bytes, tuple[int, bytes | None]] = {}
    for offset, key, value in written:
        out[key] = (offset, value)
    return out


def open_compacted(path: Path, config: LogConfig | None = None, **kw: object) -> Log:
    return Log.open(path / "c-0", config or compact_config(), **kw)  # type: ignore[arg-type]
