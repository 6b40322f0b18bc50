"""odradek-spark-python (odradek/spark_python.py) run as Spark runs a Python worker: the
bundled pyspark and py4j zips first on PYTHONPATH, `-m module`; the worker imports the
installed pyspark (bytecode cached) and sees what `python -m` gives it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def _launcher() -> Path:
    launcher = Path(sys.executable).parent / "odradek-spark-python"
    if not os.access(launcher, os.X_OK):
        pytest.fail(f"{launcher} is missing: `pip install -e .` installs pyproject's scripts")
    return launcher


def test_a_worker_started_through_the_launcher_imports_the_installed_pyspark(
        tmp_path: Path) -> None:
    import pyspark

    installed = Path(pyspark.__file__).parent
    lib = installed / "python" / "lib"
    zips = sorted(str(z) for z in lib.glob("*.zip"))
    assert any(z.endswith("pyspark.zip") for z in zips), f"no bundled zip in {lib}"
    (tmp_path / "probe.py").write_text(
        "import sys, pyspark, py4j\n"
        "print(pyspark.__file__); print(py4j.__file__); print(sys.path[0]); print(__name__)\n"
        "print(sys.argv[0]); print(*sys.argv[1:])\n")
    # as Spark starts a worker: the bundled zips first on PYTHONPATH, `-m module`
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(zips)}
    # (the daemon is started as `-m pyspark.daemon <worker module>`)
    out = subprocess.run([str(_launcher()), "-m", "probe", "pyspark.worker"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=120, check=True)
    pyspark_file, py4j_file, first, name, argv0, rest = out.stdout.split()
    assert Path(pyspark_file).parent == installed
    assert ".zip" not in py4j_file
    assert Path(first) == tmp_path  # the working directory first, as `python -m` has it
    assert name == "__main__"
    assert Path(argv0) == tmp_path / "probe.py" and rest == "pyspark.worker"
    # anything but `-m module` is the interpreter's own
    version = subprocess.run([str(_launcher()), "-c", "import sys; print(sys.version)"],
                             capture_output=True, text=True, timeout=60, check=True)
    assert version.stdout.strip() == sys.version
