"""The replicated log behind the quorum: an interface and an in-memory implementation.

Offsets start at 0; `end_offset()` is the next offset to be written. Every entry carries the
epoch of the leader that wrote it. `end_offset_for_epoch(e)` answers as OffsetForLeaderEpoch
does: the largest epoch <= e present in the log, and the offset where it ends (the start of the
next epoch, or the log end). `flush()` makes everything appended so far durable; the raft client
flushes after every append, before the new offset is reported to anyone (a follower's next
Fetch, the leader's own vote in the high watermark), so a crash loses only an unflushed tail
that nobody has counted.

What `read` returns and `append_as_follower` takes is the log's own kind of records, opaque to
the client: a tuple of `Entry` here, Kafka record batches (bytes) in `FileRaftLog`. A log may
start past 0 (`start_offset()`) once a snapshot (KIP-630) covers its prefix; the snapshot
methods are `latest_snapshot`, `read_snapshot` (a chunk for FetchSnapshot) and
`write_snapshot_chunk` (a follower downloading one; the last chunk installs it and the log
restarts empty at the snapshot's end offset).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class Entry:
    offset: int
    epoch: int
    payload: bytes
    control: bool = False  # a LeaderChange record written by a new leader at its epoch start


@dataclass(frozen=True, slots=True, order=True)
class SnapshotId:
    """A snapshot holds everything below `end_offset`; `epoch` is the epoch of its last record."""

    end_offset: int
    epoch: int


class RaftLog(Protocol):
    def start_offset(self) -> int: ...

    def end_offset(self) -> int: ...

    def last_epoch(self) -> int: ...

    def epoch_at(self, offset: int) -> int | None: ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]: ...

    def append_as_leader(self, epoch: int, payloads: list[bytes], control: bool = False) -> int:
        """Append one atomic batch; the offset of its last record."""

    def append_as_follower(self, records: Any) -> int:
        """Append what `read` gave on the leader, if it starts at our end; records appended."""

    def truncate_to(self, offset: int) -> None: ...

    def read(self, start: int, max_entries: int) -> Any: ...

    def flush(self) -> None: ...

    def latest_snapshot(self) -> SnapshotId | None: ...

    def read_snapshot(self, sid: SnapshotId, position: int, max_bytes: int) -> tuple[bytes, int] | None:
        """(chunk at `position`, total size) of the snapshot, None when we do not hold it."""

    def write_snapshot_chunk(self, sid: SnapshotId, position: int, data: bytes, size: int) -> bool:
        """Store a downloaded chunk; True once the snapshot is whole and installed."""


class MemoryRaftLog:
    """A log in memory. `crash()` drops the unflushed tail, as losing the page cache would."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.flushed = 0
        # (epoch, start offset) for each epoch present, in order: the leader-epoch cache
        self._epochs: list[tuple[int, int]] = []

    def end_offset(self) -> int:
        return len(self.entries)

    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else 0

    def epoch_at(self, offset: int) -> int | None:
        if 0 <= offset < len(self.entries):
            return self.entries[offset].epoch
        return None

    def epoch_starts(self) -> list[tuple[int, int]]:
        return list(self._epochs)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        i = bisect_right(self._epochs, (epoch, float("inf"))) - 1
        if i < 0:
            return (0, 0)
        found = self._epochs[i][0]
        end = self._epochs[i + 1][1] if i + 1 < len(self._epochs) else len(self.entries)
        return (found, end)

    def _push(self, entry: Entry) -> None:
        if entry.offset != len(self.entries):
            raise ValueError(
                f"entry at {entry.offset} does not follow the log end {len(self.entries)}"
            )
        last = self.last_epoch()
        if entry.epoch < last:
            raise ValueError(f"epoch {entry.epoch} is below the log's last epoch {last}")
        if entry.epoch > last or not self._epochs:
            self._epochs.append((entry.epoch, entry.offset))
        self.entries.append(entry)

    def start_offset(self) -> int:
        return 0

    def append_as_leader(self, epoch: int, payloads: list[bytes], control: bool = False) -> int:
        for payload in payloads:
            self._push(Entry(len(self.entries), epoch, payload, control))
        return len(self.entries) - 1

    def append_as_follower(self, records: Any) -> int:
        entries = list(records)
        if not entries or entries[0].offset != len(self.entries):
            return 0
        for entry in entries:
            self._push(entry)
        return len(entries)

    def truncate_to(self, offset: int) -> None:
        if offset >= len(self.entries):
            return
        del self.entries[offset:]
        while self._epochs and self._epochs[-1][1] >= offset:
            self._epochs.pop()
        self.flushed = min(self.flushed, offset)

    def read(self, start: int, max_entries: int) -> tuple[Entry, ...]:
        return tuple(self.entries[start : start + max_entries])

    # the simulation's log keeps everything: it never snapshots
    def latest_snapshot(self) -> SnapshotId | None:
        return None

    def read_snapshot(self, sid: SnapshotId, position: int, max_bytes: int) -> tuple[bytes, int] | None:
        return None

    def write_snapshot_chunk(self, sid: SnapshotId, position: int, data: bytes, size: int) -> bool:
        return False

    def flush(self) -> None:
        self.flushed = len(self.entries)

    def crash(self) -> None:
        self.truncate_to(self.flushed)
