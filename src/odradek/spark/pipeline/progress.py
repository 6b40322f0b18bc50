"""Per-flow progress lines from Spark's streaming query progress.

The runner polls each query's `recentProgress` (the progress events Spark records after every
micro-batch) from its wait loop, so the lines come from the driver's main thread: no listener
callback thread, and a query's last batches are reported before its "finished" line.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.streaming import StreamingQuery


@dataclass
class FlowTotals:
    batches: int = 0
    rows_in: int = 0
    rows_out: int = 0
    out_known: bool = True
    last_batch: int = -1


def _number(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(out) or math.isinf(out) else out


def _batches(n: int) -> str:
    return f"{n} batch" if n == 1 else f"{n} batches"


def batch_line(name: str, progress: Mapping[str, Any], totals: FlowTotals) -> str:
    """One readable line for one micro-batch, e.g.
    `flow 'slow_views': batch 0: 400 rows in, 68 rows out, 230 rows/s (so far: 1 batch, 400 in, 68 out)`."""
    rows_in = int(progress.get("numInputRows") or 0)
    rate = _number(progress.get("processedRowsPerSecond"))
    out = _output_rows(progress)
    # Sinks that do not count their rows report -1.
    out_text = f"{out:,} rows out" if out >= 0 else "rows out not counted"
    rate_text = f", {rate:,.0f} rows/s" if rate is not None and rows_in else ""
    total_out = f"{totals.rows_out:,} out" if totals.out_known else "out not counted"
    return (f"flow '{name}': batch {progress.get('batchId')}: {rows_in:,} rows in, {out_text}{rate_text} "
            f"(so far: {_batches(totals.batches)}, {totals.rows_in:,} in, {total_out})")


@dataclass
class Progress:
    """What has been reported per flow; `poll` reports the batches not reported yet."""

    report: Callable[[str], None]
    # Rows written per batch id by flows whose sink does not count them (foreachBatch).
    output_rows: Mapping[str, Mapping[int, int]] = field(default_factory=dict)
    flows: dict[str, FlowTotals] = field(default_factory=dict)

    def poll(self, name: str, query: StreamingQuery) -> None:
        totals = self.flows.setdefault(name, FlowTotals())
        try:
            events = query.recentProgress
        except Exception:  # a query torn down under us: nothing more to say about it
            return
        for event in events:
            data = _as_dict(event)
            batch = data.get("batchId")
            if not isinstance(batch, int) or batch <= totals.last_batch:
                # Idle queries repeat the last batch id with no rows: one line per batch only.
                continue
            totals.last_batch = batch
            totals.batches += 1
            totals.rows_in += int(data.get("numInputRows") or 0)
            out = _output_rows(data)
            if out < 0 and batch in self.output_rows.get(name, {}):
                out = self.output_rows[name][batch]
                data = {**data, "sink": {**(data.get("sink") or {}), "numOutputRows": out}}
            if out >= 0:
                totals.rows_out += out
            else:
                totals.out_known = False
            self.report(batch_line(name, data, totals))

    def summary(self, name: str) -> str:
        t = self.flows.get(name, FlowTotals())
        out = f"{t.rows_out:,} rows out" if t.out_known else "rows out not counted"
        return f"{_batches(t.batches)}, {t.rows_in:,} rows in, {out}"


def _output_rows(progress: Mapping[str, Any]) -> int:
    """The sink's row count, -1 if it does not count. A batch that never reached its sink
    (no `addBatch` phase: nothing to read and no state to close) wrote nothing."""
    sink = progress.get("sink")
    value = sink.get("numOutputRows", -1) if isinstance(sink, Mapping) else -1
    out = int(value) if isinstance(value, int | float) else -1
    durations = progress.get("durationMs")
    if out < 0 and isinstance(durations, Mapping) and "addBatch" not in durations:
        return 0
    return out


def _as_dict(event: Any) -> dict[str, Any]:
    """A pyspark StreamingQueryProgress as the JSON object Spark reports (its own field names)."""
    raw = getattr(event, "json", None)
    if isinstance(raw, str):
        loaded = json.loads(raw)
        return loaded if isinstance(loaded, dict) else {}
    return {}
