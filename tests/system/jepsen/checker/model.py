"""What a history says about each key: who wrote and read which values, and the log order.

Jepsen's Kafka analysis first turns every operation into reads and writes per key, then
builds each key's log ("version order") from everything observed at an offset: all polls
(even those of failed or unknown transactions, since a consumer must never see unsafe data
whatever becomes of its own transaction) and the sends of operations that certainly took
effect. The anomalies are then questions asked of these structures (`anomalies.py`).

Offsets in a Kafka log have gaps (transaction markers, aborted records), so positions are
compared by *index*: the rank of an offset among the offsets observed for that key.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ..history import FAIL, INFO, INVOKE, OK, Op

SEND_FS = frozenset({"send", "txn"})
READ_FS = frozenset({"poll", "txn", "final-poll"})
Pair = tuple[int | None, Any]


def op_writes(op: Op) -> dict[str, list[Pair]]:
    """key -> [(offset or None, value)] sent by this op, in order."""
    out: dict[str, list[Pair]] = {}
    if op.f not in SEND_FS or not isinstance(op.value, list):
        return out
    for mop in op.value:
        if not mop or mop[0] != "send" or len(mop) < 3:
            continue
        key, v = mop[1], mop[2]
        pair: Pair = (v[0], v[1]) if isinstance(v, list) else (None, v)
        out.setdefault(key, []).append(pair)
    return out


def op_reads(op: Op) -> dict[str, list[Pair]]:
    """key -> [(offset, value)] polled by this op, in order."""
    out: dict[str, list[Pair]] = {}
    if op.f not in READ_FS or not isinstance(op.value, list):
        return out
    for mop in op.value:
        if not mop or mop[0] != "poll" or len(mop) < 2 or not isinstance(mop[1], dict):
            continue
        for key, pairs in mop[1].items():
            out.setdefault(key, []).extend((p[0], p[1]) for p in pairs)
    return out


@dataclass
class KeyOrder:
    """One key's log as observed: offset -> values, and the dense index of each value."""

    log: dict[int, set[Any]] = field(default_factory=dict)
    by_index: list[Any] = field(default_factory=list)
    by_value: dict[Any, int] = field(default_factory=dict)
    # value -> first and last index it appeared at (a duplicate appears at several)
    first_index: dict[Any, int] = field(default_factory=dict)
    last_index: dict[Any, int] = field(default_factory=dict)

    def add(self, offset: int | None, value: Any) -> None:
        if offset is not None:
            self.log.setdefault(int(offset), set()).add(value)

    def finish(self) -> None:
        for i, offset in enumerate(sorted(self.log)):
            values = self.log[offset]
            # With several values at one offset (an inconsistent-offsets anomaly) any one
            # stands for the position; pick deterministically.
            self.by_index.append(min(values, key=repr))
            for v in values:
                self.first_index.setdefault(v, i)
                self.last_index[v] = i
        for v, i in self.first_index.items():
            self.by_value[v] = i

    def index(self, value: Any) -> int | None:
        return self.by_value.get(value)


@dataclass
class Analysis:
    ops: list[Op]
    completions: list[Op]
    # key -> value -> the completion op that sent it
    writer_of: dict[str, dict[Any, Op]]
    # key -> value -> completion ops that read it (of any type)
    readers_of: dict[str, dict[Any, list[Op]]]
    # type ("ok"/"info"/"fail") -> key -> values written / read
    writes_by_type: dict[str, dict[str, set[Any]]]
    reads_by_type: dict[str, dict[str, set[Any]]]
    orders: dict[str, KeyOrder]
    by_process: dict[Any, list[Op]]
    writes: dict[int, dict[str, list[Pair]]]
    reads: dict[int, dict[str, list[Pair]]]

    def must_have_committed(self, op: Op) -> bool:
        """An ok op took effect; an info op did if some value it sent was read by an ok op."""
        if op.type == OK:
            return True
        if op.type != INFO:
            return False
        ok_reads = self.reads_by_type.get(OK, {})
        return any(
            v in ok_reads.get(k, ()) for k, pairs in self.writes[op.index].items() for _, v in pairs
        )


def analyse(ops: list[Op]) -> Analysis:
    completions = [o for o in ops if o.type in (OK, FAIL, INFO) and o.process != "nemesis"]
    writes = {o.index: op_writes(o) for o in completions}
    reads = {o.index: op_reads(o) for o in completions}
    writer_of: dict[str, dict[Any, Op]] = defaultdict(dict)
    readers_of: dict[str, dict[Any, list[Op]]] = defaultdict(lambda: defaultdict(list))
    wbt: dict[str, dict[str, set[Any]]] = defaultdict(lambda: defaultdict(set))
    rbt: dict[str, dict[str, set[Any]]] = defaultdict(lambda: defaultdict(set))
    by_process: dict[Any, list[Op]] = defaultdict(list)
    for o in completions:
        by_process[o.process].append(o)
        for k, pairs in writes[o.index].items():
            for _, v in pairs:
                writer_of[k][v] = o
                wbt[o.type][k].add(v)
        for k, pairs in reads[o.index].items():
            for _, v in pairs:
                readers_of[k][v].append(o)
                rbt[o.type][k].add(v)
    a = Analysis(
        ops=ops,
        completions=completions,
        writer_of=dict(writer_of),
        readers_of={k: dict(v) for k, v in readers_of.items()},
        writes_by_type={t: dict(m) for t, m in wbt.items()},
        reads_by_type={t: dict(m) for t, m in rbt.items()},
        orders={},
        by_process=dict(by_process),
        writes=writes,
        reads=reads,
    )
    orders: dict[str, KeyOrder] = defaultdict(KeyOrder)
    for o in completions:
        for k, pairs in reads[o.index].items():
            for off, v in pairs:
                orders[k].add(off, v)
        if a.must_have_committed(o):
            for k, pairs in writes[o.index].items():
                for off, v in pairs:
                    orders[k].add(off, v)
    for order in orders.values():
        order.finish()
    a.orders = dict(orders)
    return a


def brief(op: Op) -> dict[str, Any]:
    """An op as a report example: enough to find it in the history file."""
    d: dict[str, Any] = {"index": op.index, "process": op.process, "type": op.type, "f": op.f}
    if op.error:
        d["error"] = op.error
    return d


__all__ = [
    "FAIL",
    "INFO",
    "INVOKE",
    "OK",
    "Analysis",
    "KeyOrder",
    "analyse",
    "brief",
    "op_reads",
    "op_writes",
]
