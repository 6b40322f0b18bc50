"""`python -m tests.system.jepsen --seeds 0:10 --faults kill,pause --workloads w1,w2 --time 60
--out DIR`: one run per seed, each under its own plan, then one table over them all (all four
workloads when --workloads is not given).

Each run's directory (DIR/seed-N) keeps plan.json, history.jsonl, result.json and the nodes'
logs; DIR/summary.json has every run's figures, DIR/failed.json the runs that failed (the
others still run). Exit status 1 when a run found an anomaly or failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

from tests.system.jepsen.run import RunResult, run_one
from tests.system.jepsen.schedule import FAMILIES


def seeds(text: str) -> list[int]:
    if ":" in text:
        a, b = text.split(":", 1)
        return list(range(int(a), int(b)))
    return [int(s) for s in text.split(",")]


def summary(results: list[RunResult]) -> str:
    names = sorted({k for r in results for k in r.anomalies})
    head = f"{'seed':>5} {'faults':<28} {'ops':>7} {'unavail s':>9} " + " ".join(
        f"{n:>12}" for n in names)
    rows = [head]
    for r in results:
        rows.append(f"{r.seed:>5} {','.join(r.families)[:28]:<28} {r.ops:>7} "
                    f"{r.unavailable_s:>9} " + " ".join(
                        f"{r.anomalies.get(n, 0):>12}" for n in names))
    total = {n: sum(r.anomalies.get(n, 0) for r in results) for n in names}
    rows.append(f"{'all':>5} {len(results):<28} {sum(r.ops for r in results):>7} "
                f"{max((r.unavailable_s for r in results), default=0):>9} "
                + " ".join(f"{total[n]:>12}" for n in names))
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.system.jepsen")
    ap.add_argument("--seeds", default="0:1", help="A:B (B excluded) or a,b,c")
    ap.add_argument("--faults", default=",".join(FAMILIES),
                    help=f"families, comma-separated, mixed in one schedule: {','.join(FAMILIES)}")
    ap.add_argument("--each", action="store_true",
                    help="one family per run instead of all mixed (the seeds cycle through)")
    ap.add_argument("--workloads", default="w1,w2,w3,w4", help="of w1,w2,w3,w4")
    ap.add_argument("--time", type=float, default=60.0, help="seconds of faults per run")
    ap.add_argument("--out", type=Path, default=Path("jepsen-runs"))
    args = ap.parse_args(argv)
    families = [f for f in args.faults.split(",") if f]
    results: list[RunResult] = []
    failed: list[dict[str, object]] = []
    for i, seed in enumerate(seeds(args.seeds)):
        fams = [families[i % len(families)]] if args.each else families
        try:
            r = run_one(seed, fams, args.workloads.split(","), args.time,
                        args.out / f"seed-{seed}")
        except (Exception, pytest.fail.Exception) as exc:  # said, and the next seed runs
            failed.append({"seed": seed, "families": fams, "failed": f"{exc!r}"[:4000]})
            print(f"--- seed {seed} ({','.join(fams)}): FAILED (no result; the run directory "
                  f"has its history and, when it got that far, result.json): {exc!r}",
                  flush=True)
            (args.out / "failed.json").write_text(json.dumps(failed, indent=1) + "\n")
            continue
        results.append(r)
        print(f"--- seed {seed} ({','.join(fams)}): {r.ops} ops, worst unavailability "
              f"{r.unavailable_s} s, nemesis errors {r.nemesis_errors}, workload errors "
              f"{r.workload_errors}, offline at the end {r.offline}\n{r.table}",
              flush=True)
        (args.out / "summary.json").write_text(
            json.dumps([x.to_json() for x in results], indent=1, default=str) + "\n")
    print(summary(results))
    return 1 if failed or any(r.found or r.workload_errors for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
