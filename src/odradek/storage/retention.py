"""Deleting a log's old data: by retention (`retention.ms` / `retention.bytes`, cleanup.policy
delete), by DeleteRecords (the log start offset moves up), and the delayed removal of the
segments either retires (Kafka's asynchronous segment deletion)."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from odradek.protocol.errors import OffsetOutOfRange
from odradek.storage.log_lock import locked
from odradek.storage.segment import Segment

if TYPE_CHECKING:
    import threading

    from odradek.storage.config import LogConfig
    from odradek.storage.epochs import LeaderEpochCache
    from odradek.storage.log_dir_failure import LogDirFailureChannel

__all__ = ["Retention"]


def _now_ms() -> int:
    return int(time.time() * 1000)


def _largest_timestamp(seg: Segment) -> int:
    """Kafka's LogSegment.largestTimestamp: the max record timestamp, or the file's
    modification time for a segment without timestamps."""
    if seg.max_timestamp >= 0:
        return seg.max_timestamp
    try:
        return int(os.stat(seg.log_path).st_mtime * 1000)
    except OSError:
        return _now_ms()


class Retention:
    """Retention and record deletion of a Log (mixed into it; they take the log's lock)."""

    if TYPE_CHECKING:
        from pathlib import Path

        lock: threading.RLock
        config: LogConfig
        epochs: LeaderEpochCache
        dir_state: LogDirFailureChannel
        _dir: Path
        _segments: list[Segment]
        _bases: list[int]
        _leo: int
        _log_start_offset: int
        _recovery_point: int
        _dir_dirty: bool
        _retired: list[tuple[int, Segment]]

        @property
        def size_bytes(self) -> int: ...

        def _roll(self, base_offset: int, now: int) -> Segment: ...

    @locked
    def delete_records_before(self, offset: int) -> int:
        """Move the log start offset up to `offset` and delete the segments wholly below it.
        Returns the new log start offset."""
        if offset > self._leo or offset < 0:
            raise OffsetOutOfRange(f"offset {offset} is beyond the log end offset {self._leo}")
        if offset <= self._log_start_offset:
            return self._log_start_offset
        self._log_start_offset = offset
        while len(self._segments) > 1 and self._segments[1].base_offset <= offset:
            self._retire(self._segments.pop(0))
            self._bases.pop(0)
        self._recovery_point = max(self._recovery_point, self._segments[0].base_offset)
        self.epochs.truncate_from_start(offset)
        return offset

    @locked
    def delete_retention_breached(
        self, now_ms: int | None = None, high_watermark: int | None = None
    ) -> int:
        """Delete old segments under `retention.ms` / `retention.bytes` (cleanup.policy delete),
        oldest first, stopping at the first one to keep (Kafka's deletableSegments). Only
        segments wholly below the high watermark go. As in Kafka, an expired active segment
        with data goes too: a new empty segment is rolled first, so the log is never without
        one. Returns how many segments went."""
        if "delete" not in self.config.cleanup_policy.split(","):
            return 0
        now = _now_ms() if now_ms is None else now_ms
        hw = self._leo if high_watermark is None else min(high_watermark, self._leo)
        retention_ms = self.config.retention_ms
        retention_bytes = self.config.retention_bytes
        if retention_ms < 0 and retention_bytes < 0:
            return 0
        segments = self._segments
        remaining = self.size_bytes
        deletable = 0
        for i, seg in enumerate(segments):
            last = i == len(segments) - 1
            upper = self._leo if last else segments[i + 1].base_offset
            if (last and seg.size == 0) or upper > hw:
                break
            too_old = retention_ms >= 0 and now - _largest_timestamp(seg) > retention_ms
            too_big = retention_bytes >= 0 and remaining - seg.size >= retention_bytes
            if not (too_old or too_big):
                break
            remaining -= seg.size
            deletable += 1
        if not deletable:
            return 0
        if deletable == len(segments):
            try:
                self._roll(self._leo, now)
            except OSError as exc:
                # A full disk must not stop retention, which is what frees it: keep the active
                # segment this time and delete the others.
                self.dir_state.rate_limited.warning(
                    "retention-roll", "%s: rolling for retention failed (%s); keeping the "
                    "active segment", self._dir, exc,
                )
                deletable -= 1
                if not deletable:
                    return 0
        for _ in range(deletable):
            self._retire(self._segments.pop(0))
            self._bases.pop(0)
        self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
        self._recovery_point = max(self._recovery_point, self._segments[0].base_offset)
        self.epochs.truncate_from_start(self._log_start_offset)
        return deletable

    def _retire(self, seg: Segment) -> None:
        """Rename a segment's files to `.deleted` now; remove them and close the fd after
        `file.delete.delay.ms`, since a FileRegion handed out by `read` may still be on its way
        to a socket (Kafka's asynchronous segment deletion)."""
        seg.offset_index.close()
        seg.time_index.close()
        seg.rename_to_deleted()
        now = _now_ms()
        self._retired.append((now, seg))
        self._dir_dirty = True
        self.close_retired(now)

    def close_retired(self, now_ms: int | None = None, force: bool = False) -> None:
        now = _now_ms() if now_ms is None else now_ms
        with self.lock:
            keep: list[tuple[int, Segment]] = []
            for when, seg in self._retired:
                if force or now - when >= self.config.file_delete_delay_ms:
                    seg.close()
                    seg.delete_files()
                else:
                    keep.append((when, seg))
            self._retired = keep

