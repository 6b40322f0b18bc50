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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.system.jepsen.cluster import jepsen_cluster
from tests.system.jepsen.nemesis import Context
from tests.system.jepsen.nemesis.clock import node_env
from tests.system.jepsen.nemesis.runner import NemesisRunner
from tests.system.jepsen.proxy import Proxy
from tests.system.jepsen.schedule import plan, plan_json
from tests.system.jepsen.smoke import SmokeWorkload, smoke_check

try:  # `checker`'s history, env, workloads and checker once that branch is merged
    from tests.system.jepsen.history import History, load  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - until the merge
    from tests.system.jepsen._history_shim import History, load

__all__ = ["RunResult", "run_one", "unavailability"]

TOPIC = "jepsen"
TMPFS_MB = 256


@dataclass
class Env:
    """The fields `checker`'s env.Env has (FAULTS.md), for the harness's own workload."""
    bootstrap: str
    topics: list[str]
    partitions: int
    admin_bootstrap: str
    client_config: dict[str, str] = field(default_factory=dict)


def workload_classes(names: list[str]) -> dict[str, Callable[..., Any]]:
    out: dict[str, Callable[..., Any]] = {}
    for name in names:
        if name == "smoke":
            out[name] = SmokeWorkload
            continue
        try:
            from tests.system.jepsen import workloads  # type: ignore[attr-defined]
        except ImportError as exc:
            raise SystemExit(f"workload {name}: tests.system.jepsen.workloads is not here yet "
                             "(the `checker` branch); use --workloads smoke") from exc
        out[name] = workloads.WORKLOADS[name]
    return out


def unavailability(ops: list[Any]) -> float:
    """The longest stretch (seconds) with no op completing ok, between the first and last ok
    of the run (the final reads excluded)."""
    times = sorted(op.time for op in ops if op.type == "ok" and op.process != "final-reader")
    gaps = [b - a for a, b in itertools.pairwise(times)]
    return round(max(gaps, default=0) / 1e9, 2)


@dataclass
class RunResult:
    seed: int
    families: list[str]
    workloads: list[str]
    ops: int
    faults: int
    nemesis_errors: list[str]
    anomalies: dict[str, int]
    examples: dict[str, list[Any]]
    unavailable_s: float
    table: str
    out: str

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def check(ops: list[Any]) -> tuple[dict[str, int], dict[str, list[Any]], str]:
    """The checker's anomaly counts, examples and table (the smoke check until it lands)."""
    try:
        from tests.system.jepsen.checker import check as full  # type: ignore[import-not-found]
    except ImportError:
        report = smoke_check(ops)
        return ({k: len(v) for k, v in report.anomalies.items()},
                {k: v[:5] for k, v in report.anomalies.items()}, report.table())
    rep = full(ops)
    counts = {k: len(v) for k, v in rep.anomalies.items()}
    return counts, {k: list(v)[:5] for k, v in rep.anomalies.items()}, rep.table()


def run_one(seed: int, families: list[str], workloads: list[str], length: float, out: Path,
            *, partitions: int = 3, short: bool = False) -> RunResult:
    out.mkdir(parents=True, exist_ok=True)
    faults = plan(seed, families, length, partitions=partitions, short=short)
    (out / "plan.json").write_text(plan_json(faults) + "\n")
    history = History(out / "history.jsonl")
    proxy = Proxy(seed) if "proxy" in families else None
    env = ({i: node_env(out, i) for i in (1, 2, 3)} if "clock" in families else None)
    tmpfs = TMPFS_MB if "disk" in families else None
    # the fsync family needs fsyncs to hit: partition data is fsynced only on roll by default
    settings = {"log.flush.interval.messages": "200"} if "fsync" in families else None
    runner: NemesisRunner | None = None
    try:
        with jepsen_cluster(out / "cluster", proxy=proxy, tmpfs_mb=tmpfs, env=env,
                            settings=settings) as cluster:
            cluster.create_topic(TOPIC, partitions)
            wenv = Env(cluster.client_bootstrap, [TOPIC], partitions, cluster.bootstrap)
            rng = random.Random(seed)
            loads = [cls(wenv, history, random.Random(rng.random()))
                     for cls in workload_classes(workloads).values()]
            stop = threading.Event()
            threads = [threading.Thread(target=w.run, args=(stop,), daemon=True) for w in loads]
            for t in threads:
                t.start()
            ctx = Context(cluster, TOPIC, out, proxy, history)
            runner = NemesisRunner(ctx, faults).start()
            ctx.stop.wait(length)
            runner.finish()
            cluster.heal_processes()
            cluster.wait_ready(180)
            time.sleep(3)  # workloads go on a little on the healed cluster before they stop
            stop.set()
            for t in threads:
                t.join(120)
            for w in loads:
                if hasattr(w, "final_reads"):
                    w.final_reads()
    finally:
        if proxy is not None:
            proxy.close()
        history.close()
    ops = load(out / "history.jsonl")
    counts, examples, table = check(ops)
    result = RunResult(seed, families, workloads, len(ops), len(faults),
                       runner.errors if runner else [], counts, examples, unavailability(ops),
                       table, str(out))
    (out / "result.json").write_text(json.dumps(result.to_json(), indent=1, default=str) + "\n")
    return result
