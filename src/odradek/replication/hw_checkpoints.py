"""High watermarks on disk: `replication-offset-checkpoint`, one per log directory (Kafka's
ReplicaManager keeps a checkpoint file per directory, each naming only its own partitions),
so a failed directory takes only its own partitions' high watermarks with it.

Reading merges every online directory's file, the first (the data directory) first: before
JBOD placement it held every partition's, and an entry there for a partition now written
in another directory's file is older, so the other file wins. A high watermark lost or
read lower than it was is safe: the leader tells followers theirs, and a leader's own grows
back as its followers fetch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from odradek.storage.checkpoints import (
    REPLICATION_OFFSET_CHECKPOINT,
    CheckpointError,
    read_offsets,
    write_offsets,
)
from odradek.storage.log_dir_failure import channel_for

__all__ = ["HW_CHECKPOINT", "HighWatermarkCheckpoints"]

log = logging.getLogger(__name__)

HW_CHECKPOINT = REPLICATION_OFFSET_CHECKPOINT
Key = tuple[str, int]


class HighWatermarkCheckpoints:
    def __init__(self, dirs: Sequence[Path]) -> None:
        self.dirs = list(dirs)
        # held: a directory's failure state lives as long as someone holds its channel
        self._states = {d: channel_for(d) for d in self.dirs}
        # what each directory's file last got (a file is rewritten only when it changes)
        self._written: dict[Path, dict[Key, int]] = {}

    def read(self) -> dict[Key, int]:
        out: dict[Key, int] = {}
        for directory in self.dirs:
            if self._state(directory).offline:
                continue
            path = directory / HW_CHECKPOINT
            try:
                out.update(read_offsets(path))
            except (CheckpointError, OSError) as exc:
                log.warning("%s is unreadable (%s); ignored: its partitions start from the "
                            "high watermark their leaders report", path, exc)
        return out

    def write(self, entries: Iterable[tuple[Path, Key, int]]) -> None:
        """`entries` are (log directory, partition, high watermark); each online directory's
        file that changed is rewritten. A directory that is offline keeps its file as is."""
        by_dir: dict[Path, dict[Key, int]] = {d: {} for d in self.dirs}
        for directory, key, hw in entries:
            by_dir.setdefault(directory, {})[key] = hw
        for directory, hws in by_dir.items():
            if self._written.get(directory) == hws or self._state(directory).offline:
                continue
            if write_offsets(directory / HW_CHECKPOINT, hws):
                self._written[directory] = hws

    def _state(self, directory: Path) -> Any:
        state = self._states.get(directory)
        if state is None:
            state = self._states[directory] = channel_for(directory)
        return state

    def written(self) -> Mapping[Path, Mapping[Key, int]]:
        return self._written
