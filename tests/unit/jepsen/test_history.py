"""The history file: what is written is read back, torn tails are tolerated, threads interleave
safely."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

import pytest

from tests.system.jepsen.history import History, key_of, load, split_key


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    with History(path) as h:
        p = h.new_process()
        op = h.invoke(p, "send", [["send", "t-0", 1]])
        h.ok(op, [["send", "t-0", [0, 1]]])
        op2 = h.invoke(p, "poll", [["poll"]])
        h.info(op2, error="timeout")
        h.nemesis("kill", {"node": 2})
        h.event(p, "rebalance", {"assigned": ["t-0"], "revoked": []})
    ops = load(path)
    assert [o.index for o in ops] == list(range(7))
    assert [o.type for o in ops] == ["invoke", "ok", "invoke", "info", "info", "invoke", "ok"]
    assert ops[1].value == [["send", "t-0", [0, 1]]]
    assert ops[3].value == [["poll"]] and ops[3].error == "timeout"
    assert ops[4].process == "nemesis" and ops[4].f == "kill"
    assert all(a.time <= b.time for a, b in itertools.pairwise(ops))
    assert ops == h.ops()


def test_torn_last_line_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    with History(path) as h:
        h.nemesis("kill", 1)
    with path.open("a") as f:
        f.write('{"index": 1, "ti')
    assert len(load(path)) == 1


def test_damage_in_the_middle_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text('{"index": 0\n{"index":1,"time":0,"process":1,"type":"ok","f":"x"}\n')
    with pytest.raises(ValueError):
        load(path)


def test_threads_interleave_without_losing_ops(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    with History(path) as h:

        def work() -> None:
            p = h.new_process()
            for i in range(200):
                op = h.invoke(p, "send", [["send", "t-0", i]])
                h.ok(op, [["send", "t-0", [i, i]]])

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    ops = load(path)
    assert len(ops) == 1600
    assert [o.index for o in ops] == list(range(1600))
    assert len({o.process for o in ops}) == 4


def test_keys() -> None:
    assert key_of("my-topic", 12) == "my-topic-12"
    assert split_key("my-topic-12") == ("my-topic", 12)
