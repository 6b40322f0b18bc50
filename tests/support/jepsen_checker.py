"""A checker over recorded produce/consume histories, in the style of Jepsen's Kafka checker.

A history records what the clients did and saw:
- sends: (partition, value, outcome, txn) with outcome "ok" (acknowledged), "fail"
  (definitely not written) or "info" (unknown), txn the transaction's name or None;
- txns: name -> "committed" | "aborted" | "unknown", with the time the commit was invoked;
- polls: per consumer, a list of (time, [(partition, offset, value)]) in poll order, with
  the consumer's isolation level; a `reset` marks a seek or rebalance in that consumer;
- final: a complete read of every partition [(partition, offset, value)], read_committed.

Anomalies reported (each a list of short descriptions; a clean history reports nothing):
- lost-write: an acknowledged value (committed when transactional) missing from the final read;
- duplicate: a value at more than one offset;
- g1a (aborted read): a read_committed consumer saw a value of an aborted transaction or of
  a send that failed;
- precommitted-read: a read_committed consumer saw a transactional value before its
  transaction's commit was invoked;
- nonmonotonic-poll: a consumer's offsets on a partition went backwards or repeated between
  consecutive polls without a reset;
- reordered: values one producer sent to a partition in order (increasing `seq`) stored
  out of that order.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Send:
    partition: int
    value: Any
    outcome: str = "ok"  # ok | fail | info
    txn: str | None = None
    producer: str = "p"
    seq: int = -1  # order of sending by this producer to this partition


@dataclass
class Poll:
    time: float
    records: list[tuple[int, int, Any]]
    reset: bool = False


@dataclass
class History:
    sends: list[Send] = field(default_factory=list)
    txns: dict[str, str] = field(default_factory=dict)
    commit_invoked: dict[str, float] = field(default_factory=dict)
    polls: dict[str, list[Poll]] = field(default_factory=dict)
    read_committed: dict[str, bool] = field(default_factory=dict)
    final: list[tuple[int, int, Any]] = field(default_factory=list)


def check(h: History) -> dict[str, list[str]]:
    anomalies: dict[str, list[str]] = defaultdict(list)
    by_value: dict[Any, Send] = {s.value: s for s in h.sends}

    def visible(s: Send) -> bool:
        return s.txn is None or h.txns.get(s.txn) == "committed"

    def must_not_be_read(s: Send) -> bool:
        return s.outcome == "fail" or (s.txn is not None and h.txns.get(s.txn) == "aborted")

    # duplicates and lost writes, over the final read
    where: dict[Any, list[tuple[int, int]]] = defaultdict(list)
    for p, off, v in h.final:
        where[v].append((p, off))
    for v, places in where.items():
        if len(places) > 1:
            anomalies["duplicate"].append(f"{v!r} at {places}")
    for s in h.sends:
        if s.outcome == "ok" and visible(s) and s.value not in where:
            anomalies["lost-write"].append(f"{s.value!r} (partition {s.partition}, txn {s.txn})")
    for v in where:
        s = by_value.get(v)
        if s is not None and must_not_be_read(s):
            anomalies["g1a"].append(f"final read_committed read saw {v!r} (txn {s.txn})")

    # reads by the consumers
    for consumer, polls in h.polls.items():
        committed = h.read_committed.get(consumer, False)
        last: dict[int, int] = {}
        for poll in polls:
            if poll.reset:
                last.clear()
            for p, off, v in poll.records:
                prev = last.get(p)
                if prev is not None and off <= prev:
                    anomalies["nonmonotonic-poll"].append(
                        f"{consumer}: partition {p} offset {off} after {prev}")
                last[p] = off
                s = by_value.get(v)
                if s is None or not committed:
                    continue
                if must_not_be_read(s):
                    anomalies["g1a"].append(f"{consumer} read {v!r} (txn {s.txn}, {s.outcome})")
                elif s.txn is not None:
                    invoked = h.commit_invoked.get(s.txn)
                    if invoked is None or poll.time < invoked:
                        anomalies["precommitted-read"].append(
                            f"{consumer} read {v!r} of {s.txn} before its commit")

    # order per producer and partition
    offset_of: dict[Any, int] = {v: off for v, places in where.items() for _, off in places[:1]}
    seqs: dict[tuple[str, int], list[tuple[int, Any]]] = defaultdict(list)
    for s in h.sends:
        if s.seq >= 0 and s.value in offset_of:
            seqs[(s.producer, s.partition)].append((s.seq, s.value))
    for (producer, p), items in seqs.items():
        items.sort()
        offs = [offset_of[v] for _, v in items]
        for a, b, (_, v) in zip(offs, offs[1:], items[1:], strict=False):
            if b <= a:
                anomalies["reordered"].append(f"{producer} partition {p}: {v!r} at {b} after {a}")
                break
    return dict(anomalies)
