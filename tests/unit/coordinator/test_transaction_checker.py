"""The Jepsen-style checker finds each anomaly it names (so a clean report means something)."""

from __future__ import annotations

from tests.support.jepsen_checker import History, Poll, Send, check


def base() -> History:
    h = History()
    h.sends = [Send(0, "a", seq=0), Send(0, "b", seq=1), Send(1, "c", txn="t1"),
               Send(1, "d", txn="t2")]
    h.txns = {"t1": "committed", "t2": "aborted"}
    h.commit_invoked = {"t1": 5.0}
    h.final = [(0, 0, "a"), (0, 1, "b"), (1, 0, "c")]
    h.polls = {"c1": [Poll(6.0, [(0, 0, "a"), (1, 0, "c")]), Poll(7.0, [(0, 1, "b")])]}
    h.read_committed = {"c1": True}
    return h


def test_clean_history_reports_nothing() -> None:
    assert check(base()) == {}


def test_each_anomaly_is_found() -> None:
    h = base()
    h.final = [(0, 0, "b"), (0, 1, "a"), (0, 2, "a")]
    found = check(h)
    assert set(found) == {"duplicate", "lost-write", "reordered"}
    h = base()
    h.polls["c1"].append(Poll(8.0, [(1, 5, "d")]))
    h.polls["c1"].append(Poll(9.0, [(0, 0, "a")]))
    assert set(check(h)) == {"g1a", "nonmonotonic-poll"}
    h = base()
    h.polls["c1"] = [Poll(4.0, [(1, 0, "c")])]
    assert set(check(h)) == {"precommitted-read"}
    h = base()
    h.final.append((1, 3, "d"))
    assert set(check(h)) == {"g1a"}
