"""Unseen versus unavailable (finding 12 (b)): a value acknowledged in a partition that ended
the run offline was never read because nothing could read it, so the checker reports it as
`unavailable`, not as loss; one missing from a partition the final reads read to its end is
still `unseen`. Which partitions ended offline comes from the harness's "settled" record."""

from __future__ import annotations

from tests.system.jepsen.checker import check

from .builder import Hist


def history(offline: list[str] | None, *, plant: str | None, finals: bool = True) -> Hist:
    """Two keys written and read; `plant` names the key given one more acknowledged value
    that no read returns; `offline` is what the settled record says (None: no record)."""
    h = Hist()
    h.event(10, "assign", ["t-0", "t-1"])
    h.send(1, "t-0", (0, 1), (1, 2))
    h.send(2, "t-1", (0, 100))
    h.poll(10, {"t-0": [(0, 1), (1, 2)], "t-1": [(0, 100)]})
    if plant is not None:
        h.send(3, plant, (2 if plant == "t-0" else 1, 999))
    h.nemesis("healed", [])
    if offline is not None:
        h.nemesis("settled", {"waited_s": 10.0, "open": [], "offline": offline})
    read = {"t-0": [(0, 1), (1, 2)], "t-1": [(0, 100)]}
    if finals:
        h.poll(20, {k: v for k, v in read.items() if k not in (offline or [])}, f="final-poll")
    return h


def test_clean_history_flags_nothing() -> None:
    r = check(history([], plant=None).ops)
    assert r.valid, r.table()
    assert r.count("unseen") == 0 and r.count("unavailable") == 0
    assert r.stats["offline-at-end"] == []


def test_planted_value_in_a_read_partition_is_unseen() -> None:
    r = check(history(["t-1"], plant="t-0").ops)
    assert r.found() == {"unseen": 1}, r.table()
    assert r.anomalies["unseen"] == [{"key": "t-0", "count": 1, "values": [999]}]
    assert r.count("unavailable") == 0


def test_planted_value_in_an_offline_partition_is_unavailable_not_loss() -> None:
    r = check(history(["t-1"], plant="t-1").ops)
    assert r.valid, r.table()  # not counted as an anomaly
    assert r.count("unseen") == 0
    assert r.anomalies["unavailable"] == [{"key": "t-1", "count": 1, "values": [999]}]
    assert "not loss: partition offline at the end" in r.table()
    assert r.stats["offline-at-end"] == ["t-1"]


def test_offline_partition_with_every_value_read_earlier_flags_nothing() -> None:
    r = check(history(["t-1"], plant=None).ops)
    assert r.valid, r.table()
    assert r.count("unavailable") == 0


def test_history_without_settled_record_keeps_counting_unseen() -> None:
    """An older history cannot tell an offline partition from a read one: its unread values
    stay unseen (the behaviour before), and the report says unavailable was not judged."""
    r = check(history(None, plant="t-1").ops)
    assert r.found() == {"unseen": 1}, r.table()
    assert "unavailable" in r.not_checked
    assert r.stats["offline-at-end"] is None


def test_every_partition_offline_is_judged_without_final_reads() -> None:
    """The harness reads back only partitions with a leader; with none, there is no final
    read at all, and every unread acknowledged value is unavailable (crash 237, session 14)."""
    r = check(history(["t-0", "t-1"], plant="t-1", finals=False).ops)
    assert r.valid, r.table()
    assert "unseen" not in r.not_checked
    assert r.count("unseen") == 0
    assert r.anomalies["unavailable"] == [{"key": "t-1", "count": 1, "values": [999]}]


def test_no_final_reads_with_a_partition_still_led_is_not_judged() -> None:
    r = check(history(["t-1"], plant="t-0", finals=False).ops)
    assert "unseen" in r.not_checked
    assert r.count("unseen") == 0
