"""The checker on hand-made histories: each anomaly planted is flagged, clean histories
(with unknown outcomes, failed sends and rebalances) flag nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.system.jepsen.checker import check

from .builder import Hist


def found(h: Hist) -> dict[str, int]:
    return check(h.ops).found()


def clean() -> Hist:
    """Two producers, an assign consumer reading everything, a final poll."""
    h = Hist()
    h.event(10, "assign", ["t-0", "t-1"])
    h.send(1, "t-0", (0, 1), (1, 2))
    h.send(2, "t-1", (0, 100))
    h.poll(10, {"t-0": [(0, 1)]})
    h.nemesis("kill", {"node": 2})
    h.send(1, "t-0", (2, 3))
    h.send(2, "t-1", (None, 101), typ="info")  # unknown: never read, not lost
    h.send(2, "t-1", (None, 102), typ="fail")  # certainly not written
    h.poll(10, {"t-0": [(1, 2), (2, 3)], "t-1": [(0, 100)]})
    h.nemesis("heal")
    h.poll(20, {"t-0": [(0, 1), (1, 2), (2, 3)], "t-1": [(0, 100)]}, f="final-poll")
    return h


def test_clean_history_flags_nothing() -> None:
    r = check(clean().ops)
    assert r.valid, r.table()
    assert "unseen" in r.anomalies  # judged (there is a final poll), and empty
    assert r.stats["values-sent-ok"] == 4


def test_info_send_read_later_is_fine_and_counts_as_written() -> None:
    h = Hist()
    h.send(1, "t-0", (None, 1), typ="info")
    h.send(1, "t-0", (1, 2))
    h.poll(10, {"t-0": [(0, 1), (1, 2)]}, f="final-poll")
    assert found(h) == {}


def test_lost_write() -> None:
    h = Hist()
    h.send(1, "t-0", (0, 1))
    h.send(1, "t-0", (1, 2))
    h.send(1, "t-0", (2, 3))
    h.poll(10, {"t-0": [(0, 1), (2, 3)]})  # offset 1 acknowledged, later offset read, 1 never
    r = check(h.ops)
    assert r.found() == {"lost-write": 1, "poll-skip": 1}
    case = r.anomalies["lost-write"][0]
    assert case["key"] == "t-0" and case["value"] == 2 and case["writer"]["index"] == 3


def test_lost_write_of_info_send_only_when_another_of_its_sends_was_read() -> None:
    h = Hist()
    h.op(
        1,
        "send",
        [["send", "t-0", 1], ["send", "t-0", 2]],
        "info",
        [["send", "t-0", [0, 1]], ["send", "t-0", [1, 2]]],
    )
    h.send(2, "t-0", (2, 9))
    h.poll(10, {"t-0": [(0, 1)]})
    h.poll(11, {"t-0": [(2, 9)]})
    assert found(h) == {"lost-write": 1}


def test_duplicate() -> None:
    h = Hist()
    h.send(1, "t-0", (0, 1))
    h.poll(10, {"t-0": [(0, 1), (1, 1)]})
    r = check(h.ops)
    assert "duplicate" in r.found()
    assert r.anomalies["duplicate"][0]["offsets"] == [0, 1]


def test_inconsistent_offsets() -> None:
    h = Hist()
    h.send(1, "t-0", (0, 1))
    h.send(2, "t-0", (0, 7))
    r = check(h.ops)
    assert r.found() == {"inconsistent-offsets": 1}
    assert r.anomalies["inconsistent-offsets"][0]["values"] == [1, 7]


def test_g1a_aborted_read() -> None:
    h = Hist()
    h.op(1, "txn", [["send", "t-0", 1]], "fail", [["send", "t-0", [0, 1]]], "aborted")
    h.poll(10, {"t-0": [(0, 1)]})
    r = check(h.ops)
    assert "G1a" in r.found()
    assert r.anomalies["G1a"][0]["writer"]["type"] == "fail"


def test_precommitted_read() -> None:
    h = Hist()
    h.op(
        1,
        "txn",
        [["send", "t-0", 1], ["poll"]],
        "ok",
        [["send", "t-0", [0, 1]], ["poll", {"t-0": [[0, 1]]}]],
    )
    assert found(h) == {"precommitted-read": 1}


def test_poll_skip() -> None:
    h = Hist()
    h.send(1, "t-0", (0, 1), (1, 2), (2, 3))
    h.poll(10, {"t-0": [(0, 1)]})
    h.poll(11, {"t-0": [(1, 2)]})
    h.poll(10, {"t-0": [(2, 3)]})  # process 10 jumped over 2
    r = check(h.ops)
    assert r.found() == {"poll-skip": 1}
    assert r.anomalies["poll-skip"][0]["skipped"] == [2]


def test_nonmonotonic_poll() -> None:
    h = Hist()
    h.send(1, "t-0", (0, 1), (1, 2))
    h.poll(10, {"t-0": [(0, 1), (1, 2)]})
    h.poll(10, {"t-0": [(1, 2)]})
    assert found(h) == {"nonmonotonic-poll": 1}


def test_nonmonotonic_poll_within_one_poll() -> None:
    h = Hist()
    h.send(1, "t-0", (0, 1), (1, 2))
    h.poll(10, {"t-0": [(1, 2), (0, 1)]})
    assert found(h) == {"nonmonotonic-poll": 1}


def test_rebalance_excuses_rewind_and_skip() -> None:
    h = Hist()
    h.event(10, "subscribe", ["t"])
    h.send(1, "t-0", (0, 1), (1, 2), (2, 3), (3, 4))
    h.poll(10, {"t-0": [(0, 1), (1, 2)]})
    # the group took t-0 away and gave it back; the consumer resumes from the committed 0
    h.poll(10, {"t-0": [(0, 1)]}, rebalance={"revoked": ["t-0"], "assigned": ["t-0"]})
    h.event(10, "rebalance", {"revoked": ["t-0"], "assigned": []})
    h.event(10, "rebalance", {"revoked": [], "assigned": ["t-0"]})
    h.poll(10, {"t-0": [(3, 4)]})  # another member consumed and committed 1..2
    h.poll(11, {"t-0": [(0, 1), (1, 2), (2, 3), (3, 4)]}, f="final-poll")
    assert found(h) == {}


def test_rebalance_of_another_key_does_not_excuse() -> None:
    h = Hist()
    h.send(1, "t-0", (0, 1), (1, 2))
    h.poll(10, {"t-0": [(0, 1), (1, 2)]})
    h.poll(10, {"t-0": [(0, 1)]}, rebalance={"revoked": ["t-1"], "assigned": ["t-1"]})
    assert found(h) == {"nonmonotonic-poll": 1}


def test_failed_txn_reads_do_not_move_the_position() -> None:
    # an aborted consume-transform-produce txn seeks back; the retry re-reads the same records
    h = Hist()
    h.send(1, "t-0", (0, 1), (1, 2))
    h.poll(10, {"t-0": [(0, 1)]}, f="txn")
    h.op(10, "txn", [["poll"]], "fail", [["poll", {"t-0": [[1, 2]]}]], "aborted")
    h.poll(10, {"t-0": [(1, 2)]}, f="txn")
    assert found(h) == {}


def test_nonmonotonic_send() -> None:
    h = Hist()
    h.send(1, "t-0", (1, 1))
    h.send(1, "t-0", (0, 2))  # the producer's second send landed before its first
    assert found(h) == {"nonmonotonic-send": 1}


def test_nonmonotonic_send_within_one_op() -> None:
    h = Hist()
    h.send(1, "t-0", (1, 1), (0, 2))
    assert found(h) == {"nonmonotonic-send": 1}


def test_int_send_skip_is_reported_but_allowed() -> None:
    h = Hist()
    h.send(1, "t-0", (0, 1), (2, 2))
    h.send(2, "t-0", (1, 50))
    r = check(h.ops)
    assert r.valid
    assert r.count("int-send-skip") == 1
    assert "(allowed)" in r.table()


def test_unseen_after_heal() -> None:
    h = Hist()
    h.send(1, "t-0", (0, 1))
    h.send(1, "t-1", (0, 5))
    h.nemesis("heal")
    h.poll(20, {"t-0": [(0, 1)]}, f="final-poll")
    r = check(h.ops)
    assert r.found() == {"unseen": 1}
    assert r.anomalies["unseen"][0] == {"key": "t-1", "count": 1, "values": [5]}


def test_unseen_not_judged_without_final_reads() -> None:
    h = Hist()
    h.send(1, "t-1", (0, 5))
    r = check(h.ops)
    assert r.valid and "unseen" in r.not_checked
    assert "not checked" in r.table()


def test_table_lists_counts_and_examples() -> None:
    h = Hist()
    h.send(1, "t-0", (0, 1))
    h.send(2, "t-0", (0, 7))
    table = check(h.ops).table()
    assert "inconsistent-offsets" in table and "INVALID" in table
    assert '"offset": 0' in table


# ---------------------------------------------------------------- W3 metadata checks


def meta(h: Hist, p: int, f: str, value: dict, typ: str = "ok") -> None:
    h.op(p, f, value, typ, value)


def describe(
    h: Hist, p: int, topic: str, exists: bool, partitions: int = 1, config: dict | None = None
) -> None:
    h.op(
        p,
        "describe-topic",
        {"topic": topic},
        "ok",
        {
            "topic": topic,
            "exists": exists,
            "partitions": partitions if exists else None,
            "config": config if exists else None,
        },
    )


def test_metadata_clean() -> None:
    h = Hist()
    meta(h, 1, "create-topic", {"topic": "x", "partitions": 1})
    describe(h, 1, "x", False)  # a broker a little behind
    describe(h, 1, "x", True)
    meta(h, 1, "alter-config", {"topic": "x", "config": {"retention.ms": "1000"}})
    describe(h, 1, "x", True, config={"retention.ms": "1000"})
    meta(h, 1, "create-partitions", {"topic": "x", "count": 3})
    describe(h, 1, "x", True, 3)
    meta(h, 1, "delete-topic", {"topic": "x"})
    describe(h, 1, "x", False)
    assert found(h) == {}


def test_metadata_not_seen_and_regressed() -> None:
    h = Hist()
    meta(h, 1, "create-topic", {"topic": "x", "partitions": 1})
    describe(h, 1, "x", True)
    describe(h, 1, "x", False)  # the topic went without a delete
    meta(h, 1, "alter-config", {"topic": "x", "config": {"retention.ms": "1000"}})
    describe(h, 1, "x", True, config={"retention.ms": "604800000"})
    meta(h, 1, "delete-topic", {"topic": "x"})
    assert found(h) == {"metadata-regressed": 1, "metadata-not-seen": 1}


# ---------------------------------------------------------------- re-checking a kept history


def test_cli_rechecks_a_kept_history(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.system.jepsen.checker.__main__ import main
    from tests.system.jepsen.history import History

    path = tmp_path / "h.jsonl"
    with History(path) as h:
        op = h.invoke(1, "send", [["send", "t-0", 1]])
        h.ok(op, [["send", "t-0", [0, 1]]])
        op = h.invoke(2, "send", [["send", "t-0", 2]])
        h.ok(op, [["send", "t-0", [0, 2]]])
    assert main([str(path), "--json", str(tmp_path / "r.json")]) == 1
    out = capsys.readouterr().out
    assert "inconsistent-offsets" in out and "INVALID" in out
    assert '"valid": false' in (tmp_path / "r.json").read_text()
    clean_path = tmp_path / "clean.jsonl"
    with History(clean_path) as h:
        op = h.invoke(1, "send", [["send", "t-0", 1]])
        h.ok(op, [["send", "t-0", [0, 1]]])
    assert main([str(clean_path)]) == 0
