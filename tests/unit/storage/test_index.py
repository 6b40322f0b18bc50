from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.storage.index import CorruptIndex, OffsetIndex, TimeIndex


def test_offset_index_lookup_and_file(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "0.index", 80)
    assert idx.max_entries == 10
    for rel, pos in [(3, 100), (9, 250), (20, 600)]:
        idx.append(rel, pos)
    assert (tmp_path / "0.index").read_bytes() == struct.pack(">iiiiii", 3, 100, 9, 250, 20, 600)
    assert [idx.lookup(r) for r in (0, 2, 3, 8, 9, 19, 20, 10_000)] == [
        0,
        0,
        100,
        100,
        250,
        250,
        600,
        600,
    ]
    assert [idx.lookup_by_position(p) for p in (0, 99, 100, 599, 600, 10**6)] == [
        0,
        0,
        100,
        250,
        600,
        600,
    ]
    idx.truncate_to_position(250)
    assert len(idx) == 1 and (tmp_path / "0.index").stat().st_size == 8
    idx.close()
    again = OffsetIndex(tmp_path / "0.index", 80)
    again.load(1000, 100)
    assert list(again.rel_offsets) == [3]


def test_time_index_only_grows(tmp_path: Path) -> None:
    tix = TimeIndex(tmp_path / "0.timeindex", 24)
    tix.maybe_append(100, 1)
    tix.maybe_append(100, 2)  # not past the last timestamp
    tix.maybe_append(150, 4)
    tix.maybe_append(160, 5)  # full (2 entries)
    tix.maybe_append(170, 6, skip_full_check=True)
    assert list(tix.timestamps) == [100, 150, 170]
    assert [tix.lookup_below(t) for t in (50, 100, 101, 150, 151, 999)] == [None, None, 1, 1, 4, 6]
    tix.close()
    assert (tmp_path / "0.timeindex").read_bytes() == struct.pack(">qiqiqi", 100, 1, 150, 4, 170, 6)


@pytest.mark.parametrize(
    "entries",
    [[(5, 10), (5, 20)], [(5, 20), (6, 10)], [(-1, 0)], [(1, 5000)], [(1, 0), (2**31 - 1, 10)]],
)
def test_offset_index_sanity_check(tmp_path: Path, entries: list[tuple[int, int]]) -> None:
    path = tmp_path / "0.index"
    path.write_bytes(b"".join(struct.pack(">ii", *e) for e in entries))
    with pytest.raises(CorruptIndex):
        OffsetIndex(path, 1 << 20).load(1000, 1000)


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=200))
def test_loading_garbage_is_either_valid_or_corrupt(tmp_path_factory, data: bytes) -> None:
    d = tmp_path_factory.mktemp("i")
    (d / "0.index").write_bytes(data)
    (d / "0.timeindex").write_bytes(data)
    idx = OffsetIndex(d / "0.index", 1 << 20)
    try:
        idx.load(1 << 20, 1 << 20)
    except CorruptIndex:
        pass
    else:
        assert list(idx.rel_offsets) == sorted(set(idx.rel_offsets))
    tix = TimeIndex(d / "0.timeindex", 1 << 20)
    try:
        tix.load(1 << 20)
    except CorruptIndex:
        pass
    else:
        assert list(tix.timestamps) == sorted(set(tix.timestamps))
