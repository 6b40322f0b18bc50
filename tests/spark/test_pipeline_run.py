"""`odradek pipeline run`: the example pipeline through the real CLI, and bad definitions."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from examples.sql_pipeline import _generator as gen

from tests.spark.support import create_topic, read_all, topic_name
from tests.support.broker import BrokerProcess
from tests.support.spark_cluster import cluster_env, spark_cluster

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "sql_pipeline"
ODRADEK = Path(sys.executable).parent / "odradek"
# The CLI runs its own Spark driver next to the tests' session: keep it small.
SMALL = ["--conf", "spark.driver.memory=640m", "--conf", "spark.sql.shuffle.partitions=2"]


def run_cli(args: list[str], env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ODRADEK), "pipeline", "run", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def example_setup(bootstrap: str, count: int) -> tuple[list[str], dict[str, str], list[dict[str, object]]]:
    """Fresh topics and produced page views: (the CLI's --var arguments, the topics, the events)."""
    topics = {"input": create_topic(bootstrap, topic_name("pv-in"), 3),
              "slow": create_topic(bootstrap, topic_name("pv-slow"), 2),
              "stats": create_topic(bootstrap, topic_name("pv-stats"), 2)}
    events = gen.events(count)
    gen.produce(bootstrap, topics["input"], events)
    args = [a for name, topic in topics.items() for a in ("--var", f"{name}={topic}")]
    return [*args, "--var", f"slow_ms={gen.SLOW_MS}"], topics, events


def outputs(bootstrap: str, topics: dict[str, str]) -> tuple[Counter[tuple[str, str, int, int]],
                                                            dict[str, tuple[int, int]]]:
    """What the flows wrote: slow views as a multiset, and the latest stats record per region."""
    slow: Counter[tuple[str, str, int, int]] = Counter()
    for key, value in read_all(bootstrap, topics["slow"], 2):
        row = json.loads(value)
        assert key is not None
        slow[(key.decode(), row["page"], row["user"], row["ms"])] += 1
    # region_stats is a changelog: the latest record of each key is the current count.
    latest: dict[str, tuple[int, int]] = {}
    for key, value in read_all(bootstrap, topics["stats"], 2):
        row = json.loads(value)
        assert key is not None and key.decode() == row["region"]
        latest[row["region"]] = (row["views"], row["total_ms"])
    return slow, latest


def check_outputs(bootstrap: str, topics: dict[str, str], events: list[dict[str, object]]) -> None:
    slow, latest = outputs(bootstrap, topics)
    assert slow == gen.expected_slow(events)
    assert latest == gen.expected_stats(events)


# JVMs and Python workers starting: ~2.5 min on an idle machine, 8+ min at load 15.
@pytest.mark.timeout(1200)
def test_example_pipeline_runs_sql_and_python_flows(spark_broker: BrokerProcess, tmp_path: Path) -> None:
    bootstrap = spark_broker.bootstrap
    variables, topics, events = example_setup(bootstrap, 400)
    assert gen.expected_slow(events) and len(gen.expected_stats(events)) == len(gen.REGIONS)
    common = [str(EXAMPLE.relative_to(ROOT)), "--bootstrap-server", bootstrap,
              "--checkpoint-dir", str(tmp_path / "ck"), *SMALL, *variables]
    # First on a standalone cluster (a master and a worker from the pyspark installation),
    # the pipeline unchanged: only --master differs.
    with spark_cluster(tmp_path / "cluster") as cluster:
        assert cluster.alive_workers() == 1
        # --spark-log-level INFO: Spark's INFO lines are back on stderr (WARN is the default).
        res = run_cli([*common, "--available-now", "--master", cluster.master_url,
                       "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.executor.memory=512m",
                       "--spark-log-level", "INFO"],
                      env=cluster_env(tmp_path / "cluster"))
        assert res.returncode == 0, res.stderr[-5000:] + cluster.log("worker")
        # The executors ran on the cluster's worker: it made a work directory for the application.
        apps = list((tmp_path / "cluster" / "worker").glob("app-*"))
        assert len(apps) == 1, apps
    assert re.search(r" INFO SparkContext: Running Spark version", res.stderr), res.stderr[-3000:]
    # The pipeline's own lines on stdout, none of Spark's: per batch of each flow its input
    # rows, rate and output rows (slow views as the sink counts them, region_stats as counted
    # by the runner's foreachBatch writer), then each flow's totals.
    slow_out, stats_out = sum(gen.expected_slow(events).values()), len(gen.expected_stats(events))
    lines = res.stdout.splitlines()
    assert "INFO" not in res.stdout, res.stdout
    assert [ln for ln in lines if ln.startswith("flow 'slow_views' finished")] == [
        f"flow 'slow_views' finished: 1 batch, 400 rows in, {slow_out} rows out"], res.stdout
    assert [ln for ln in lines if ln.startswith("flow 'region_stats' finished")] == [
        f"flow 'region_stats' finished: 1 batch, 400 rows in, {stats_out} rows out"], res.stdout
    assert re.search(rf"^flow 'slow_views': batch 0: 400 rows in, {slow_out} rows out, [\d,]+ rows/s "
                     rf"\(so far: 1 batch, 400 in, {slow_out} out\)$", res.stdout, re.M), res.stdout
    assert re.search(rf"^flow 'region_stats': batch 0: 400 rows in, {stats_out} rows out, [\d,]+ rows/s",
                     res.stdout, re.M), res.stdout
    check_outputs(bootstrap, topics, events)

    # More views, then the same pipeline and checkpoints in continuous mode until SIGTERM:
    # it resumes where the first run stopped (no slow view written twice) and stops cleanly.
    more = gen.events(150, seed=11)
    gen.produce(bootstrap, topics["input"], more)
    want = (gen.expected_slow(events + more), gen.expected_stats(events + more))
    # Output to files: a pipe nobody reads while the run goes on could fill and block it.
    out_path, err_path = tmp_path / "continuous.out", tmp_path / "continuous.err"
    with out_path.open("w") as out_file, err_path.open("w") as err_file:
        proc = subprocess.Popen([str(ODRADEK), "pipeline", "run", *common, "--continuous",
                                 "--trigger-interval", "1 second"], cwd=ROOT, stdout=out_file,
                                stderr=err_file, text=True)
    try:
        deadline = time.monotonic() + 300
        got = outputs(bootstrap, topics)
        while got != want and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(2)
            got = outputs(bootstrap, topics)
        # Spark records a batch's progress just after the batch commits: the output can be
        # read before the runner has a progress event to print, so wait for its lines too.
        while (_rows_reported(out_path.read_text()) < 150 and proc.poll() is None
               and time.monotonic() < deadline):
            time.sleep(0.5)
        assert proc.poll() is None, "the continuous run exited by itself"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out, err = out_path.read_text(), err_path.read_text()
    assert proc.returncode == 0, err[-5000:]
    assert "stopping: signal received" in out, out
    assert got == want
    # The 150 new views went through batches numbered after the first run's, and each flow's
    # totals were printed when the signal stopped it.
    batches = re.findall(r"^flow 'slow_views': batch (\d+): ([\d,]+) rows in", out, re.M)
    assert batches and min(int(b) for b, _ in batches) >= 1, out
    assert sum(int(n.replace(",", "")) for _, n in batches) == 150, out
    assert re.search(r"^flow 'slow_views' stopped: \d+ batch(es)?, 150 rows in, \d+ rows out$", out, re.M), out


SOURCE = "CREATE SOURCE s OPTIONS (subscribe 'in', startingOffsets 'earliest');\n"
FLOW = "CREATE FLOW f AS INSERT INTO TOPIC out SELECT value FROM s;\n"


@pytest.mark.parametrize(("files", "expected"), [
    ({"p.sql": "CREATE SOURCE s OPTIONS (subscribe 'in', startingOffset 'earliest');\n" + FLOW},
     ["p.sql:1", "source 's'", "unknown option 'startingOffset'"]),
    ({"p.sql": "CREATE SOURCE s OPTIONS (subscribe 'in', assign '{\"in\": [0]}');\n" + FLOW},
     ["p.sql:1", "source 's'", "exactly one of the options 'assign', 'subscribe', 'subscribePattern'"]),
    ({"a.sql": SOURCE, "b.py": "from odradek.spark.pipeline import flow\n\n\n"
                               "@flow(topic='out', deliveryGuarante='exactly-once')\n"
                               "def f(spark):\n    return spark.table('s')\n"},
     ["b.py:4", "flow 'f'", "unknown option 'deliveryGuarante'"]),
    ({"p.sql": SOURCE + "CREATE FLOW f AS INSERT INTO TOPIC out\nSELEC value FROM s;\n"},
     ["p.sql:2", "flow 'f'", "PARSE_SYNTAX_ERROR"]),
], ids=["unknown-option", "subscribe-and-assign", "python-unknown-option", "sql-syntax-error"])
def test_bad_definitions_fail_naming_the_problem(spark_broker: BrokerProcess, tmp_path: Path,
                                                 files: dict[str, str], expected: list[str]) -> None:
    pipeline = tmp_path / "pipeline"
    pipeline.mkdir()
    for name, text in files.items():
        (pipeline / name).write_text(text)
    res = run_cli([str(pipeline), "--bootstrap-server", spark_broker.bootstrap,
                   "--checkpoint-dir", str(tmp_path / "ck"), *SMALL], timeout=300)
    assert res.returncode == 2, res.stderr[-5000:]
    error = [line for line in res.stderr.splitlines() if line.startswith("error: ")]
    assert error, res.stderr[-5000:]
    message = "\n".join(res.stderr.splitlines()[res.stderr.splitlines().index(error[0]):])
    for part in expected:
        assert part in message, message
    assert not (tmp_path / "ck").exists()


def _rows_reported(out: str) -> int:
    """Input rows of the slow_views batches the runner has printed so far."""
    return sum(int(n.replace(",", ""))
               for n in re.findall(r"^flow 'slow_views': batch \d+: ([\d,]+) rows in", out, re.M))
