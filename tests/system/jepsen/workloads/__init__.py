"""The workloads of issue 15 (W1-W4). Each is a class `(env, history, rng)` with
`run(stop)` (clients in threads until `stop` is set) and `final_reads()` (called after every
fault healed; W4's read-back, and a read-back for W1/W2 so "unseen" can be judged)."""

from __future__ import annotations

from .w1 import W1
from .w2 import W2
from .w3 import W3
from .w4 import W4

WORKLOADS = {"w1": W1, "w2": W2, "w3": W3, "w4": W4}

__all__ = ["W1", "W2", "W3", "W4", "WORKLOADS"]
