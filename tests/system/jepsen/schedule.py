"""Seeded fault plans: the same seed (and the same families and length) plays the same schedule.

A plan is a list of `Fault`s, one at a time: each starts `at` seconds after the workloads
start and lasts `duration` seconds, then the nemesis heals it and the next one waits a gap.
Which node a fault hits is decided when it starts, from the cluster as it is then (the leader
of partition `partition` of the first topic, a follower of it, the active controller) with
`pick` breaking ties; everything else (kind, length, skew, API keys, loss rate, flapping
period) is in the plan itself, so the plan can be printed and compared before a run.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["FAMILIES", "Fault", "plan", "plan_json"]

# family -> kinds; run.py and nemesis/ know each of them
FAMILIES: dict[str, list[str]] = {
    "kill": ["kill9", "sigterm"],
    "pause": ["sigstop"],
    "partition": ["minority", "isolated", "leader-cut", "bridge", "flapping"],
    "proxy": ["delay", "blackhole", "loss", "reset"],
    "clock": ["skew"],
    "disk": ["full"],
    "fsync": ["eio", "hang"],
    "crash": ["lose-tail"],
    "reassign": ["reassign-kill"],
    "producer": ["crash-mid-txn"],
}
TARGETS = ["leader", "follower", "controller", "any"]
# seconds a fault of the family lasts: (min, max)
DURATIONS: dict[str, tuple[float, float]] = {
    "kill": (2, 8), "pause": (5, 20), "partition": (4, 12), "proxy": (4, 10),
    "clock": (5, 15), "disk": (4, 10), "fsync": (3, 8), "crash": (1, 3),
    "reassign": (4, 10), "producer": (1, 3),
}
PROXY_APIS = {"produce": 0, "fetch": 1, "end-txn": 26, "add-partitions-to-txn": 24,
              "txn-offset-commit": 28}


@dataclass(frozen=True)
class Fault:
    at: float
    family: str
    kind: str
    target: str
    duration: float
    partition: int = 0  # of the first topic: whose leader/follower `target` names
    pick: int = 0  # tie-break among candidate nodes (index modulo their count)
    params: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return asdict(self)


def _params(rng: random.Random, family: str, kind: str) -> dict[str, Any]:
    if family == "proxy":
        apis = rng.sample(sorted(PROXY_APIS), rng.randint(1, 2))
        out: dict[str, Any] = {"apis": [PROXY_APIS[a] for a in sorted(apis)]}
        if kind == "delay":
            out["delay_ms"] = rng.choice([500, 1000, 3000, 8000])
        if kind == "loss":
            out["rate"] = round(rng.uniform(0.10, 0.30), 2)
        return out
    if family == "clock":
        return {"skew_s": rng.choice([-1, 1]) * rng.choice([2, 10, 60, 300, 3600])}
    if family == "partition" and kind == "flapping":
        return {"period_s": rng.choice([0.5, 1.0, 2.0])}
    if family == "crash":
        return {"tail_bytes": rng.choice([1, 100, 4096, 65536, 1 << 20])}
    if family == "fsync" and kind == "hang":
        return {"delay_s": rng.choice([1, 3, 5])}
    return {}


def plan(seed: int, families: list[str], length: float, *, start: float = 2.0,
         gap: tuple[float, float] = (1.0, 4.0), partitions: int = 3,
         short: bool = False) -> list[Fault]:
    """Faults of `families` filling `length` seconds, drawn from `random.Random(seed)`.

    `short` scales durations down (the runs inside `make test`), never below 1 s, except
    pauses which keep the issue's 5 s floor so a paused leader really outlives its session.
    """
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise ValueError(f"unknown fault families {unknown}; known: {sorted(FAMILIES)}")
    if not families:
        return []
    rng = random.Random(seed)
    faults: list[Fault] = []
    t = start
    while True:
        family = rng.choice(families)
        kind = rng.choice(FAMILIES[family])
        lo, hi = DURATIONS[family]
        if short:
            lo, hi = (5.0, 6.0) if family == "pause" else (max(1.0, lo / 2), max(1.0, hi / 3))
        duration = round(rng.uniform(lo, hi), 2)
        if faults and t + duration > length:
            break
        target = rng.choice(TARGETS)
        if family == "partition" and kind in ("leader-cut",):
            target = "leader"
        faults.append(Fault(round(t, 2), family, kind, target, duration,
                            rng.randrange(partitions), rng.randrange(1 << 16),
                            _params(rng, family, kind)))
        t += duration + rng.uniform(*gap)
        if t >= length:
            break
    return faults


def plan_json(faults: list[Fault]) -> str:
    return json.dumps([f.describe() for f in faults], sort_keys=True)
