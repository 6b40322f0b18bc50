"""Issue 15, short seeded run: iptables partitions in the namespaces: minority, isolated node, leader cut from its followers, bridge, flapping.
The workloads run under the seed's plan on the shared namespaced cluster, the faults heal,
the final reads run and the checker must find nothing Kafka forbids."""

from __future__ import annotations

import pytest

from tests.system.jepsen_checks import assert_clean_run


@pytest.mark.timeout(600)
@pytest.mark.parametrize("seed", [1])
def test_jepsen_partition(seed: int) -> None:
    assert_clean_run("partition", seed, ["w4"])


@pytest.mark.timeout(900)
def test_jepsen_partition_seed_318_transactions_across_coordinator_moves() -> None:
    """Finding 14's seed as a regression (docs/reliability.md): a bridge partition, then
    partition 1's leader cut from its followers, move the transaction coordinator's
    leadership while W2 builds transactions. The coordinator's writes that never reached the
    ISR left jepsen-1 taking a transaction no committed record knew of (G1a 12). The run
    plays the seed's schedule with W1-W4; the unit tests of the fix play the case exactly
    (tests/unit/coordinator/test_txn_uncommitted_writes.py)."""
    assert_clean_run("partition", 318, ["w1", "w2", "w3", "w4"], 25.0)
