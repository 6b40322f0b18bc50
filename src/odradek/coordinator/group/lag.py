"""Consumer lag per group and partition, and Burrow's evaluation of it.

Each commit adds an observation (committed offset, log end offset, time) to a
small sliding window per partition. Burrow's rules over the window:

- the latest lag is zero: OK;
- a committed offset went backwards: REWIND;
- commits stopped (the time since the last commit exceeds the time the window
  spans) while lag remains: STOP;
- the window is full, the offset never moved and lag remains: STALL;
- the window is full, the offset moves but lag grows at every step: WARN;
- otherwise OK.

A group is OK, WARN if a partition is WARN, ERR if one is STOP, STALL or
REWIND (Burrow's roll-up). Lag age: how long ago the consumer was last seen at
the log end (0 while it has no lag).
"""

from __future__ import annotations

import enum
import itertools
from collections import deque
from dataclasses import dataclass

WINDOW = 10


class LagStatus(enum.Enum):
    OK = "OK"
    WARN = "WARN"
    STALL = "STALL"
    STOP = "STOP"
    REWIND = "REWIND"
    ERR = "ERR"


@dataclass(frozen=True, slots=True)
class Observation:
    offset: int
    log_end_offset: int
    time_ms: int

    @property
    def lag(self) -> int:
        return max(0, self.log_end_offset - self.offset)


class PartitionLag:
    """The sliding window of one group's partition."""

    __slots__ = ("caught_up_ms", "first_seen_ms", "window")

    def __init__(self, size: int = WINDOW) -> None:
        self.window: deque[Observation] = deque(maxlen=size)
        self.caught_up_ms: int | None = None
        self.first_seen_ms: int | None = None

    def observe(self, offset: int, log_end_offset: int, time_ms: int) -> None:
        obs = Observation(offset, log_end_offset, time_ms)
        if self.first_seen_ms is None:
            self.first_seen_ms = time_ms
        if obs.lag == 0:
            self.caught_up_ms = time_ms
        self.window.append(obs)

    def lag_age_ms(self, current_lag: int, now_ms: int) -> int:
        if current_lag <= 0:
            return 0
        since = self.caught_up_ms if self.caught_up_ms is not None else self.first_seen_ms
        return max(0, now_ms - since) if since is not None else 0

    def evaluate(self, current_lag: int, now_ms: int) -> LagStatus:
        return evaluate(list(self.window), current_lag, now_ms, self.window.maxlen or WINDOW)


def evaluate(window: list[Observation], current_lag: int, now_ms: int,
             size: int = WINDOW) -> LagStatus:
    if not window or current_lag <= 0:
        return LagStatus.OK
    if window[-1].lag == 0 and current_lag <= 0:
        return LagStatus.OK
    if any(b.offset < a.offset for a, b in itertools.pairwise(window)):
        return LagStatus.REWIND
    first, last = window[0], window[-1]
    if len(window) > 1 and now_ms - last.time_ms > last.time_ms - first.time_ms:
        return LagStatus.STOP
    if len(window) < size:
        return LagStatus.OK
    if any(o.lag == 0 for o in window):
        return LagStatus.OK
    if first.offset == last.offset:
        return LagStatus.STALL
    if all(b.lag > a.lag for a, b in itertools.pairwise(window)):
        return LagStatus.WARN
    return LagStatus.OK


def roll_up(statuses: list[LagStatus]) -> LagStatus:
    if any(s in (LagStatus.STOP, LagStatus.STALL, LagStatus.REWIND, LagStatus.ERR)
           for s in statuses):
        return LagStatus.ERR
    if any(s is LagStatus.WARN for s in statuses):
        return LagStatus.WARN
    return LagStatus.OK


class LagTracker:
    """Windows of every (group, topic, partition) seen committing."""

    def __init__(self, size: int = WINDOW) -> None:
        self.size = size
        self._windows: dict[tuple[str, str, int], PartitionLag] = {}

    def observe(self, group: str, topic: str, partition: int, offset: int, log_end_offset: int,
                time_ms: int, deliberate: bool = False) -> None:
        """`deliberate`: the commit came from outside the group (an admin reset); moving the
        offset back then starts a fresh window instead of counting as a REWIND."""
        key = (group, topic, partition)
        w = self._windows.get(key)
        if w is not None and deliberate and w.window and offset < w.window[-1].offset:
            w = None
        if w is None:
            w = self._windows[key] = PartitionLag(self.size)
        w.observe(offset, log_end_offset, time_ms)

    def get(self, group: str, topic: str, partition: int) -> PartitionLag | None:
        return self._windows.get((group, topic, partition))

    def forget(self, group: str, topic: str | None = None, partition: int | None = None) -> None:
        for key in [k for k in self._windows if k[0] == group
                    and (topic is None or k[1] == topic)
                    and (partition is None or k[2] == partition)]:
            del self._windows[key]
