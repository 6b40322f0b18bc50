"""How the multi-process perf tools split their work: every record in exactly one share."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from odradek.client.perf_parallel import consumer_quotas, shares


@given(st.integers(0, 10**9), st.integers(1, 64))
def test_shares_add_up_and_differ_by_at_most_one(total: int, n: int) -> None:
    parts = shares(total, n)
    assert len(parts) == n
    assert sum(parts) == total
    assert max(parts) - min(parts) <= 1


@given(st.lists(st.integers(0, 10**7), min_size=1, max_size=16), st.integers(1, 2 * 10**8))
def test_consumer_quotas_never_exceed_what_each_has(available: list[int], wanted: int) -> None:
    quotas = consumer_quotas(available, wanted)
    assert len(quotas) == len(available)
    assert all(0 <= q <= a for q, a in zip(quotas, available, strict=True))
    assert sum(quotas) == min(wanted, sum(available))
