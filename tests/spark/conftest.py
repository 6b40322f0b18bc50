"""One local SparkSession and one broker shared by every Spark test (topics are per test)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from odradek.spark import session
from odradek.spark.session import worker_python
from tests.support.broker import BrokerProcess

SMALL = {
    "spark.sql.shuffle.partitions": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "768m",
    "spark.executor.memory": "512m",
    "spark.sql.streaming.stopTimeout": "30s",
    "spark.python.worker.reuse": "true",
}


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    # Python workers through odradek's launcher, as every odradek session starts them (and
    # what this process's later children inherit: drivers the tests start take it too).
    os.environ["PYSPARK_PYTHON"] = worker_python()
    os.environ["PYSPARK_DRIVER_PYTHON"] = worker_python()
    s = session("local[2]", "odradek-tests", SMALL)
    s.sparkContext.setLogLevel("ERROR")
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="session")
def spark_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    # test data carries fixed 2023 timestamps: time retention would delete it mid-run, so it
    # is off by default; a test that wants it sets retention.ms on its topic (checked often)
    node = BrokerProcess(Path(tmp_path_factory.mktemp("spark-node")) / "data",
                         settings={"log.retention.ms": "-1", "log.retention.check.interval.ms": "500"})
    node.start()
    try:
        yield node
    finally:
        node.stop()
