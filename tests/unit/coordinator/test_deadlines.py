"""Sessions expire at their deadlines: the deadline timer is armed for the earliest one
(not a polling grid) and, driven by a fake clock, removes a member exactly when its session
runs out and not a millisecond before."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from odradek.coordinator.deadlines import DeadlineQueue, DeadlineTimer
from tests.unit.coordinator.support import Node


class FakeLoop:
    """A clock in ms and the one timer armed on it."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now
        self.armed: list[tuple[float, Callable[[], None]]] = []

    def clock(self) -> float:
        return self.now

    def call_later(self, delay_s: float, fn: Callable[[], None]) -> Any:
        entry = (self.now + delay_s * 1000, fn)
        self.armed.append(entry)
        loop = self

        class Handle:
            def cancel(self) -> None:
                if entry in loop.armed:
                    loop.armed.remove(entry)

        return Handle()

    def advance_to(self, t: float) -> None:
        """Move the clock to `t`, running every timer due by then, in order."""
        while self.armed and min(a for a, _ in self.armed) <= t:
            at, fn = min(self.armed, key=lambda e: e[0])
            self.armed.remove((at, fn))
            self.now = at
            fn()
        self.now = t


def test_queue_pops_distinct_due_keys_in_order() -> None:
    q = DeadlineQueue()
    for key, at in (("b", 20.0), ("a", 10.0), ("b", 5.0), ("c", 30.0)):
        q.add(key, at)
    assert q.pop_due(4.9) == []
    assert q.pop_due(20.0) == ["b", "a"]
    assert q.next_deadline() == 30.0
    q.discard("c")
    assert len(q) == 0


def test_timer_is_armed_for_the_earliest_deadline() -> None:
    loop = FakeLoop(now=0.0)
    fired: list[tuple[list[Any], float]] = []
    timer = DeadlineTimer(loop.clock, loop.call_later, lambda keys, now: fired.append((keys, now)))
    timer.start()
    timer.add("late", 5_000.0)
    timer.add("soon", 1_234.5)
    assert timer.armed_at == 1_234.5 and [a for a, _ in loop.armed] == [1_234.5]
    loop.advance_to(1_234.4)
    assert fired == []
    loop.advance_to(1_234.5)
    assert fired == [(["soon"], 1_234.5)]
    assert timer.armed_at == 5_000.0
    loop.advance_to(10_000.0)
    assert fired[-1] == (["late"], 5_000.0)
    assert timer.armed_at is None


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    n = Node(tmp_path, {"t": 2}, consumer_session_timeout_ms=45_000)
    yield n
    n.close()


def test_a_consumer_session_expires_at_its_deadline(node: Node) -> None:
    coord = node.coordinator
    loop = FakeLoop()
    coord.deadlines = DeadlineTimer(loop.clock, loop.call_later, coord.expire_due)
    coord.deadlines.start()
    r = coord.consumer_group_heartbeat("g", "", 0, None, None, 30_000, ["t"], None, None,
                                       "client", "/h")
    member = coord.groups["g"].members[r.member_id]
    deadline = member.deadline_ms
    # armed for this very deadline, whatever the clock read when the member joined
    assert coord.deadlines.armed_at == deadline
    loop.advance_to(deadline - 1)
    assert r.member_id in coord.groups["g"].members
    loop.advance_to(deadline)
    assert r.member_id not in coord.groups["g"].members


def test_a_heartbeat_moves_the_expiry(node: Node) -> None:
    coord = node.coordinator
    loop = FakeLoop()
    coord.deadlines = DeadlineTimer(loop.clock, loop.call_later, coord.expire_due)
    coord.deadlines.start()
    r = coord.consumer_group_heartbeat("g", "", 0, None, None, 30_000, ["t"], None, None,
                                       "client", "/h")
    first = coord.groups["g"].members[r.member_id].deadline_ms
    hb = coord.consumer_group_heartbeat("g", r.member_id, r.member_epoch, None, None, -1, None,
                                        None, {"t": {0, 1}}, "client", "/h")
    assert hb.error == 0
    second = coord.groups["g"].members[r.member_id].deadline_ms
    assert second > first
    loop.advance_to(first)  # the old deadline passes: the member stays
    assert r.member_id in coord.groups["g"].members
    loop.advance_to(second)
    assert r.member_id not in coord.groups["g"].members


def test_heartbeats_keep_one_entry_per_group(node: Node) -> None:
    # a later deadline is not queued while an earlier one is: the group is looked at once per
    # session period, and told its next deadline then
    coord = node.coordinator
    loop = FakeLoop()
    coord.deadlines = DeadlineTimer(loop.clock, loop.call_later, coord.expire_due)
    coord.deadlines.start()
    r = coord.consumer_group_heartbeat("g", "", 0, None, None, 30_000, ["t"], None, None,
                                       "client", "/h")
    for _ in range(20):
        coord.consumer_group_heartbeat("g", r.member_id, r.member_epoch, None, None, -1, None,
                                       None, {"t": {0, 1}}, "client", "/h")
    assert len(coord.deadlines.queue) == 1
