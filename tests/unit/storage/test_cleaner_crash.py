"""A crash at each step of the cleaner's swap leaves a log that reopens valid.

The intermediate states are built from real files: a log is copied before a pass, the pass
runs on the original, and each state combines the old segments with the cleaned one under the
suffixes the swap gives it step by step (`.cleaned`, `.swap`, old files `.deleted`).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from odradek.storage.cleaner.swap import recover_swaps
from odradek.storage.log import Log
from tests.unit.storage.compaction_support import (
    append_kv,
    cleaner_for,
    compact_config,
    latest_by_key,
    records_of,
)
from tests.unit.storage.support import assert_indexes_valid

CFG = compact_config(index_interval_bytes=64)
NEW = ("index", "timeindex", "log")  # the order the swap renames them in


def _build(root: Path) -> tuple[Path, Path, list[int], list[tuple[int, bytes, bytes | None]]]:
    """(cleaned dir, copy taken before the pass, old segment bases, written records)."""
    src = root / "orig" / "c-0"
    log = Log.open(src, CFG)
    written: list[tuple[int, bytes, bytes | None]] = []
    for i in range(60):
        key = b"k%d" % (i % 9)
        value = None if i % 13 == 5 else b"v%d" % i
        first = append_kv(log, [(key, value)], ts=1_000 + i)
        written.append((first, key, value))
        if i % 12 == 11:
            log.roll()
    log.roll()
    log.flush()
    bases = [s.base_offset for s in log.segments[:-1]]
    before = root / "before" / "c-0"
    shutil.copytree(src, before)
    stats = cleaner_for(log, root).clean_log(log)
    assert stats.segments_out == 1 and stats.segments_in == len(bases) > 2
    log.close()  # closing removes the .deleted files: the states below recreate them
    return src, before, bases, written


def _state(root: Path, name: str, src: Path, before: Path, bases: list[int], *, new: dict[str, str],
           old_deleted: int = 0, truncate_log: bool = False) -> Path:
    d = root / name / "c-0"
    shutil.copytree(before, d)
    for base in bases[:old_deleted]:
        for ext in ("log", "index", "timeindex"):
            p = d / f"{base:020d}.{ext}"
            if p.exists():
                os.replace(p, d / f"{base:020d}.{ext}.deleted")
    for ext, suffix in new.items():
        target = d / f"{0:020d}.{ext}{suffix}"
        if suffix == "" and (d / target.name).exists():
            (d / target.name).unlink()
        shutil.copyfile(src / f"{0:020d}.{ext}", target)
        if truncate_log and ext == "log":
            with open(target, "r+b") as f:
                f.truncate(os.path.getsize(target) // 2)
    return d


STATES = {
    # (new-segment file suffixes, old segments renamed .deleted, torn .cleaned log) -> cleaned?
    "cleaned-partial": ({e: ".cleaned" for e in NEW}, 0, True, False),
    "cleaned-whole": ({e: ".cleaned" for e in NEW}, 0, False, False),
    "indexes-swapped": ({"index": ".swap", "timeindex": ".swap", "log": ".cleaned"}, 0, False, False),
    "log-swapped": ({e: ".swap" for e in NEW}, 0, False, True),
    "one-old-deleted": ({e: ".swap" for e in NEW}, 1, False, True),
    "two-old-deleted": ({e: ".swap" for e in NEW}, 2, False, True),
    "all-old-deleted": ({e: ".swap" for e in NEW}, 99, False, True),
    "indexes-in-place": ({"index": "", "timeindex": "", "log": ".swap"}, 99, False, True),
    "done-deleted-left": ({e: "" for e in NEW}, 99, False, True),
}


@pytest.mark.parametrize("state", list(STATES))
@pytest.mark.parametrize("clean_shutdown", [False, True])
def test_reopen_after_a_crash_at_each_step(tmp_path: Path, state: str, clean_shutdown: bool) -> None:
    src, before, bases, written = _build(tmp_path)
    new, old_deleted, torn, expect_cleaned = STATES[state]
    d = _state(tmp_path, state, src, before, bases, new=new,
               old_deleted=min(old_deleted, len(bases)), truncate_log=torn)
    original = [(r.offset, r.key, r.value) for _, r in records_of(Log.open(before, CFG))]
    cleaned_log = Log.open(src, CFG)
    cleaned = [(r.offset, r.key, r.value) for _, r in records_of(cleaned_log)]
    leo = cleaned_log.log_end_offset
    assert cleaned != original

    log = Log.open(d, CFG, recovery_point=leo if clean_shutdown else 0)
    got = [(r.offset, r.key, r.value) for _, r in records_of(log)]
    assert got == (cleaned if expect_cleaned else original)
    assert log.log_end_offset == leo
    leftovers = [p.name for p in d.iterdir() if p.name.endswith((".cleaned", ".swap", ".deleted"))]
    assert leftovers == []
    assert_indexes_valid(log)
    # whatever state, a reader sees the latest value of every key last, offsets increasing
    offsets = [o for o, _, _ in got]
    assert offsets == sorted(set(offsets))
    last_seen = {k: (o, v) for o, k, v in got}
    assert last_seen == latest_by_key(written)
    # and the log takes appends where it left off
    assert append_kv(log, [(b"after", b"crash")]) == leo


def test_an_empty_swap_segment_replaces_the_old_one(tmp_path: Path) -> None:
    d = tmp_path / "c-0"
    log = Log.open(d, CFG)
    append_kv(log, [(b"a", b"1")])
    log.roll()
    append_kv(log, [(b"b", b"2")])
    log.close()
    (d / f"{0:020d}.log.swap").write_bytes(b"")
    assert recover_swaps(d) == [0]
    assert (d / f"{0:020d}.log").stat().st_size == 0
    log = Log.open(d, CFG)
    assert [(r.offset, r.value) for _, r in records_of(log)] == [(1, b"2")]
