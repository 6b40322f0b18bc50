"""odradek-spark-python (odradek/spark_python.py): Spark's bundled pyspark/py4j zips leave a
worker's path only when the installed copy of the same package is on it (the launcher's run
is in tests/integration/test_spark_python.py)."""

from __future__ import annotations

from pathlib import Path

from odradek.spark_python import unzipped_path


def _layout(root: Path, installed: bool = True) -> tuple[str, str, str]:
    site = root / "site-packages"
    lib = site / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    if installed:
        (site / "pyspark" / "__init__.py").write_text("")
        (site / "py4j").mkdir()
        (site / "py4j" / "__init__.py").write_text("")
    return str(site), str(lib / "pyspark.zip"), str(lib / "py4j-0.10.9.9-src.zip")


def test_bundled_zips_go_when_the_installed_copy_is_on_the_path(tmp_path: Path) -> None:
    site, pyspark_zip, py4j_zip = _layout(tmp_path)
    other = str(tmp_path / "elsewhere" / "pyspark.zip")  # not inside a pyspark install
    path = ["/work", pyspark_zip, py4j_zip, other, "/usr/lib/python3.11", site]
    assert unzipped_path(path) == ["/work", other, "/usr/lib/python3.11", site]


def test_bundled_zips_stay_when_nothing_else_holds_the_package(tmp_path: Path) -> None:
    site, pyspark_zip, py4j_zip = _layout(tmp_path, installed=False)
    path = [pyspark_zip, py4j_zip, site]
    assert unzipped_path(path) == path
