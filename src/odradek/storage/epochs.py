"""The leader epoch cache: which leader epoch started at which offset.

Persisted as Kafka's `leader-epoch-checkpoint` (version 0, a count, then
`<epoch> <start offset>` lines). `end_offset_for` answers OffsetForLeaderEpoch
as Kafka does.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable
from pathlib import Path

from odradek.storage.checkpoints import (
    LEADER_EPOCH_CHECKPOINT,
    CheckpointError,
    read_lines,
    write_lines,
)

log = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, path: Path | None, log_end_offset: Callable[[], int]) -> None:
        self._path = path
        self._leo = log_end_offset
        self._epochs: list[int] = []
        self._starts: list[int] = []
        # False while the log is new and not yet made durable: LogManager.sync_new_logs
        # fsyncs the file with the log's directory, then sets it back (issue 22)
        self.sync = True

    @classmethod
    def load(cls, directory: Path, log_end_offset: Callable[[], int]) -> LeaderEpochCache:
        cache = cls(directory / LEADER_EPOCH_CHECKPOINT, log_end_offset)
        path = cache._path
        assert path is not None
        if path.exists():
            try:
                entries = [(int(e), int(o)) for e, o in read_lines(path, 2)]
            except (CheckpointError, ValueError) as exc:
                log.warning("ignoring unreadable %s: %s", path, exc)
                entries = []
            for epoch, start in entries:
                cache._assign(epoch, start)
        return cache

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts, strict=True))

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    def start_offset_of(self, epoch: int) -> int | None:
        i = bisect.bisect_left(self._epochs, epoch)
        if i < len(self._epochs) and self._epochs[i] == epoch:
            return self._starts[i]
        return None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; persist when anything changed."""
        if self._assign(epoch, start_offset):
            self._persist()
            return True
        return False

    def _assign(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0 or start_offset < 0:
            return False
        if self._epochs and epoch == self._epochs[-1] and start_offset >= self._starts[-1]:
            return False
        # Kafka drops every entry that the new one contradicts: a later-or-equal epoch, or
        # an entry starting at or after the new start offset.
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            self._epochs.pop()
            self._starts.pop()
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        return True

    def end_offset_for(self, requested_epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch: the largest epoch <= requested and the
        start offset of the epoch after it (the log end offset for the latest epoch)."""
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._epochs[-1]:
            return requested_epoch, self._leo()
        higher = bisect.bisect_right(self._epochs, requested_epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._starts[0]
        return self._epochs[higher - 1], self._starts[higher]

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs that start at or after `end_offset` (the log was truncated there)."""
        changed = False
        while self._starts and self._starts[-1] >= end_offset:
            self._epochs.pop()
            self._starts.pop()
            changed = True
        if changed:
            self._persist()

    def truncate_from_start(self, start_offset: int) -> None:
        """Forget epochs wholly below `start_offset`; the one spanning it now starts there."""
        i = bisect.bisect_right(self._starts, start_offset)
        if i == 0:
            return
        # Entries [0, i) start at or below start_offset; keep the last of them, moved up.
        if i == 1 and self._starts[0] == start_offset:
            return
        epoch = self._epochs[i - 1]
        del self._epochs[:i]
        del self._starts[:i]
        self._epochs.insert(0, epoch)
        self._starts.insert(0, start_offset)
        self._persist()

    def clear(self) -> None:
        self._epochs.clear()
        self._starts.clear()
        self._persist()

    def _persist(self) -> None:
        if self._path is None:
            return
        write_lines(
            self._path, [f"{e} {s}" for e, s in zip(self._epochs, self._starts, strict=True)],
            sync=self.sync,
        )
