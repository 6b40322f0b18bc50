"""Deadlines that fire when they fall due, not on a polling grid.

A coordinator says "look at key K at time T" (a group when a member's session or revocation
deadline is set); `DeadlineTimer` keeps one loop timer armed for the earliest of them and,
when it fires, hands the keys that fell due to the coordinator, which checks them at the
clock's time and then says when to look at each of them next.

Each key keeps only its earliest pending deadline: a later one (a heartbeat moving a session
on) is not queued, since the key will be looked at by then anyway and told its next
deadline there. So a busy group costs one entry and one check per session period, not one
per heartbeat. The clock and the timer are given, so a fake clock drives it in tests.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["DeadlineQueue", "DeadlineTimer"]


class DeadlineQueue:
    """(deadline, key) entries; pure, no clock."""

    __slots__ = ("_heap", "_pending", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Hashable]] = []
        self._pending: dict[Hashable, float] = {}  # each key's earliest queued deadline
        self._seq = 0

    def add(self, key: Hashable, deadline: float) -> bool:
        """Queue `deadline` for `key` unless an earlier (or equal) one is queued; whether it
        was queued."""
        pending = self._pending.get(key)
        if pending is not None and pending <= deadline:
            return False
        self._pending[key] = deadline
        self._seq += 1
        heapq.heappush(self._heap, (deadline, self._seq, key))
        return True

    def next_deadline(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: float) -> list[Hashable]:
        """The distinct keys with a deadline at or before `now`, in deadline order."""
        out: list[Hashable] = []
        seen: set[Hashable] = set()
        heap = self._heap
        pending = self._pending
        while heap and heap[0][0] <= now:
            _, _, key = heapq.heappop(heap)
            if pending.get(key, now + 1) <= now:
                del pending[key]
            if key not in seen:
                seen.add(key)
                out.append(key)
        return out

    def discard(self, key: Hashable) -> None:
        """Forget every entry of `key` (its state went away)."""
        self._pending.pop(key, None)
        kept = [e for e in self._heap if e[2] != key]
        if len(kept) != len(self._heap):
            heapq.heapify(kept)
            self._heap = kept

    def __len__(self) -> int:
        return len(self._heap)


# call_later(delay_s, fn) -> a handle with cancel()
CallLater = Callable[[float, Callable[[], None]], Any]


class DeadlineTimer:
    """One armed timer for the earliest deadline of a `DeadlineQueue`.

    `clock()` is the time deadlines are in (ms); `call_later(delay_s, fn)` arms the loop
    timer; `on_due(keys, now)` checks the keys that fell due at `now` and `add`s the next
    deadline of each that still has one.
    """

    def __init__(self, clock: Callable[[], float], call_later: CallLater,
                 on_due: Callable[[list[Hashable], float], None]) -> None:
        self.queue = DeadlineQueue()
        self._clock = clock
        self._call_later = call_later
        self._on_due = on_due
        self._armed_at: float | None = None
        self._handle: Any = None
        self.running = False

    def add(self, key: Hashable, deadline: float) -> None:
        if not self.queue.add(key, deadline):
            return
        if self.running and (self._armed_at is None or deadline < self._armed_at):
            self._arm()

    def start(self) -> None:
        self.running = True
        self._arm()

    def stop(self) -> None:
        self.running = False
        self._disarm()

    @property
    def armed_at(self) -> float | None:
        """The deadline the timer is armed for (None: nothing pending)."""
        return self._armed_at

    def fire(self) -> None:
        """The timer's callback: check what fell due, then arm for the next deadline."""
        self._handle = None
        self._armed_at = None
        if not self.running:
            return
        now = self._clock()
        due = self.queue.pop_due(now)
        try:
            if due:
                self._on_due(due, now)
        finally:
            self._arm()

    def _disarm(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._handle = None
        self._armed_at = None

    def _arm(self) -> None:
        self._disarm()
        deadline = self.queue.next_deadline()
        if deadline is None:
            return
        self._armed_at = deadline
        self._handle = self._call_later(max(0.0, (deadline - self._clock()) / 1000), self.fire)
