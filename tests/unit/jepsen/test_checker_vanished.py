"""Lost writes a poll saw before they were gone (docs/reliability.md, finding 1): an
acknowledged value read once and missing from the final reads, which passed its offset, is a
lost-write (kind "vanished"); inconsistent-offsets keeps its own meaning, two values at one
offset."""

from __future__ import annotations

from pathlib import Path

from tests.system.jepsen.checker import check
from tests.system.jepsen.history import load

from .builder import Hist

KEPT = Path(__file__).parents[2] / "system" / "jepsen" / "kept"


def test_a_value_replaced_at_its_offset_is_lost_and_inconsistent() -> None:
    """The seed 7 shape: 5 acknowledged at offset 1 and polled there; a leader without it
    took 9 at offset 1; the final read holds 9."""
    h = Hist()
    h.send(1, "t-0", (0, 4), (1, 5))
    h.poll(10, {"t-0": [(0, 4), (1, 5)]})
    h.nemesis("crash", {"node": 1})
    h.send(2, "t-0", (1, 9), (2, 10))
    h.nemesis("heal")
    h.poll(20, {"t-0": [(0, 4), (1, 9), (2, 10)]}, f="final-poll")
    r = check(h.ops)
    assert r.found() == {"lost-write": 1, "inconsistent-offsets": 1}
    [case] = r.anomalies["lost-write"]
    assert case["kind"] == "vanished" and case["value"] == 5 and case["key"] == "t-0"
    assert case["writer"]["index"] == 1 and case["first_read"]["index"] == 3
    assert r.anomalies["inconsistent-offsets"][0]["values"] == [5, 9]


def test_a_value_gone_with_the_tail_is_lost_without_another_at_its_offset() -> None:
    """The log got shorter and was never refilled there: no second value at the offset,
    and no unseen either, since a poll returned it."""
    h = Hist()
    h.send(1, "t-0", (0, 4), (1, 5), (2, 6))
    h.poll(10, {"t-0": [(0, 4), (1, 5), (2, 6)]})
    h.send(2, "t-0", (5, 30))  # after the truncation the log grew elsewhere
    h.poll(20, {"t-0": [(0, 4), (5, 30)]}, f="final-poll")
    r = check(h.ops)
    # the final read jumped from 4 to 30 past what it had seen before: a poll-skip too
    assert r.found() == {"lost-write": 2, "poll-skip": 1}
    assert sorted(c["value"] for c in r.anomalies["lost-write"]) == [5, 6]
    assert all(c["kind"] == "vanished" for c in r.anomalies["lost-write"])


def test_final_reads_that_stop_short_judge_only_what_they_passed() -> None:
    h = Hist()
    h.send(1, "t-0", (0, 4), (1, 5), (2, 6))
    h.poll(10, {"t-0": [(0, 4), (1, 5), (2, 6)]})
    h.poll(20, {"t-0": [(0, 4), (1, 5)]}, f="final-poll")  # did not reach offset 2
    assert check(h.ops).found() == {}


def test_no_final_reads_no_vanished_judgement() -> None:
    h = Hist()
    h.send(1, "t-0", (0, 4), (1, 5))
    h.poll(10, {"t-0": [(0, 4), (1, 5)]})
    h.poll(11, {"t-0": [(0, 4)]})  # an ordinary poll again from the start: not a final read
    assert check(h.ops).found() == {}


def test_values_of_failed_or_unknown_sends_never_vanish() -> None:
    h = Hist()
    h.send(1, "t-0", (0, 4))
    h.send(1, "t-0", (None, 5), typ="info")  # unknown, never read: nothing to judge
    h.op(2, "txn", [["send", "t-0", 6]], "fail", [["send", "t-0", [2, 6]]], "aborted")
    h.poll(20, {"t-0": [(0, 4), (3, 7)]}, f="final-poll")
    found = check(h.ops).found()
    assert "lost-write" not in found


def test_final_reads_that_hold_every_value_flag_nothing() -> None:
    h = Hist()
    h.send(1, "t-0", (0, 4), (1, 5))
    h.poll(10, {"t-0": [(0, 4), (1, 5)]})
    h.poll(20, {"t-0": [(0, 4)]}, f="final-poll")  # one final batch ...
    h.poll(20, {"t-0": [(1, 5)]}, f="final-poll")  # ... and the next
    assert check(h.ops).found() == {}


def test_the_kept_seed_7_history_is_a_lost_write_now() -> None:
    r = check(load(KEPT / "crash-seed7-two-tails.jsonl"))
    found = r.found()
    assert found.get("lost-write") == 1 and found.get("inconsistent-offsets") == 1, r.table()
    [case] = r.anomalies["lost-write"]
    assert case["value"] == 27566 and case["key"] == "jepsen-0" and case["kind"] == "vanished"
