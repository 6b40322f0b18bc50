"""The deterministic replication simulation (sim.py) over many seeds: CI runs
ODRADEK_SIM_SEEDS of them (default 200); `python -m tests.unit.replication.sim --seeds 0:5000`
runs thousands, and a failing seed replays exactly with `--seeds N -v`."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest

from odradek.replication.partition import Partition

from .sim import InvariantBroken, run_seed

SEEDS = int(os.environ.get("ODRADEK_SIM_SEEDS", "200"))


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    # recovery after the simulated crashes logs every repair; not what these tests read
    logger = logging.getLogger("odradek.storage")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


@pytest.mark.parametrize("seed", range(SEEDS))
def test_seed(seed: int) -> None:
    # the invariants are checked inside, after every step; a broken one raises
    run_seed(seed)


def test_the_simulation_exercises_what_it_checks() -> None:
    # over a few seeds: acknowledged records, transactions, leader changes, ISR changes
    runs = [run_seed(seed) for seed in range(100, 110)]
    assert sum(r["acked"] for r in runs) > 500
    assert sum(r["txns"] for r in runs) > 20
    assert sum(r["epoch"] > 2 for r in runs) >= 5
    assert sum(r["isr_changes"] for r in runs) > 10


def test_same_seed_same_run() -> None:
    assert run_seed(7) == run_seed(7)


def test_the_invariants_catch_a_leader_that_commits_alone(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    # a broken HW rule (the leader's log end, as if the ISR were just the leader) must be
    # caught: an acknowledged record lost by a later leader, or logs differing below a HW
    def broken(self: Partition) -> bool:
        if not self.is_leader:
            return False
        self.high_watermark = max(self.high_watermark, self.log.log_end_offset)
        self._notify(1)
        return True

    monkeypatch.setattr(Partition, "maybe_increment_hw", broken)
    caught = 0
    for seed in range(10):
        try:
            run_seed(seed)
        except InvariantBroken:
            caught += 1
    assert caught > 0


def test_the_invariants_catch_a_follower_that_never_truncates(monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    # without KIP-101/279 truncation a returning leader keeps its divergent tail
    import odradek.replication.follower as follower

    monkeypatch.setattr(follower, "truncation_offset",
                        lambda part, epoch, end: (part.log.log_end_offset, True))
    caught = 0
    for seed in range(10):
        try:
            run_seed(seed)
        except InvariantBroken:
            caught += 1
    assert caught > 0
