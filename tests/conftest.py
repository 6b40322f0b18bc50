from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from odradek.broker import local_cluster
from tests.support.broker import BrokerProcess, free_port

# the clusters the tests start draw their ports in this worker's lane, as the tests' nodes do
local_cluster.free_port = free_port

# Hypothesis's two timing checks off for every test (a test's own @settings still wins): the
# suite runs on 2 shared cores, where one slow draw (0.85 s, a stalled process) failed
# test_assignments_round_trip's too_slow health check. Tests never assert timings.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "slow: takes tens of seconds or more (100k-record client runs, crash rounds)")


CONNECT_MODULES = ("tests/integration/test_connect.py", "tests/integration/test_connect_cdc.py",
                   "tests/integration/test_connect_mirror.py")


def xdist_group_of(nodeid: str) -> str:
    """The unit `make test` hands to one xdist worker, in collection order (integration, spark,
    system, then the many short unit modules, which even out the end): a module, so its
    module-scoped node or cluster is started once; every Spark test together, so they share
    one SparkSession and its node; every Jepsen short run together, so they share one
    namespaced cluster (tests/system/jepsen/testing.py); the Connect modules together, so
    they share one node, its Connect worker and PostgreSQL (tests/support/connect.py)."""
    path = nodeid.split("::", 1)[0]
    if path.startswith("tests/spark/"):
        return "spark"
    if path in CONNECT_MODULES:
        return "connect"
    if path.startswith("tests/system/test_jepsen_"):
        return "jepsen"
    return path


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's loadscope scheduling over our own units (xdist_group_of), in collection order.
    (Handing the units that take minutes out first was tried in session 11: the 20k-partition
    test then ran beside the Spark group, both slowed, and pytest took 42:22 against 38:51.)
    Not xdist_group marks and `--dist loadgroup`: pytest 9 keeps a node's id in `_id`, and
    xdist 3.8 still writes the group into `_nodeid`, so the marks were silently ignored."""
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group_of(nodeid)

    return UnitScheduling(config, log)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A fresh single node on a free loopback port, stopped after the test."""
    node = BrokerProcess(tmp_path / "data")
    node.start()
    try:
        yield node
    finally:
        node.kill9() if not node.alive() else node.stop()


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One node shared by the tests of a module (they use distinct topic names)."""
    node = BrokerProcess(tmp_path_factory.mktemp("shared") / "data")
    node.start()
    try:
        yield node
    finally:
        node.stop()
