"""The replicated log behind the quorum: an interface and an in-memory implementation.

Offsets start at 0; `end_offset()` is the next offset to be written. Every entry carries the
epoch of the leader that wrote it. `end_offset_for_epoch(e)` answers as OffsetForLeaderEpoch
does: the largest epoch <= e present in the log, and the offset where it ends (the start of the
next epoch, or the log end). `flush()` makes everything appended so far durable; the raft client
flushes after every append, before the new offset is reported to anyone (a follower's next
Fetch, the leader's own vote in the high watermark), so a crash loses only an unflushed tail
that nobody has counted.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Entry:
    offset: int
    epoch: int
    payload: bytes
    control: bool = False  # a LeaderChange record written by a new leader at its epoch start


class RaftLog(Protocol):
    def end_offset(self) -> int: ...

    def last_epoch(self) -> int: ...

    def epoch_at(self, offset: int) -> int | None: ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]: ...

    def append_as_leader(self, epoch: int, payloads: list[tuple[bytes, bool]]) -> list[Entry]: ...

    def append_as_follower(self, entries: list[Entry]) -> None: ...

    def truncate_to(self, offset: int) -> None: ...

    def read(self, start: int, max_entries: int) -> list[Entry]: ...

    def flush(self) -> None: ...


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

    def append_as_leader(self, epoch: int, payloads: list[tuple[bytes, bool]]) -> list[Entry]:
        out = []
        for payload, control in payloads:
            entry = Entry(len(self.entries), epoch, payload, control)
            self._push(entry)
            out.append(entry)
        return out

    def append_as_follower(self, entries: list[Entry]) -> None:
        for entry in entries:
            self._push(entry)

    def truncate_to(self, offset: int) -> None:
        if offset >= len(self.entries):
            return
        del self.entries[offset:]
        while self._epochs and self._epochs[-1][1] >= offset:
            self._epochs.pop()
        self.flushed = min(self.flushed, offset)

    def read(self, start: int, max_entries: int) -> list[Entry]:
        return self.entries[start : start + max_entries]

    def flush(self) -> None:
        self.flushed = len(self.entries)

    def crash(self) -> None:
        self.truncate_to(self.flushed)
