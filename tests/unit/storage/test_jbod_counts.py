"""JBOD placement counts: the LogManager keeps its logs-per-directory count on every add,
remove and move (no walk over every log per new one), always equal to a recount."""

from __future__ import annotations

import uuid
from pathlib import Path

from odradek.replication.alter_log_dirs import copy_chunk
from odradek.storage.log_manager import LogManager
from tests.unit.storage.support import append_values, small_config


def recount(lm: LogManager) -> dict[Path, int]:
    counts: dict[Path, int] = {}
    for _, lg, _ in lm.logs_and_futures():
        counts[lg.dir.parent] = counts.get(lg.dir.parent, 0) + 1
    return counts


def test_counts_follow_creation_deletion_moves_and_reloads(tmp_path: Path) -> None:
    d = [tmp_path / f"d{i}" for i in range(3)]
    lm = LogManager(d[0], small_config(), log_dirs=d[1:])
    lm.load()
    tid = uuid.uuid4()
    for i in range(7):
        lm.create("t", i, tid)
    assert lm.log_counts() == recount(lm) == {d[0]: 3, d[1]: 2, d[2]: 2}
    lm.delete("t", 0)
    assert lm.log_counts() == recount(lm) == {d[0]: 2, d[1]: 2, d[2]: 2}
    # a move: the future counts in its directory while it copies
    current = lm.get("t", 1)
    append_values(current, [b"x", b"y"])
    src = current.dir.parent
    dst = next(x for x in d if x != src)
    future = lm.create_future("t", 1, dst)
    assert lm.log_counts() == recount(lm)
    copy_chunk(current, future, 0)
    lm.swap_future("t", 1)
    assert lm.get("t", 1).dir.parent == dst
    assert lm.log_counts() == recount(lm)
    # an aborted move gives its count back
    lm.create_future("t", 2, next(x for x in d if x != lm.get("t", 2).dir.parent))
    lm.abort_future("t", 2)
    assert lm.log_counts() == recount(lm)
    # the next log goes where the fewest are, by the kept counts
    fewest = min(d, key=lambda x: (lm.log_counts().get(x, 0), d.index(x)))
    assert lm.create("t", 9, tid).dir.parent == fewest
    lm.close()
    assert lm.log_counts() == {}
    lm = LogManager(d[0], small_config(), log_dirs=d[1:])
    lm.load()
    assert lm.log_counts() == recount(lm) and sum(lm.log_counts().values()) == 7
    # a stray goes out of the count
    lm.reconcile({("t", i): tid for i in range(1, 7)}, set())
    assert lm.log_counts() == recount(lm) and sum(lm.log_counts().values()) == 6
    lm.close()
