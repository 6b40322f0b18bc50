"""bench.compare's ratio columns: which of odradek's systems is compared with which peer, the
per-run ratios, and the table of issue 23's rows for a pair driven by the same clients."""

from __future__ import annotations

import statistics
from typing import Any

GB = 1e9


def ratio_by_run(rows: list[dict[str, Any]], peer: str, workload: str, size: int,
                  partitions: int, field: str, ours: str = "odradek") -> list[float]:
    """ours / peer for each run in which both were measured (same run, same machine state)."""
    mine = {r["run"]: r[field] for r in rows
            if (r["system"], r["workload"], r["size"], r["partitions"]) ==
            (ours, workload, size, partitions) and field in r}
    theirs = {r["run"]: r[field] for r in rows
              if (r["system"], r["workload"], r["size"], r["partitions"]) ==
              (peer, workload, size, partitions) and field in r}
    return [mine[k] / theirs[k] for k in mine if theirs.get(k)]


def ratio_pairs(ours: list[str], peers: list[str]) -> list[tuple[str, str]]:
    """(ours, peer) columns: every pair, except that the rows of the C clients (`-rdkafka-c...`,
    bench/c's producer and consumer) are compared only with the peer driven by the same C
    programs and library (`odradek-rdkafka-c-2.16` with `tansu-rdkafka-c-2.16`; Debian's
    `odradek-rdkafka-c` has none), and Python-client rows never with a C peer."""
    def client(name: str) -> str:
        return name[name.index("-rdkafka-c"):] if "-rdkafka-c" in name else ""

    return [(o, p) for o in ours for p in peers if client(o) == client(p)]


def pair_table(rows: list[dict[str, Any]], ours: str, peer: str, partitions: int) -> list[str]:
    """Issue 23's rows in its order, for one pair: median (min-max) of each, and the median of
    the per-run ratios ours / peer."""
    def cell(name: str, workload: str, size: int, field: str, scale: float) -> str:
        vs = [r[field] * scale for r in rows if field in r and
              (r["system"], r["workload"], r["size"], r["partitions"]) ==
              (name, workload, size, partitions)]
        if not vs:
            return "—"
        m, lo, hi = statistics.median(vs), min(vs), max(vs)
        f = ",.0f" if m >= 1000 else ".2f"
        return f"{m:{f}}" + ("" if len(vs) == 1 else f" ({lo:{f}}-{hi:{f}})")

    def ratio(workload: str, size: int, field: str) -> str:
        rs = ratio_by_run(rows, peer, workload, size, partitions, field, ours)
        return f"{statistics.median(rs):.2f}x" if rs else "—"

    gb = 1024 * 1024 / GB  # mb_per_sec is MiB/s
    out = [f"### `{ours}` against `{peer}`, {partitions} partitions, in issue 23's order", "",
           f"| row | {ours} | {peer} | ratio |", "|---|---:|---:|---:|"]
    for label, workload, size, field, scale in (
            ("produce 100 B, records/s", "produce", 100, "records_per_sec", 1.0),
            ("produce 1 KB, GB/s", "produce", 1024, "mb_per_sec", gb),
            ("consume 1 KB, GB/s", "consume", 1024, "mb_per_sec", gb),
            ("node CPU s/GB, produce 100 B", "produce", 100, "cpu_s_per_gb", 1.0),
            ("node CPU s/GB, produce 1 KB", "produce", 1024, "cpu_s_per_gb", 1.0),
            ("node CPU s/GB, consume 100 B", "consume", 100, "cpu_s_per_gb", 1.0),
            ("node CPU s/GB, consume 1 KB", "consume", 1024, "cpu_s_per_gb", 1.0),
            ("consume 100 B, records/s", "consume", 100, "records_per_sec", 1.0)):
        out.append(f"| {label} | {cell(ours, workload, size, field, scale)} | "
                   f"{cell(peer, workload, size, field, scale)} | {ratio(workload, size, field)} |")
    return out
