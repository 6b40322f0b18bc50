"""Values the CLI repeats so that `--help` need not import their home module."""

from __future__ import annotations

from odradek.cli import bench, common
from odradek.client import BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP
from odradek.perf import results as perf


def test_bootstrap_constants_agree_with_the_client() -> None:
    assert common.DEFAULT_BOOTSTRAP == DEFAULT_BOOTSTRAP
    assert common.BOOTSTRAP_ENV == BOOTSTRAP_ENV


def test_bench_client_names_agree_with_the_perf_tools() -> None:
    assert (bench.CONFLUENT, bench.COLUMNAR, bench.CLIENTS, bench.DEFAULT_BATCH) == \
        (perf.CONFLUENT, perf.COLUMNAR, perf.CLIENTS, perf.DEFAULT_BATCH)
