"""One seeded run, and a matrix of them: cluster up, workloads under the schedule, heal, final
reads, check, table. Everything a run leaves is in its directory: `plan.json` (the schedule),
`history.jsonl` (every op and fault), `result.json` (figures and anomalies), the nodes' logs.
"""

from __future__ import annotations

import itertools
import json
import random
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.system.jepsen.checker import check, check_raft
from tests.system.jepsen.cluster import JepsenCluster, jepsen_cluster
from tests.system.jepsen.env import Env
from tests.system.jepsen.history import History, load
from tests.system.jepsen.nemesis import Context
from tests.system.jepsen.nemesis.clock import node_env
from tests.system.jepsen.nemesis.runner import NemesisRunner
from tests.system.jepsen.proxy import Proxy
from tests.system.jepsen.schedule import plan, plan_json
from tests.system.jepsen.settle import settle
from tests.system.jepsen.workloads import WORKLOADS

__all__ = ["RunResult", "cluster_options", "play", "run_one", "stop_workloads", "unavailability"]

TOPICS = ["jepsen"]  # W1/W2/W4's data topic; W2 adds its own output topic
TMPFS_MB = 256


def unavailability(ops: list[Any]) -> float:
    """The worst write unavailability (seconds): over every key, the longest stretch with no
    send to it acknowledged, while the workloads ran (from the run's first acknowledged send
    until the harness tells them to stop: its "workloads-stop" note; the final reads and the
    wait for workload threads to stop are not counted). Consumer polls do not count: an empty poll is always ok."""
    marks = {op.f: op.time for op in ops if op.process == "nemesis"}
    end = marks.get("workloads-stop", marks.get("settled"))
    acked: dict[str, list[int]] = {}
    for op in ops:
        if op.type != "ok" or op.f not in ("send", "txn") or not isinstance(op.value, list):
            continue
        if end is not None and op.time >= end:
            continue
        for micro in op.value:
            if isinstance(micro, list) and micro and micro[0] == "send":
                acked.setdefault(str(micro[1]), []).append(op.time)
    if not acked:
        return 0.0
    start = min(min(t) for t in acked.values())
    stop = marks.get("workloads-stop", max(max(t) for t in acked.values()))
    worst = 0
    for times in acked.values():
        edges = [start, *sorted(times), stop]
        worst = max(worst, *(b - a for a, b in itertools.pairwise(edges)))
    return round(worst / 1e9, 2)


@dataclass
class RunResult:
    seed: int
    families: list[str]
    workloads: list[str]
    ops: int
    faults: int
    nemesis_errors: list[str]
    anomalies: dict[str, int]  # every anomaly the checker names -> count (0 included)
    found: dict[str, int]  # those that make the run invalid (Kafka-allowed ones left out)
    not_checked: dict[str, str]
    workload_errors: list[str]
    unavailable_s: float
    table: str
    out: str
    failed: str | None = None  # the run did not finish: why (its history is checked all the same)
    # partitions with no leader at the final reads (their unread values are "unavailable");
    # None when the run did not get as far as settling
    offline: list[str] | None = None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def raft_report(cluster: JepsenCluster) -> Any:
    """The Raft invariants from the stopped nodes' data directories and logs."""
    return check_raft(cluster.node_dirs(), {i: n.log(10**9) for i, n in cluster.nodes.items()})


def cluster_options(families: list[str], out: Path) -> dict[str, Any]:
    """What the cluster needs for these families: the proxy, tmpfs data dirs, skewclock, and
    fsyncs often enough for the fsync family to hit (partition data is fsynced only on roll
    by default)."""
    return {
        "proxy": "proxy" in families,
        "tmpfs_mb": TMPFS_MB if "disk" in families else None,
        "env": {i: node_env(out, i) for i in (1, 2, 3)} if "clock" in families else None,
        "settings": {"log.flush.interval.messages": "200"} if "fsync" in families else None,
    }


def run_one(seed: int, families: list[str], workloads: list[str], length: float, out: Path,
            *, partitions: int = 3, short: bool = False) -> RunResult:
    """A cluster of its own, made for `families`; `play` on it; the nodes stopped and their
    Raft logs checked with the history. Everything kept in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    opts = cluster_options(families, out)
    proxy = Proxy(seed) if opts.pop("proxy") else None
    try:
        with jepsen_cluster(out / "cluster", proxy=proxy, **opts) as cluster:
            result = play(cluster, proxy, seed, families, workloads, length, out,
                          partitions=partitions, short=short, raft=True)
    finally:
        if proxy is not None:
            proxy.close()
    return result


def play(cluster: JepsenCluster, proxy: Proxy | None, seed: int, families: list[str],
         workloads: list[str], length: float, out: Path, *, topics: list[str] | None = None,
         partitions: int = 3, short: bool = False, raft: bool = False) -> RunResult:
    """Workloads under `plan(seed, families, length)` on a running cluster; heal; final
    reads; the history checked (and with `raft`, the nodes stopped and their Raft logs
    checked too). `topics` must be new to the cluster: values are unique per key per run."""
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown:
        raise ValueError(f"unknown workloads {unknown}; known: {sorted(WORKLOADS)}")
    topics = topics or list(TOPICS)
    out.mkdir(parents=True, exist_ok=True)
    faults = plan(seed, families, length, partitions=partitions, short=short)
    (out / "plan.json").write_text(plan_json(faults) + "\n")
    history = History(out / "history.jsonl")
    runner: NemesisRunner | None = None
    report = None
    workload_errors: list[str] = []
    stop = threading.Event()
    threads: list[threading.Thread] = []
    failure: str | None = None
    try:
        for topic in topics:
            cluster.create_topic(topic, partitions)
        wenv = Env(cluster.client_bootstrap, list(topics), partitions, cluster.bootstrap)
        rng = random.Random(seed)
        loads = [WORKLOADS[w](wenv, history, random.Random(rng.random())) for w in workloads]

        def guarded(w: Any) -> None:
            try:
                w.run(stop)
            except Exception as exc:  # a workload that died: the run says so, never hides it
                workload_errors.append(f"{type(w).__name__}: {exc!r}"[:1000])
                # the whole text (a stuck worker's stacks and last ops) beside the history
                with (out / "workload-errors.txt").open("a", encoding="utf-8") as f:
                    f.write(f"{type(w).__name__}: {exc}\n")

        threads.extend(threading.Thread(target=guarded, args=(w,), daemon=True) for w in loads)
        for t in threads:
            t.start()
        ctx = Context(cluster, topics[0], out, proxy, history)
        runner = NemesisRunner(ctx, faults).start()
        ctx.stop.wait(length)
        runner.finish()
        # any node may still be going down on its own (fsync/disk): started again (finding 10)
        history.nemesis("healed", cluster.heal(180))  # not a fault: who was started
        time.sleep(3)  # workloads go on a little on the healed cluster before they stop
        history.nemesis("workloads-stop", {})  # not a fault: where unavailability ends
        workload_errors.extend(stop_workloads(stop, threads))
        # a node that went down on its own since the heal is back before the final reads
        history.nemesis("healed", cluster.heal(180))
        settled = settle(cluster.bootstrap, list(topics), partitions)
        history.nemesis("settled", settled)  # not a fault: what the final reads waited for
        wenv.offline = set(settled.get("offline", ()))
        for w in loads:
            w.final_reads()
        if raft:
            cluster.local.stop(timeout=60)  # the Raft logs read as the nodes left them
            report = raft_report(cluster)
    except BaseException as exc:  # the run failed: said in result.json, then raised
        failure = f"{type(exc).__name__}: {exc}"[:4000]
        raise
    finally:
        if runner is not None and not runner.ctx.stop.is_set():
            runner.finish()  # a failure mid-schedule: its faults healed before anything else
        # never close the history under running workloads: they would die on "history is
        # closed" (finding 10) and the history would end mid-operation
        workload_errors.extend(stop_workloads(stop, threads))
        history.close()
        try:
            result = _result(out, seed, families, workloads, len(faults), runner, report,
                             workload_errors, failure)
        except Exception:
            if failure is None:
                raise
            # the run's own failure is the one raised; this one is only written down
            (out / "result-error.txt").write_text(traceback.format_exc())
    return result


def stop_workloads(stop: threading.Event, threads: list[threading.Thread],
                   timeout: float = 240.0) -> list[str]:
    """Tell the workloads to stop and wait for their threads (up to `timeout` in all: past
    Workers.join's 180 s, so a stuck worker's report is in). Returns an error per thread
    still running at the end; each is waited for once (a second call is free)."""
    stop.set()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    stuck = [t for t in threads if t.is_alive()]
    for t in stuck:
        threads.remove(t)  # reported once
    return [f"{t.name}: still running {timeout:g} s after the stop" for t in stuck]


def _result(out: Path, seed: int, families: list[str], workloads: list[str], faults: int,
            runner: NemesisRunner | None, report: Any, workload_errors: list[str],
            failure: str | None) -> RunResult:
    """The history checked (with the Raft `report` if any) and result.json/report.json
    written, whether the run ended or failed."""
    ops = load(out / "history.jsonl")
    report = check(ops) if report is None else check(ops).merge(report)
    names = sorted(set(report.anomalies) | set(report.not_checked))
    result = RunResult(seed, families, workloads, len(ops), faults,
                       runner.errors if runner else [],
                       {n: report.count(n) for n in names}, report.found(),
                       dict(report.not_checked), workload_errors, unavailability(ops),
                       report.table(), str(out), failure, report.stats.get("offline-at-end"))
    (out / "result.json").write_text(json.dumps(result.to_json(), indent=1, default=str) + "\n")
    (out / "report.json").write_text(json.dumps(report.to_json(), indent=1, default=str) + "\n")
    return result
