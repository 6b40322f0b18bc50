"""Issue 15's workloads on a plain 3-node cluster (no namespaces, no proxy): each runs until
it has made progress, reads everything back, and the checker must find nothing; then again
with one node killed (-9) mid-run and restarted. The history of every run is kept in the
test's tmp dir; a failure prints the checker's table and the history's path, so it can be
checked again with `python -m tests.system.jepsen.checker HISTORY`."""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.system.cluster_support import Cluster, running_cluster, wait_until
from tests.system.jepsen.checker import Report, check, check_raft
from tests.system.jepsen.env import Env
from tests.system.jepsen.history import History
from tests.system.jepsen.workloads import WORKLOADS

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("jepsen-cluster"), 3) as c:
        yield c


def oks(h: History, f: str, *, nonempty_poll: bool = False) -> int:
    n = 0
    for o in h.ops():
        if o.type != "ok" or o.f != f:
            continue
        if nonempty_poll and not any(m[0] == "poll" and m[1] for m in o.value if len(m) > 1):
            continue
        n += 1
    return n


# How each workload shows it has made progress: a count of its ok ops.
PROGRESS: dict[str, Callable[[History], int]] = {
    "w1": lambda h: min(oks(h, "send"), 4 * oks(h, "poll", nonempty_poll=True)),
    "w2": lambda h: oks(h, "txn"),
    "w3": lambda h: sum(
        oks(h, f) for f in ("create-topic", "alter-config", "create-partitions", "delete-topic")
    ),
    "w4": lambda h: oks(h, "send"),
}
STEP = 30  # ok ops a workload must add at each stage of a run


def run_workload(
    cluster: Cluster,
    tmp: Path,
    name: str,
    seed: int,
    fault: Callable[[History, Any], None] | None = None,
) -> tuple[Report, Path]:
    tag = f"{name}-{seed}-{'fault' if fault else 'clean'}"
    env = Env(
        bootstrap=cluster.bootstrap_of(),
        topics=[f"j-{tag}-a", f"j-{tag}-b"],
        partitions=3,
        admin_bootstrap=cluster.bootstrap_of(),
    )
    path = tmp / f"{tag}.jsonl"
    h = History(path)
    workload = WORKLOADS[name](env, h, random.Random(seed))
    stop = threading.Event()
    failed: list[BaseException] = []

    def run() -> None:
        try:
            workload.run(stop)
        except BaseException as exc:
            failed.append(exc)

    t = threading.Thread(target=run, name=f"jepsen-{name}")
    try:
        return _drive(cluster, h, workload, t, stop, failed, name, fault, path)
    except BaseException:
        print(f"history kept at {keep(path)}")
        raise


def _drive(
    cluster: Cluster,
    h: History,
    workload: Any,
    t: threading.Thread,
    stop: threading.Event,
    failed: list[BaseException],
    name: str,
    fault: Callable[[History, Any], None] | None,
    path: Path,
) -> tuple[Report, Path]:
    t.start()
    progress = PROGRESS[name]
    try:

        def advanced_by(n: int) -> Callable[[], bool]:
            start = progress(h)
            return lambda: bool(failed) or progress(h) >= start + n

        wait_until(advanced_by(STEP), f"{name} to make progress", 240, cluster)
        if fault is not None:
            fault(h, workload)
            wait_until(advanced_by(STEP), f"{name} to make progress after the fault", 300, cluster)
    finally:
        stop.set()
        t.join(300)
    assert not t.is_alive(), f"{name} did not stop"
    if failed:
        raise failed[0]
    h.nemesis("heal")
    assert workload.final_reads(), f"{name}: final reads did not finish (history {path})"
    h.close()
    return check(h.ops()), path


KEEP = Path(tempfile.gettempdir()) / "jepsen-kept"


def keep(path: Path) -> Path:
    """Copy a failed run's history out of pytest's tmp dirs (which other runs rotate away)."""
    KEEP.mkdir(parents=True, exist_ok=True)
    kept = KEEP / f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{path.name}"
    if path.exists():
        shutil.copyfile(path, kept)
    return kept


def assert_clean(report: Report, path: Path) -> None:
    print(f"\n{path}\n{report.table(2)}")  # the run's summary, shown with -s
    if not report.valid:
        pytest.fail(f"history kept at {keep(path)}\n{report.table(4)}")


@pytest.mark.parametrize("name", ["w1", "w2", "w3", "w4"])
def test_workload_on_a_healthy_cluster(cluster: Cluster, tmp_path: Path, name: str) -> None:
    report, path = run_workload(cluster, tmp_path, name, seed=1)
    assert_clean(report, path)
    assert report.stats["ok"] > STEP


@pytest.mark.parametrize("name", ["w1", "w2", "w3", "w4"])
def test_workload_with_a_node_killed(cluster: Cluster, tmp_path: Path, name: str) -> None:
    def kill_and_restart(h: History, workload: Any) -> None:
        # W1 loses a partition leader, W3 the active controller (the quorum leader), W2 and
        # W4 a node that leads neither (W2's random group and transactional ids put some of
        # its coordinators there or not: both happen across runs)
        controller = cluster.quorum_leader()
        leader = (
            controller if name == "w3" else cluster.partitions(workload.env.topics[0])[0]["leader"]
        )
        if name == "w1":
            victim = leader
        elif name == "w3":
            victim = controller
        else:
            victim = next(n for n in sorted(cluster.nodes) if n not in (leader, controller))
        h.nemesis("kill", {"node": victim, "signal": 9})
        cluster.kill9(victim)
        try:
            # let the survivors work a while without it before it comes back
            start = PROGRESS[name](h)
            wait_until(
                lambda: PROGRESS[name](h) >= start + STEP // 2,
                f"{name} to make progress with node {victim} down",
                300,
                cluster,
            )
        finally:
            # back even when the test fails, so the module's other tests get 3 nodes
            cluster.restart(victim)
            h.nemesis("start", {"node": victim})
        cluster.wait_ready(180)

    report, path = run_workload(cluster, tmp_path, name, seed=2, fault=kill_and_restart)
    raft = check_raft({n: node.data_dir for n, node in cluster.nodes.items()})
    assert_clean(report.merge(raft), path)
