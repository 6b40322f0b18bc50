"""Loading a log's segments when it opens: the directory is scanned, the segments are
recovered (CRC-scanned past the recovery point), and the offsets, recovery point and
leader-epoch cache are set from what was found."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from odradek.storage.checkpoints import fsync_dir
from odradek.storage.cleaner.swap import recover_swaps
from odradek.storage.log_dir import scan_log_dir
from odradek.storage.recovery import LogDamaged, load_segments, remove_orphan_indexes
from odradek.storage.segment import Segment

if TYPE_CHECKING:
    from pathlib import Path

    from odradek.storage.config import LogConfig
    from odradek.storage.epochs import LeaderEpochCache

__all__ = ["SegmentLoading"]

# the recovery report keeps the logger it always had, which operators may filter on
log = logging.getLogger("odradek.storage.log")


def _now_ms() -> int:
    return int(time.time() * 1000)


class SegmentLoading:
    """Log.open's segment loading (mixed into Log; it runs before the log is shared)."""

    if TYPE_CHECKING:
        config: LogConfig
        epochs: LeaderEpochCache
        bytes_recovered_at_open: int
        bytes_checked_at_open: int
        _dir: Path
        _allow_gaps: bool
        _segments: list[Segment]
        _bases: list[int]
        _leo: int
        _log_start_offset: int
        _recovery_point: int
        _dir_dirty: bool

        def _truncate_fully_and_start_at(self, offset: int) -> None: ...

    def _load_segments(
        self, recovery_point: int, log_start_offset: int, protect_below: int | None = None
    ) -> None:
        recover_swaps(self._dir)
        bases, orphans = scan_log_dir(self._dir)
        remove_orphan_indexes(self._dir, orphans)
        loaded = load_segments(
            self._dir, bases, self.config, _now_ms(), recovery_point, self._allow_gaps,
            self._epoch_seen, protect_below,
        )
        segments, recovered, rebuilt = loaded.segments, loaded.recovered, loaded.rebuilt
        self.bytes_recovered_at_open = loaded.bytes_recovered
        self.bytes_checked_at_open = loaded.bytes_checked
        if loaded.bytes_recovered and protect_below is None:
            # the proof of a start that read only its unflushed tail (issue 22)
            log.info("%s: recovered %d bytes past the recovery point %d (%d bytes checked "
                     "below it)", self._dir, loaded.bytes_recovered, recovery_point,
                     loaded.bytes_checked)
        now = _now_ms()
        if not segments:
            segments = [
                Segment(self._dir, max(log_start_offset, recovery_point, 0), self.config, now)
            ]
            segments[0].recover(None)
            self._dir_dirty = True
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._leo = segments[-1].next_offset
        if protect_below is not None and self._leo < protect_below:
            for seg in segments:  # before any checkpoint or snapshot is rewritten
                seg.close()
            raise LogDamaged(
                f"{self._dir}: the log ends at offset {self._leo}, below offset {protect_below} "
                "known to be flushed (segment files missing or cut)",
                self._dir, self._leo,
            )
        if log_start_offset > self._leo:
            # Kafka: a log start offset past the data means the log restarts empty there.
            self._truncate_fully_and_start_at(log_start_offset)
        self._log_start_offset = max(log_start_offset, self._segments[0].base_offset)
        if recovered:
            # What the scan validated becomes durable, so the recovery point can move to the end.
            for seg in rebuilt:
                if seg.fd >= 0:
                    seg.flush()
            fsync_dir(self._dir)
            self._recovery_point = self._leo
        else:
            self._recovery_point = min(
                max(recovery_point, self._segments[0].base_offset), self._leo
            )
        self.epochs.truncate_from_end(self._leo)
        self.epochs.truncate_from_start(self._log_start_offset)
        if recovered:
            self.epochs._persist()

    def _epoch_seen(self, epoch: int, start_offset: int) -> None:
        latest = self.epochs.latest_epoch
        if latest is None or epoch > latest:
            self.epochs._assign(epoch, start_offset)
