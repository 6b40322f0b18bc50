"""Issue 15, short seeded run: a transactional producer killed -9 mid-transaction, its transaction then aborted by InitProducerId.
The workloads run under the seed's plan on the shared namespaced cluster, the faults heal,
the final reads run and the checker must find nothing Kafka forbids."""

from __future__ import annotations

import pytest

from tests.system.jepsen_checks import assert_clean_run


@pytest.mark.timeout(600)
@pytest.mark.parametrize("seed", [1])
def test_jepsen_producer(seed: int) -> None:
    assert_clean_run("producer", seed, ["w4"])
