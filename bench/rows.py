"""Rows of bench/compare.json: their key, their aggregation over runs, and rate labels.

Shared by bench.compare (which writes the rows and RESULTS.md) and bench.plot (which draws
them), so neither imports the other.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

__all__ = ["aggregate", "key_of", "rate_label"]


def rate_label(rate: float) -> str:
    if rate <= 0:
        return "max"
    return f"{rate / 1000:g}k"


def key_of(row: dict[str, Any]) -> tuple[str, str, int, int]:
    return row["system"], row["workload"], row["size"], row["partitions"]


def aggregate(rows: list[dict[str, Any]]) -> dict[tuple[str, str, int, int], dict[str, Any]]:
    groups: dict[tuple[str, str, int, int], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[key_of(row)].append(row)
    out = {}
    for key, group in groups.items():
        agg: dict[str, Any] = {"runs": len(group)}
        for field in ("records_per_sec", "mb_per_sec", "cpu_s_per_gb", "p50_ms", "p99_ms",
                      "p999_ms"):
            values = [r[field] for r in group if field in r]
            if values:
                agg[field] = {"median": statistics.median(values), "min": min(values),
                              "max": max(values)}
        out[key] = agg
    return out
