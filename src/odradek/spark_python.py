"""`odradek-spark-python`: the interpreter odradek's SparkSessions give Spark for its Python
workers (PYSPARK_PYTHON, set by odradek.spark.session), so that they start in time on a busy
machine.

Spark starts every Python process with its bundled `pyspark/python/lib/pyspark.zip` (and the
py4j zip) first on PYTHONPATH. That zip holds sources only, and Python never caches bytecode
for a zip, so each process compiles the pyspark modules it imports again, pyspark.sql's
33,000-line functions module among them: seconds of CPU before it can talk to the JVM. The
driver's streaming-source process (PythonStreamingSourceRunner) is started outside the daemon
and Spark gives it a fixed 10 s (PythonWorkerFactory, not configurable) to connect back; on a
loaded machine the compile alone took longer and queries failed to start. The same pyspark is
installed beside the zip with its bytecode cached, so this launcher drops the bundled zips
from sys.path (only when that installed copy is on the path) and runs the module Spark named
(`-m module [args]`) in this process, as `python -m` would. Anything else (`-VV`, `-c ...`) is
handed to the interpreter unchanged.

It lives outside odradek.spark on purpose: importing that package imports pyspark, which must
not happen before the path is fixed.
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

# The zips Spark puts on a worker's PYTHONPATH, in <SPARK_HOME>/python/lib, with the package
# each holds.
_BUNDLED = {"pyspark.zip": "pyspark", "py4j": "py4j"}


def _held(zip_name: str) -> str | None:
    for prefix, package in _BUNDLED.items():
        if zip_name == prefix or (zip_name.startswith(prefix + "-") and zip_name.endswith(".zip")):
            return package
    return None


def unzipped_path(path: list[str]) -> list[str]:
    """`path` without the zips that a pip-installed pyspark bundles in pyspark/python/lib,
    when the package each holds is importable from another entry of `path` (the installed
    copy, whose bytecode is cached). A zip from anywhere else is kept."""
    kept = []
    for entry in path:
        zipped = Path(entry)
        package = _held(zipped.name)
        home = zipped.parent.parent.parent  # <home>/python/lib/<zip>
        bundled = (package is not None and zipped.parent.name == "lib"
                   and zipped.parent.parent.name == "python" and home.name == "pyspark")
        if bundled and any((Path(other) / str(package) / "__init__.py").is_file()
                           for other in path if other != entry and other):
            continue
        kept.append(entry)
    return kept


def main() -> None:
    args = sys.argv[1:]
    if len(args) < 2 or args[0] != "-m":
        os.execv(sys.executable, [sys.executable, *args])
    sys.path[:] = unzipped_path(sys.path)
    # `python -m` puts the working directory first (Spark may start a worker in the job's
    # files directory); a console script starts with its own bin directory there instead.
    sys.path[0] = os.getcwd()
    # the module's own arguments stay (the daemon is `-m pyspark.daemon <worker module>`);
    # runpy puts the module's file in argv[0], as `python -m` does
    sys.argv = args[1:]
    runpy.run_module(args[1], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
