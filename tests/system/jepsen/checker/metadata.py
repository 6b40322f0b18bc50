"""W3's checks: what the metadata quorum acknowledged is what the cluster then shows.

W3 ops (see `workloads/w3.py`), all naming one topic in `value["topic"]`:
  create-topic {"topic", "partitions"}, delete-topic {"topic"},
  create-partitions {"topic", "count"}, alter-config {"topic", "config": {name: value}},
  describe-topic: invoked {"topic"}, ok {"topic", "exists", "partitions", "config"}.

After a mutation completes ok, every later describe of that topic (until the next mutation of
it is invoked) should come to show its effect. Brokers learn metadata a little after the
controller commits it, so a describe may lag; what is flagged:
- metadata-not-seen: no describe after the ack ever showed the effect (at least one tried);
- metadata-regressed: a describe showed it, then a later one did not (committed metadata
  lost or a broker serving older metadata than it already served).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..history import OK, Op
from .model import brief

MUTATIONS = frozenset({"create-topic", "delete-topic", "create-partitions", "alter-config"})


def _expectation(op: Op) -> Callable[[dict[str, Any]], bool] | None:
    v = op.value or {}
    if op.f == "create-topic":
        return lambda d: bool(d.get("exists"))
    if op.f == "delete-topic":
        return lambda d: not d.get("exists")
    if op.f == "create-partitions":
        want = int(v["count"])
        return lambda d: bool(d.get("exists")) and int(d.get("partitions") or 0) >= want
    if op.f == "alter-config":
        want_cfg = dict(v.get("config") or {})
        return lambda d: (
            bool(d.get("exists"))
            and all((d.get("config") or {}).get(k) == val for k, val in want_cfg.items())
        )
    return None


@dataclass
class _Pending:
    op: Op
    test: Callable[[dict[str, Any]], bool]
    tries: int = 0
    seen_by: Op | None = None
    last: Op | None = None


def _close(p: _Pending | None, out: dict[str, list[dict[str, Any]]]) -> None:
    if p is not None and p.tries and p.seen_by is None:
        out["metadata-not-seen"].append(
            {
                "topic": (p.op.value or {}).get("topic"),
                "mutation": brief(p.op),
                "value": p.op.value,
                "describes": p.tries,
                "last": p.last.value if p.last else None,
            }
        )


def check_metadata(ops: list[Op]) -> dict[str, list[dict[str, Any]]]:
    """anomaly -> cases; empty when the history has no W3 ops."""
    if not any(o.f in MUTATIONS for o in ops):
        return {}
    out: dict[str, list[dict[str, Any]]] = {"metadata-not-seen": [], "metadata-regressed": []}
    pending: dict[str, _Pending] = {}
    for o in ops:
        if o.f not in MUTATIONS and o.f != "describe-topic":
            continue
        topic = (o.value or {}).get("topic") if isinstance(o.value, dict) else None
        if topic is None:
            continue
        if o.f in MUTATIONS:
            if o.type == "invoke":
                _close(pending.pop(topic, None), out)
            elif o.type == OK:
                test = _expectation(o)
                if test is not None:
                    pending[topic] = _Pending(o, test)
            continue
        p = pending.get(topic)
        if p is None or o.type != OK:
            continue
        p.tries += 1
        p.last = o
        if p.test(o.value):
            p.seen_by = p.seen_by or o
        elif p.seen_by is not None:
            out["metadata-regressed"].append(
                {
                    "topic": topic,
                    "mutation": brief(p.op),
                    "value": p.op.value,
                    "seen": brief(p.seen_by),
                    "then": brief(o),
                    "then_value": o.value,
                }
            )
    for p in pending.values():
        _close(p, out)
    return out
