from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.broker import BrokerProcess


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "slow: takes tens of seconds or more (100k-record client runs, crash rounds)")


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
