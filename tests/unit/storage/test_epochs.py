from __future__ import annotations

from pathlib import Path

from odradek.storage.epochs import LeaderEpochCache


def _cache(tmp_path: Path, leo: list[int]) -> LeaderEpochCache:
    return LeaderEpochCache.load(tmp_path, lambda: leo[0])


def test_end_offset_for_follows_kafka(tmp_path: Path) -> None:
    leo = [100]
    c = _cache(tmp_path, leo)
    assert c.end_offset_for(0) == (-1, -1)  # empty cache
    c.assign(2, 10)
    c.assign(4, 30)
    c.assign(7, 60)
    assert c.end_offset_for(7) == (7, 100)  # latest epoch: the log end offset
    assert c.end_offset_for(4) == (4, 60)
    assert c.end_offset_for(5) == (4, 60)  # largest epoch <= 5 is 4, which ends where 7 starts
    assert c.end_offset_for(3) == (2, 30)
    assert c.end_offset_for(1) == (1, 10)  # below the first epoch: requested epoch, first start
    assert c.end_offset_for(8) == (-1, -1)  # above the latest
    assert c.end_offset_for(-1) == (-1, -1)


def test_assign_drops_contradicted_entries_and_ignores_repeats(tmp_path: Path) -> None:
    c = _cache(tmp_path, [0])
    assert c.assign(1, 0)
    assert not c.assign(1, 5)  # same epoch, later offset: nothing new
    c.assign(3, 20)
    c.assign(5, 40)
    c.assign(4, 30)  # a lower epoch at a lower offset than 5: 5 goes
    assert c.entries == [(1, 0), (3, 20), (4, 30)]
    c.assign(6, 25)  # starts before 4's start: 4 goes
    assert c.entries == [(1, 0), (3, 20), (6, 25)]


def test_truncation_and_persistence_in_kafka_format(tmp_path: Path) -> None:
    leo = [100]
    c = _cache(tmp_path, leo)
    for epoch, start in [(0, 0), (1, 10), (2, 20), (3, 30)]:
        c.assign(epoch, start)
    c.truncate_from_end(20)
    assert c.entries == [(0, 0), (1, 10)]
    c.truncate_from_start(15)
    assert c.entries == [(1, 15)]
    c.assign(5, 50)
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n1 15\n5 50\n"
    again = _cache(tmp_path, leo)
    assert again.entries == [(1, 15), (5, 50)]
    assert again.end_offset_for(5) == (5, 100)


def test_corrupt_checkpoint_is_ignored(tmp_path: Path) -> None:
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n3\n1 2\n")
    assert _cache(tmp_path, [0]).entries == []
