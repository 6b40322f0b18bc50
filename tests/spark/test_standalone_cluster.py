"""The example pipeline, unchanged, on a Spark standalone cluster started from pyspark."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.spark.test_pipeline_run import (
    EXAMPLE,
    ROOT,
    SMALL,
    check_outputs,
    example_setup,
    run_cli,
)
from tests.support.broker import BrokerProcess
from tests.support.spark_cluster import cluster_env, spark_cluster


# JVMs and Python workers starting: ~1.5 min on an idle machine, 5+ min at load 15.
@pytest.mark.timeout(900)
def test_example_pipeline_on_standalone_cluster(spark_broker: BrokerProcess, tmp_path: Path) -> None:
    bootstrap = spark_broker.bootstrap
    variables, topics, events = example_setup(bootstrap, 300)
    with spark_cluster(tmp_path / "cluster") as cluster:
        assert cluster.alive_workers() == 1
        res = run_cli([str(EXAMPLE.relative_to(ROOT)), "--master", cluster.master_url, "--available-now",
                       "--bootstrap-server", bootstrap, "--checkpoint-dir", str(tmp_path / "ck"),
                       *SMALL, "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.executor.memory=512m",
                       *variables], env=cluster_env(tmp_path / "cluster"))
        assert res.returncode == 0, res.stderr[-5000:] + cluster.log("worker")
        # The executors ran on the cluster's worker: it made a work directory for the application.
        apps = list((tmp_path / "cluster" / "worker").glob("app-*"))
        assert len(apps) == 1, apps
    check_outputs(bootstrap, topics, events)
