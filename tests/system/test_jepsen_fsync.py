"""Issue 15, short seeded run: fsync/fdatasync returning EIO or hanging (strace --inject) on one node.
The workloads run under the seed's plan on the shared namespaced cluster, the faults heal,
the final reads run and the checker must find nothing Kafka forbids."""

from __future__ import annotations

import pytest

from tests.system.jepsen_checks import assert_clean_run


@pytest.mark.timeout(600)
@pytest.mark.parametrize("seed", [1])
def test_jepsen_fsync(seed: int) -> None:
    assert_clean_run("fsync", seed, ["w4"])
