"""`python -m bench.bounds` measures every workload against a real node, with real clients.

The structure of what it reports is checked, and that every CPU figure the verdicts are built on
is positive; never how fast anything was (that belongs in bench/RESULTS.md, not in asserts).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from bench import bounds, compare
from hypothesis import given
from hypothesis import strategies as st

from tests.support.broker import BrokerProcess


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp("bounds") / "data")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def results(node: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> list[bounds.Result]:
    quick = bounds.parse_args(["--quick"])
    settings = bounds.Settings(quick.records, quick.kb_records)
    return bounds.measure(node, settings, tmp_path_factory.mktemp("spy"), log=lambda _: None)


def test_every_workload_is_measured(results: list[bounds.Result]) -> None:
    assert [r.workload for r in results] == list(bounds.WORKLOADS)
    for r in results:
        assert r.records == (200_000 if r.workload.per_gb else 500_000)
        assert r.rate > 0
        assert r.cores >= 1
        assert r.unit == ("GB" if r.workload.size >= 1024 else "1M records")
        # the cross-check column (whole process minus a no-op run) is a difference of two
        # start-up-sized figures and may be noise at this scale: only its presence is checked
        assert math.isfinite(r.client_tree_net)


def test_every_cpu_figure_is_positive(results: list[bounds.Result]) -> None:
    for r in results:
        name = r.workload.name
        assert r.client_cpu > 0, name
        assert r.node_cpu > 0, name
        assert r.client_per_unit > 0 and r.node_per_unit > 0, name
        assert r.total_per_unit == pytest.approx(r.client_per_unit + r.node_per_unit)
        assert 0 < r.client_share < 1, name
        assert r.ceiling > 0, name
        assert 0 <= r.node_sys_share <= 1, name


def test_client_and_node_figures_come_from_where_the_output_says(
        results: list[bounds.Result]) -> None:
    for r in results:
        # the confluent-kafka producer prints no client CPU of its own; the rest do
        own = not (r.workload.kind == "produce" and r.workload.client == "confluent-kafka")
        assert r.client_source == ("tool's own figure" if own else "whole process - no-op run")
        # consumers print their measured window, producers do not (their run's node CPU
        # less a no-op run's, or the whole run's where the no-op run's noise outweighed it)
        if r.workload.kind == "consume":
            assert r.node_source == "tool's window"
        else:
            assert r.node_source in ("whole run - no-op run",
                                     "whole run (no-op run cost more: noise)")


def test_rendered_section(results: list[bounds.Result]) -> None:
    meta = {"date": "d", "revision": "r", "machine": "m", "load_start": "1", "load_end": "2",
            "processes": "1", "records": "n", "runs": "1"}
    text = bounds.render(results, meta)
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + len(bounds.WORKLOADS)  # header + one per workload
    header = rows[0]
    for column in ("records/s", "client CPU s", "node CPU s", "total core-s", "ceiling on",
                   "target"):
        assert column in header
    verdicts = [line for line in text.splitlines() if line.startswith("- ") and "takes" in line]
    assert len(verdicts) == len(bounds.WORKLOADS)
    for r, line in zip(results, verdicts, strict=True):
        assert line.startswith(f"- {r.workload.name}: the ")
        assert ("cannot hold" in line or "can hold" in line) == (r.workload.target is not None)


def test_profile_tables_from_py_spy(node: BrokerProcess, results: list[bounds.Result],
                                    tmp_path: Path) -> None:
    """One workload again under py-spy: a table for the client and one for the node."""
    w = bounds.WORKLOADS[0]
    cmd = bounds.tool_command(w, node.bootstrap, "bounds-profiled", 200_000)
    assert node.proc is not None
    tables = bounds.profile_run(cmd, psutil.Process(node.proc.pid), tmp_path, w.name)
    assert set(tables) == {"client", "node"}
    client = bounds.top_leaves(tmp_path / "produce-100-b-confluent-kafka-client.txt")
    assert client.busy_samples > 0
    assert 0 < len(client.rows) <= 8
    assert sum(share for _, share in client.rows) <= 1 + 1e-9
    assert "busy samples" in tables["client"] and "| share of busy samples |" in tables["client"]


def test_runs_are_summarised_by_their_median(results: list[bounds.Result]) -> None:
    r = results[0]
    runs = [dataclasses.replace(r, client_cpu=r.client_cpu * k, node_cpu=r.node_cpu * k,
                                rate=r.rate * k) for k in (1, 3, 2)]
    summary = bounds.median_result(runs)
    assert (summary.runs, summary.client_cpu, summary.node_cpu, summary.rate) == (
        3, r.client_cpu * 2, r.node_cpu * 2, r.rate * 2)
    assert summary.total_range == pytest.approx((r.total_per_unit, r.total_per_unit * 3))
    assert f"{summary.total_per_unit:.2f} (" in bounds.table([summary])


def test_update_results_goes_after_the_comparison_and_replaces_itself(tmp_path: Path) -> None:
    path = tmp_path / "RESULTS.md"
    path.write_text(f"# Results\n\n{compare.BEGIN}\nside by side\n{compare.END}\n\n## later\n")
    bounds.update_results("first", path)
    bounds.update_results("second", path)
    text = path.read_text()
    assert text.count(bounds.END) == 1 and "first" not in text
    assert text.index(compare.END) < text.index("second") < text.index("## later")


# ---------------------------------------------------------------- parsers, fuzzed

@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=2000))
def test_top_leaves_takes_any_text(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    raw = tmp_path_factory.mktemp("raw") / "raw.txt"
    raw.write_text(text)
    leaves = bounds.top_leaves(raw)
    assert leaves.busy_samples >= 0
    assert sum(share for _, share in leaves.rows) <= 1 + 1e-9


frame = st.from_regex(r"[a-z_]{1,12} \([a-z/]{1,10}\.py:[0-9]{1,4}\)", fullmatch=True)


@given(st.lists(st.tuples(st.lists(frame, min_size=1, max_size=5),
                          st.integers(min_value=1, max_value=1000)), min_size=1, max_size=30))
def test_top_leaves_counts_each_leaf(tmp_path_factory: pytest.TempPathFactory,
                                     stacks: list[tuple[list[str], int]]) -> None:
    raw = tmp_path_factory.mktemp("raw") / "raw.txt"
    raw.write_text("".join(f"{';'.join(s)} {n}\n" for s, n in stacks))
    own: dict[str, int] = {}
    for s, n in stacks:
        if not any(idle in s[-1] for idle in bounds.IDLE):
            own[s[-1]] = own.get(s[-1], 0) + n
    leaves = bounds.top_leaves(raw)
    assert leaves.busy_samples == sum(own.values())
    for leaf, share in leaves.rows:
        assert share == pytest.approx(own[leaf] / leaves.busy_samples)


def _sampler() -> bounds.NodeSampler:
    return bounds.NodeSampler(psutil.Process())


@given(st.integers(min_value=1, max_value=10**9), st.floats(min_value=1, max_value=1e7),
       st.floats(min_value=0, max_value=1e3), st.integers(min_value=0, max_value=10**6),
       st.integers(min_value=0, max_value=3600 * 1000))
def test_client_run_parses_what_the_tool_prints(records: int, rate: float, cpu: float,
                                                millis: int, span_ms: int) -> None:
    start = dt.datetime(2026, 1, 1) + dt.timedelta(milliseconds=millis)
    end = start + dt.timedelta(milliseconds=span_ms)

    def stamp(t: dt.datetime) -> str:
        return t.strftime("%Y-%m-%d %H:%M:%S:") + f"{t.microsecond // 1000:03d}"

    per_million = cpu / (records / 1e6)
    consumer = (f"# client: x; client CPU {cpu:.2f} s ({per_million:.2f} CPU s per 1M records)\n"
                "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, "
                "nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec\n"
                f"{stamp(start)}, {stamp(end)}, 1.0, 1.0, {records}, {rate:.4f}, 0, 1, 1.0, 1.0\n")
    run = bounds.ClientRun(consumer, 1.0, 1.0, 1.0, _sampler())
    assert run.rate == pytest.approx(rate, rel=1e-4, abs=1e-4)
    window = run.window()
    assert window is not None
    assert window[1] - window[0] == pytest.approx(span_ms / 1000, abs=1e-3)
    tool = run.tool_cpu(records)
    assert tool is not None
    assert tool == pytest.approx(float(f"{per_million:.2f}") * records / 1e6)

    producer = (f"{records} records sent, {rate:.1f} records/sec (1.00 MB/sec), 1.00 ms avg "
                "latency, 2.00 ms max latency.\n")
    run = bounds.ClientRun(producer, 1.0, 1.0, 1.0, _sampler())
    assert run.rate == pytest.approx(rate, abs=0.05)
    assert run.window() is None and run.tool_cpu(records) is None
