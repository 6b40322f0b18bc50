"""A checker's findings: anomaly -> cases, printed as a table with examples."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

# Kafka allows these (Jepsen's allowed-error-types): reported so a reader sees them, but they
# do not make a run invalid.
ALLOWED = frozenset({"int-send-skip"})

# Reported, never counted as an anomaly: values acknowledged in a partition that ended the run
# offline, which the final reads could not read (neither seen nor shown lost).
NOT_LOSS = frozenset({"unavailable"})

# Every anomaly the data checker knows, in the order the table lists them.
DATA_ANOMALIES = (
    "lost-write",
    "duplicate",
    "inconsistent-offsets",
    "G1a",
    "precommitted-read",
    "poll-skip",
    "nonmonotonic-poll",
    "nonmonotonic-send",
    "int-send-skip",
    "unseen",
    "unavailable",
)


@dataclass
class Report:
    # anomaly name -> cases (JSON-able dicts naming keys, values and op indexes)
    anomalies: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # anomalies this report could not judge, with why (e.g. unseen without final reads)
    not_checked: dict[str, str] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    allowed: frozenset[str] = ALLOWED

    def add(self, name: str, cases: list[dict[str, Any]]) -> None:
        self.anomalies.setdefault(name, []).extend(cases)

    def count(self, name: str) -> int:
        # unseen and unavailable are kept one case per key; count the values
        cases = self.anomalies.get(name, [])
        per_key = name in ("unseen", "unavailable")
        return sum(int(c.get("count", 1)) for c in cases) if per_key else len(cases)

    def found(self) -> dict[str, int]:
        """Anomalies that make the run invalid, with their counts (empty: valid)."""
        return {
            n: self.count(n)
            for n in self.anomalies
            if self.anomalies[n] and n not in self.allowed and n not in NOT_LOSS
        }

    @property
    def valid(self) -> bool:
        return not self.found()

    def merge(self, other: Report) -> Report:
        out = Report(allowed=self.allowed | other.allowed)
        for r in (self, other):
            for n, cases in r.anomalies.items():
                out.add(n, cases)
            out.not_checked.update(r.not_checked)
            out.stats.update(r.stats)
        return out

    def table(self, examples: int = 2) -> str:
        extra = (set(self.anomalies) | set(self.not_checked)) - set(DATA_ANOMALIES)
        names = list(DATA_ANOMALIES) + sorted(extra)
        names = [n for n in names if n in self.anomalies or n in self.not_checked]
        width = max([len(n) for n in names] + [7])
        lines = [f"{'anomaly':<{width}}  {'count':>6}  examples"]
        for n in names:
            if n in self.not_checked and not self.anomalies.get(n):
                lines.append(f"{n:<{width}}  {'-':>6}  not checked: {self.not_checked[n]}")
                continue
            count = self.count(n)
            tag = " (allowed)" if n in self.allowed and count else ""
            tag = " (not loss: partition offline at the end)" if n in NOT_LOSS and count else tag
            shown = [
                json.dumps(c, default=str, sort_keys=True) for c in self.anomalies[n][:examples]
            ]
            lines.append(f"{n:<{width}}  {count:>6}{tag}  {shown[0] if shown else ''}")
            lines.extend(f"{'':<{width}}  {'':>6}  {s}" for s in shown[1:])
        if self.stats:
            lines.append("stats: " + json.dumps(self.stats, sort_keys=True, default=str))
        lines.append("VALID" if self.valid else f"INVALID: {self.found()}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "found": self.found(),
            "anomalies": self.anomalies,
            "not_checked": self.not_checked,
            "stats": self.stats,
        }
