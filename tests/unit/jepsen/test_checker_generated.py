"""Hypothesis plays a correct Kafka (append-only logs, consumers that advance, aborted
transactions that take offsets but stay invisible, sends whose outcome is unknown, group
rebalances that rewind a consumer to its committed offset) and records the history; the
checker must find nothing in any of them. Planting one lost write must then be found."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.system.jepsen.checker import check

from .builder import Hist

KEYS = ["t-0", "t-1", "t-2"]

action = st.one_of(
    st.tuples(
        st.just("send"),
        st.integers(0, 2),
        st.sampled_from(KEYS),
        st.integers(1, 3),
        st.sampled_from(["ok", "ok", "ok", "info-landed", "info-lost", "fail", "abort"]),
    ),
    st.tuples(st.just("poll"), st.integers(0, 2), st.integers(1, 4)),
    st.tuples(st.just("rebalance"), st.integers(0, 2), st.sampled_from(KEYS)),
    st.tuples(st.just("commit"), st.integers(0, 2)),
    st.tuples(st.just("nemesis")),
)


class Sim:
    """A correct cluster and the history its clients would record."""

    def __init__(self) -> None:
        self.h = Hist()
        # key -> [(offset, value, visible)]
        self.logs: dict[str, list[tuple[int, int, bool]]] = {k: [] for k in KEYS}
        self.next_offset = dict.fromkeys(KEYS, 0)
        self.next_value = 0
        # consumer -> key -> next offset; committed offsets shared by the group
        self.pos: dict[int, dict[str, int]] = {c: dict.fromkeys(KEYS, 0) for c in range(3)}
        self.committed = dict.fromkeys(KEYS, 0)
        for c in range(3):
            self.h.event(100 + c, "subscribe", ["t"])

    def append(self, key: str, value: int, visible: bool) -> int:
        off = self.next_offset[key]
        self.logs[key].append((off, value, visible))
        # a transaction's commit/abort marker takes an offset too
        self.next_offset[key] = off + (1 if visible else 2)
        return off

    def send(self, producer: int, key: str, n: int, outcome: str) -> None:
        values = []
        for _ in range(n):
            self.next_value += 1
            values.append(self.next_value)
        inv = [["send", key, v] for v in values]
        if outcome == "fail":
            self.h.op(producer, "send", inv, "fail", inv, "NOT_ENOUGH_REPLICAS")
            return
        if outcome == "abort":
            done = [["send", key, [self.append(key, v, False), v]] for v in values]
            self.h.op(producer, "txn", inv, "fail", done, "aborted")
            return
        if outcome == "info-lost":
            self.h.op(producer, "send", inv, "info", inv, "timeout")
            return
        offs = [self.append(key, v, True) for v in values]
        if outcome == "info-landed":
            self.h.op(producer, "send", inv, "info", inv, "timeout")
        else:
            self.h.op(
                producer,
                "send",
                inv,
                "ok",
                [["send", key, [o, v]] for o, v in zip(offs, values, strict=True)],
            )

    def poll(self, consumer: int, n: int) -> None:
        got: dict[str, list[list[int]]] = {}
        for key in KEYS:
            start = self.pos[consumer][key]
            taken = [(o, v) for o, v, vis in self.logs[key] if o >= start and vis][:n]
            if taken:
                got[key] = [[o, v] for o, v in taken]
                self.pos[consumer][key] = taken[-1][0] + 1
        self.h.op(100 + consumer, "poll", [["poll"]], "ok", [["poll", got]])

    def commit(self, consumer: int) -> None:
        self.committed.update(self.pos[consumer])

    def rebalance(self, consumer: int, key: str) -> None:
        self.pos[consumer][key] = self.committed[key]
        self.h.event(100 + consumer, "rebalance", {"revoked": [key], "assigned": [key]})

    def final(self) -> None:
        got = {k: [[o, v] for o, v, vis in log if vis] for k, log in self.logs.items() if log}
        self.h.op(
            200, "final-poll", [["poll"]], "ok", [["poll", {k: v for k, v in got.items() if v}]]
        )


def play(actions: list[tuple[Any, ...]]) -> Sim:
    sim = Sim()
    for a in actions:
        if a[0] == "send":
            sim.send(a[1], a[2], a[3], a[4])
        elif a[0] == "poll":
            sim.poll(a[1], a[2])
        elif a[0] == "rebalance":
            sim.rebalance(a[1], a[2])
        elif a[0] == "commit":
            sim.commit(a[1])
        else:
            sim.h.nemesis("kill", {"node": 1})
    sim.final()
    return sim


@settings(max_examples=150, deadline=None)
@given(st.lists(action, max_size=60))
def test_generated_clean_histories_flag_nothing(actions: list[tuple[Any, ...]]) -> None:
    r = check(play(actions).h.ops)
    assert r.valid, r.table()


@settings(max_examples=60, deadline=None)
@given(st.lists(action, max_size=40), st.integers(1, 5))
def test_a_planted_lost_write_is_found(actions: list[tuple[Any, ...]], n: int) -> None:
    sim = play(actions)
    # acknowledge a value at an offset the log then loses, with a later one read back
    key = "t-0"
    off = sim.next_offset[key]
    sim.h.op(1, "send", [["send", key, -1]], "ok", [["send", key, [off, -1]]])
    sim.h.op(1, "send", [["send", key, -2]], "ok", [["send", key, [off + n, -2]]])
    sim.h.op(300, "final-poll", [["poll"]], "ok", [["poll", {key: [[off + n, -2]]}]])
    r = check(sim.h.ops)
    assert [c["value"] for c in r.anomalies["lost-write"]] == [-1]
    assert r.count("unseen") == 1
