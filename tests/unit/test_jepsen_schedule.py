"""Issue 15: fault plans are a function of the seed (same seed, families and length: the same
schedule), different seeds give different schedules, and a plan stays inside its bounds."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.system.jepsen.schedule import DURATIONS, FAMILIES, plan, plan_json

ALL = list(FAMILIES)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32), fams=st.lists(st.sampled_from(ALL), min_size=1,
                                                 unique=True),
       length=st.floats(5, 600), short=st.booleans())
def test_same_seed_same_schedule(seed: int, fams: list[str], length: float,
                                 short: bool) -> None:
    a = plan(seed, fams, length, short=short)
    b = plan(seed, fams, length, short=short)
    assert plan_json(a) == plan_json(b)
    assert a, "a plan has at least one fault"
    for f in a:
        assert f.family in fams and f.kind in FAMILIES[f.family]
        assert f.at < length
        lo, hi = DURATIONS[f.family]
        if not short:
            assert lo <= f.duration <= hi
        if f.family == "pause":
            assert f.duration >= 5  # the 5-20 s, also in the short plans
    for x, y in itertools.pairwise(a):
        assert y.at >= x.at + x.duration  # one at a time


def test_seeds_differ() -> None:
    plans = {plan_json(plan(s, ALL, 120)) for s in range(20)}
    assert len(plans) == 20


def test_families_mixed_over_a_long_plan() -> None:
    faults = plan(7, ALL, 3600)
    assert {f.family for f in faults} == set(ALL)
    proxy = [f for f in faults if f.family == "proxy" and f.kind == "loss"]
    assert proxy and all(0.10 <= f.params["rate"] <= 0.30 for f in proxy)


def test_unknown_family_refused() -> None:
    with pytest.raises(ValueError, match="unknown fault families"):
        plan(0, ["kill", "meteor"], 60)
