"""The invariant checker flags hand-made bad histories, and passes a good one."""

from __future__ import annotations

import pytest

from odradek.metadata.raft.log import Entry
from odradek.metadata.raft.state import Role

from .checker import InvariantChecker, InvariantViolation, NodeView, ObservedLog


def log_of(*epochs: int, tag: str = "") -> ObservedLog:
    log = ObservedLog()
    log.append_as_follower([Entry(i, e, f"{tag}{e}:{i}".encode()) for i, e in enumerate(epochs)])
    return log


def view(node: int, log: ObservedLog, hw: int = 0, role: Role = Role.FOLLOWER, epoch: int = 1):  # type: ignore[no-untyped-def]
    return NodeView(node, role, epoch, hw, log)


def test_a_good_history_passes() -> None:
    c = InvariantChecker()
    a, b = log_of(1, 1, 2), log_of(1, 1)
    c.check([view(1, a, 2, Role.LEADER, 2), view(2, b, 2)])
    a.append_as_leader(2, [b"x"])
    b.append_as_follower(a.read(2, 10))
    c.check([view(1, a, 4, Role.LEADER, 2), view(2, b, 3)])
    assert len(c.committed) == 4


def test_two_leaders_in_one_epoch() -> None:
    c = InvariantChecker()
    c.check([view(1, log_of(1), role=Role.LEADER, epoch=3)])
    with pytest.raises(InvariantViolation, match="election-safety"):
        c.check(
            [
                view(1, log_of(1), role=Role.FOLLOWER, epoch=3),
                view(2, log_of(1), role=Role.LEADER, epoch=3),
            ]
        )


def test_two_entries_at_one_offset_and_epoch() -> None:
    c = InvariantChecker()
    with pytest.raises(InvariantViolation, match="log-matching"):
        c.check([view(1, log_of(1, 1, tag="a")), view(2, log_of(1, 1, tag="b"))])


def test_same_epoch_starting_at_different_offsets() -> None:
    c = InvariantChecker()
    a = log_of(1, 1, 2, tag="a")
    b = ObservedLog()
    b.append_as_follower([Entry(0, 1, b"a1:0"), Entry(1, 2, b"a2:1"), Entry(2, 2, b"z")])
    with pytest.raises(InvariantViolation, match="log-matching"):
        c.check([view(1, a), view(2, b)])


def test_committed_entry_changed() -> None:
    c = InvariantChecker()
    c.check([view(1, log_of(1, 1, tag="a"), hw=2), view(2, ObservedLog())])
    with pytest.raises(InvariantViolation, match=r"committed-changed|log-matching"):
        c.check([view(1, log_of(1, 1, tag="a"), hw=2), view(2, log_of(1, 2, tag="a"), hw=2)])


def test_committed_entry_changed_is_seen_by_the_prefix_check_alone() -> None:
    c = InvariantChecker()
    a = log_of(1, 1, tag="a")
    c.check([view(1, a, hw=2)])
    b = log_of(1, 2, tag="a")
    b.appended.clear()  # hide it from the log-matching check: the committed prefix still differs
    with pytest.raises(InvariantViolation, match="committed-changed"):
        c.check([view(1, a, hw=2), view(2, b, hw=2)])


def test_high_watermark_going_back() -> None:
    c = InvariantChecker()
    log = log_of(1, 1, 1)
    c.check([view(1, log, hw=3)])
    with pytest.raises(InvariantViolation, match="hw-backward"):
        c.check([view(1, log, hw=2)])


def test_high_watermark_may_restart_from_zero_after_a_crash() -> None:
    c = InvariantChecker()
    log = log_of(1, 1, 1)
    c.check([view(1, log, hw=3)])
    c.restarted(1)
    c.check([view(1, log, hw=0)])


def test_truncating_below_the_high_watermark() -> None:
    c = InvariantChecker()
    log = log_of(1, 1, 1)
    c.check([view(1, log, hw=2)])
    log.truncate_to(1)
    with pytest.raises(InvariantViolation, match="committed-truncated"):
        c.check([view(1, log, hw=1)])


def test_a_new_leader_without_the_committed_prefix() -> None:
    c = InvariantChecker()
    c.check([view(1, log_of(1, 1, 1), hw=3), view(2, log_of(1))])
    with pytest.raises(InvariantViolation, match="leader-completeness"):
        c.check([view(1, log_of(1, 1, 1), hw=3), view(2, log_of(1), role=Role.LEADER, epoch=2)])
