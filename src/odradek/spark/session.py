"""A SparkSession with the odradek data source registered."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession


def register(spark: SparkSession) -> SparkSession:
    from odradek.spark.datasource import OdradekDataSource

    spark.dataSource.register(OdradekDataSource)
    return spark


# The launcher's name (pyproject's [project.scripts]), installed next to this interpreter.
LAUNCHER = "odradek-spark-python"

# How long a Python process and the JVM wait for each other when one connects to the other
# (spark.python.authenticate.socketTimeout, default 15 s; it reaches Python as
# SPARK_AUTH_SOCKET_TIMEOUT). The data source's planning processes (create, plan the read,
# commit) keep it as the timeout of every later read from the JVM too, so on a machine at
# load 10+ on 2 cores a JVM busy for 15 s failed them. Two minutes is still an answer when
# a process really is gone (Spark then fails the query and the Connect worker restarts it).
PYTHON_WORKERS = {"spark.python.authenticate.socketTimeout": "120s"}


def worker_python() -> str:
    """The interpreter Spark starts Python processes with: odradek-spark-python beside this
    interpreter (odradek/spark_python.py: the installed pyspark instead of Spark's bundled
    zip, whose modules every process would compile again), else this interpreter."""
    launcher = Path(sys.executable).parent / LAUNCHER
    return str(launcher) if os.access(launcher, os.X_OK) else sys.executable


def session(master: str = "local[2]", app_name: str = "odradek",
            conf: Mapping[str, str] | None = None) -> SparkSession:
    """A local (or `master`) session whose Python workers run this interpreter's
    installation (through its launcher, `worker_python`)."""
    # Workers must import odradek and confluent-kafka, i.e. run the interpreter we run in.
    # PYSPARK_DRIVER_PYTHON too: the JVM starts some Python processes of its own with it
    # first (PythonUtils.defaultPythonExec: the data source lookup at a session's first
    # read), and the launcher runs anything but `-m module` as this interpreter would.
    os.environ.setdefault("PYSPARK_PYTHON", worker_python())
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", worker_python())
    builder = SparkSession.builder.master(master).appName(app_name)
    settings = {
        "spark.sql.shuffle.partitions": "2",
        "spark.ui.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        **PYTHON_WORKERS,
    }
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    return register(builder.getOrCreate())
