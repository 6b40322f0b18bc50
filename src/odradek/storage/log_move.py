"""Moving a replica's log to another directory of the same node (AlterReplicaLogDirs).

As Kafka's ReplicaAlterLogDirsThread: a `-future` log in the destination directory is
filled from the current log (whole batches, offsets, epochs and producer state kept) while
the current log goes on taking appends and serving reads; once the future log has caught
up (same log end offset, checked where no append can land in between) the two are
swapped and the old log is deleted. Nothing acknowledged is lost: the swap happens only
when the future holds every offset the current log holds.

This module is the decision, sans-I/O: fed the two logs' offsets (and any truncation of
the current log since the last step), `LogMove.next_step` says what to do next. The
driver (replication.alter_log_dirs) does the I/O.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "UNLIMITED", "Copy", "IoThrottle", "LogMove", "MoveState", "RestartAt", "Step", "Swap",
    "TruncateFuture",
]

UNLIMITED = 2**63 - 1


class MoveState(enum.Enum):
    COPYING = "copying"
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class Copy:
    """Copy the current log's batches from `offset` (the future log's end) on."""
    offset: int


@dataclass(frozen=True, slots=True)
class TruncateFuture:
    """The current log was cut back (a follower's divergent tail, an unclean election):
    cut the future log back to `offset` too."""
    offset: int


@dataclass(frozen=True, slots=True)
class RestartAt:
    """The current log no longer holds the future log's next offset (retention or
    DeleteRecords moved its start past it): empty the future log and start it at `offset`."""
    offset: int


@dataclass(frozen=True, slots=True)
class Swap:
    """The future log holds everything the current log holds: swap them."""


Step = Copy | TruncateFuture | RestartAt | Swap


class LogMove:
    """One partition's move from `source` to `destination` (log directories)."""

    def __init__(self, topic: str, partition: int, source: Path, destination: Path) -> None:
        self.topic = topic
        self.partition = partition
        self.source = source
        self.destination = destination
        self.state = MoveState.COPYING
        self.reason = ""
        # what a DescribeLogDirs shows while it runs
        self.future_end = 0
        self.current_end = 0
        # (base offset the future restarted at, the log start it was asked for): a log start
        # inside a batch starts the copy at that batch
        self._restart: tuple[int, int] | None = None

    @property
    def lag(self) -> int:
        """Offsets the future log is behind (DescribeLogDirs' offset_lag of the future)."""
        return max(0, self.current_end - self.future_end)

    def next_step(
        self, current_start: int, current_end: int, future_start: int, future_end: int,
        truncated_to: int | None = None,
    ) -> Step:
        """What to do, given the current log's [start, end), the future log's [start, end),
        and the lowest offset the current log was truncated to since the last step."""
        if self.state is not MoveState.COPYING:
            raise RuntimeError(f"move of {self.topic}-{self.partition} is {self.state.value}")
        self.current_end, self.future_end = current_end, future_end
        if truncated_to is not None and truncated_to < future_end:
            # what the future holds at and after the cut may differ from the current log now
            if truncated_to < future_start:
                return RestartAt(current_start)
            return TruncateFuture(truncated_to)
        if future_end > current_end:
            # a truncation we were not told of: never keep what the current log lacks
            return TruncateFuture(current_end)
        if future_end < current_start:
            if self._restart == (future_end, current_start) and future_start == future_end:
                # restarted at the batch holding the log start: copy from that batch on
                return Copy(current_start)
            return RestartAt(current_start)
        if future_end == current_end:
            return Swap()
        return Copy(future_end)

    def restarted(self, base: int, offset: int) -> None:
        """The future log was emptied and starts at `base`, the batch holding `offset`."""
        self._restart = (base, offset)

    def done(self) -> None:
        self.state = MoveState.DONE
        self.future_end = self.current_end

    def failed(self, reason: str) -> None:
        self.state = MoveState.FAILED
        self.reason = reason


class IoThrottle:
    """`replica.alter.log.dirs.io.max.bytes.per.second`: one budget for every move of the
    node (Kafka's quota for its alter-log-dirs threads). Fed each chunk copied, says how
    long to pause so that the bytes copied within the window stay under the rate."""

    def __init__(self, window_s: float = 1.0) -> None:
        self.window_s = window_s
        self._start: float | None = None
        self._bytes = 0

    def delay(self, now: float, copied: int, rate: int) -> float:
        """Seconds to wait after copying `copied` bytes at time `now` (seconds)."""
        if rate >= UNLIMITED:
            self._start, self._bytes = None, 0
            return 0.0
        if rate <= 0:
            return self.window_s  # held: copy nothing, look again later
        if self._start is None or now - self._start >= max(self.window_s,
                                                             self._bytes / rate):
            self._start, self._bytes = now, 0
        self._bytes += copied
        return max(0.0, self._bytes / rate - (now - self._start))

