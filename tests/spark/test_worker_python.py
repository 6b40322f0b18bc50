"""The tests' session starts its Python workers as every odradek session does: through
odradek-spark-python (odradek/spark_python.py), which imports the installed pyspark instead of
the bundled source-only zip Spark puts first on the worker's path."""

from __future__ import annotations

import os
from pathlib import Path

from pyspark.sql import SparkSession

from odradek.spark.session import LAUNCHER


def _probe(_: object) -> tuple[str, str, str]:
    # runs in a Python worker: the daemon it was forked from was started as
    # `<python> <launcher> -m pyspark.daemon pyspark.worker` (the launcher's shebang)
    import py4j
    import pyspark

    with open("/proc/self/cmdline", "rb") as f:
        cmdline = f.read().decode(errors="replace").replace("\0", " ")
    return cmdline, pyspark.__file__ or "", py4j.__file__ or ""


def test_workers_run_the_launcher_and_the_installed_pyspark(spark: SparkSession) -> None:
    import pyspark

    seen = spark.sparkContext.parallelize(range(2), 2).map(_probe).collect()
    assert len(seen) == 2
    for cmdline, pyspark_file, py4j_file in seen:
        assert LAUNCHER in cmdline, cmdline
        assert " -m pyspark." in cmdline, cmdline
        assert Path(pyspark_file).parent == Path(pyspark.__file__).parent, pyspark_file
        assert ".zip" not in py4j_file, py4j_file


def _python_children(pid: int) -> list[str]:
    """The command lines of `pid`'s child processes that run a Python interpreter."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid != pid:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().decode(errors="replace").replace("\0", " ")
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        if "python" in cmdline:
            found.append(cmdline)
    return found


def test_every_python_process_of_the_jvm_runs_the_launcher(spark: SparkSession) -> None:
    # a task's worker, then a read of a registered Python data source: the JVM starts its
    # daemons (the data source lookup's with PYSPARK_DRIVER_PYTHON, not PYSPARK_PYTHON)
    assert spark.sparkContext.parallelize(range(2), 2).map(lambda x: x + 1).sum() == 3
    spark.sql("SELECT 1").collect()
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    pid = int(jvm.java.lang.ProcessHandle.current().pid())
    children = _python_children(pid)
    assert children, f"no Python process under the JVM {pid}"
    assert all(LAUNCHER in c for c in children), children
