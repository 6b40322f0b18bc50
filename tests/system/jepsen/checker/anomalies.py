"""The anomalies of Jepsen's Kafka workload, each a function of the analysed history.

Definitions (after jepsen.tests.kafka; our own code):

- inconsistent-offsets: two different values observed at one offset of one key.
- duplicate: one value at more than one offset of a key.
- lost-write: a value certainly sent (ok, or info but seen) that lies at or below the highest
  index some ok read reached in its key, yet no ok read ever returned it. Also (our addition,
  `kind: vanished`): such a value that ok reads did return, but that the final reads after
  the heal, which read its key from the beginning past its offset, no longer hold: it was
  there and is gone (a replica that lost it led). Jepsen's definition misses that case
  because one poll saw the value; it then shows only as inconsistent-offsets when another
  value took its offset, and not at all when the log merely got shorter and refilled.
- G1a (aborted read): an ok read returned a value whose send failed (its transaction
  aborted, or the produce certainly did not happen).
- precommitted-read: an operation read a value it sent itself; Kafka hides a transaction's
  records from every consumer until it commits, its own included.
- poll-skip / nonmonotonic-poll: one consumer (process) read a key and its next read of that
  key jumped past values of the log / went back or repeated. A rebalance or an assignment
  between the two reads forgets the consumer's position for the moved keys, so these are only
  flagged when no assignment change lies between: a subscribe rebalance excuses them.
- nonmonotonic-send: one producer's sends to a key landed out of the order it sent them.
- int-send-skip: two sends to one key in the same operation are not adjacent in the log.
  Kafka allows this (other producers interleave), so it is reported but allowed, as Jepsen
  does.
- unseen: a value acknowledged (ok) that no ok read returned by the end of the run. Only
  judged when the run made its final reads after healing ("final-poll" ops); otherwise a
  consumer that fell behind would look like loss.
- unavailable (our addition): such a value whose partition ended the run offline (no leader:
  every in-sync replica came back from an unclean shutdown, KIP-966), so the final reads
  could not read it at all. Not counted as loss, since nothing read the partition's end; it
  is reported apart from unseen. Which partitions ended offline comes from the harness's
  "settled" nemesis record (`offline`); a history without that record (before session 13's
  checker, or a run that stopped before settling) counts such values as unseen, as before.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from ..history import Op
from .model import FAIL, INFO, OK, Analysis, brief

Case = dict[str, Any]


def inconsistent_offsets(a: Analysis) -> list[Case]:
    return [
        {"key": k, "offset": off, "values": sorted(vs, key=repr)}
        for k, order in sorted(a.orders.items())
        for off, vs in sorted(order.log.items())
        if len(vs) > 1
    ]


def duplicates(a: Analysis) -> list[Case]:
    out = []
    for k, order in sorted(a.orders.items()):
        seen: dict[Any, list[int]] = {}
        for off in sorted(order.log):
            for v in order.log[off]:
                seen.setdefault(v, []).append(off)
        out.extend(
            {"key": k, "value": v, "offsets": offs} for v, offs in seen.items() if len(offs) > 1
        )
    return out


def lost_writes(a: Analysis) -> list[Case]:
    out = []
    ok_reads = a.reads_by_type.get(OK, {})
    for k, read in sorted(ok_reads.items()):
        order = a.orders.get(k)
        if order is None:
            continue
        known = [order.first_index[v] for v in read if v in order.first_index]
        if not known:
            continue
        bound = max(known)
        for v, last in order.last_index.items():
            if last > bound or v in read:
                continue
            writer = a.writer_of.get(k, {}).get(v)
            if writer is None or not a.must_have_committed(writer):
                continue
            max_value = order.by_index[bound]
            readers = a.readers_of.get(k, {}).get(max_value, [])
            out.append(
                {
                    "key": k,
                    "value": v,
                    "index": order.first_index[v],
                    "max_read_index": bound,
                    "writer": brief(writer),
                    "max_read": brief(readers[0]) if readers else None,
                }
            )
    return out


def vanished_writes(a: Analysis) -> list[Case]:
    """Lost writes that some ok read returned before they were gone from the final reads."""
    finals: dict[str, set[Any]] = {}
    for o in a.completions:
        if o.type == OK and o.f == "final-poll":
            for k, pairs in a.reads[o.index].items():
                finals.setdefault(k, set()).update(v for _, v in pairs)
    ok_reads = a.reads_by_type.get(OK, {})
    out = []
    for k, final in sorted(finals.items()):
        order = a.orders.get(k)
        known = [order.last_index[v] for v in final if v in order.last_index] if order else []
        if order is None or not known:
            continue
        bound = max(known)  # the final reads passed this index of the key's log
        for v in sorted(ok_reads.get(k, ()), key=repr):
            if v in final or v not in order.first_index or order.first_index[v] > bound:
                continue
            writer = a.writer_of.get(k, {}).get(v)
            if writer is None or not a.must_have_committed(writer):
                continue
            readers = a.readers_of.get(k, {}).get(v, [])
            out.append({
                "key": k,
                "value": v,
                "kind": "vanished",
                "index": order.first_index[v],
                "final_read_index": bound,
                "writer": brief(writer),
                "first_read": brief(next(r for r in readers if r.type == OK)),
            })
    return out


def g1a(a: Analysis) -> list[Case]:
    failed = a.writes_by_type.get(FAIL, {})
    out = []
    for o in a.completions:
        if o.type != OK:
            continue
        for k, pairs in a.reads[o.index].items():
            for off, v in pairs:
                if v in failed.get(k, ()):
                    writer = a.writer_of[k][v]
                    out.append(
                        {
                            "key": k,
                            "value": v,
                            "offset": off,
                            "writer": brief(writer),
                            "reader": brief(o),
                        }
                    )
    return out


def precommitted_reads(a: Analysis) -> list[Case]:
    out = []
    for o in a.completions:
        reads = a.reads[o.index]
        for k, pairs in a.writes[o.index].items():
            own = {v for _, v in pairs} & {v for _, v in reads.get(k, [])}
            if own:
                out.append({"key": k, "values": sorted(own, key=repr), "op": brief(o)})
    return out


def _forget(last: dict[str, tuple[Any, Op]], keys: Any) -> None:
    for k in keys or ():
        last.pop(k, None)


def poll_order(a: Analysis) -> tuple[list[Case], list[Case]]:
    """(poll-skip, nonmonotonic-poll) cases, per process, in the order each consumer read."""
    skips: list[Case] = []
    backs: list[Case] = []
    for process, ops in a.by_process.items():
        last: dict[str, tuple[Any, Op]] = {}
        for o in ops:
            if o.type != OK:
                # A failed or unknown op leaves the consumer's position where the last ok
                # one left it (a transactional consumer seeks back after an abort).
                continue
            if o.f == "assign":
                keep = set(o.value or ())
                _forget(last, [k for k in last if k not in keep])
                continue
            if o.f in ("subscribe", "crash"):
                last.clear()
                continue
            if o.f == "rebalance":
                v = o.value or {}
                _forget(last, list(v.get("assigned", ())) + list(v.get("revoked", ())))
                continue
            if not isinstance(o.value, list) or o.f not in ("poll", "txn", "final-poll"):
                continue
            for mop in o.value:
                if mop and mop[0] == "rebalance":
                    v = mop[1] if len(mop) > 1 and isinstance(mop[1], dict) else {}
                    _forget(last, list(v.get("assigned", ())) + list(v.get("revoked", ())))
                    continue
                if not mop or mop[0] != "poll" or len(mop) < 2:
                    continue
                for k, pairs in mop[1].items():
                    order = a.orders.get(k)
                    for _, v in pairs:
                        prev = last.get(k)
                        last[k] = (v, o)
                        if prev is None or order is None:
                            continue
                        i, j = order.index(prev[0]), order.index(v)
                        if i is None or j is None:
                            continue
                        case = {
                            "key": k,
                            "process": process,
                            "values": [prev[0], v],
                            "delta": j - i,
                            "ops": [brief(prev[1]), brief(o)],
                        }
                        if j - i > 1:
                            case["skipped"] = order.by_index[i + 1 : j][:16]
                            skips.append(case)
                        elif j - i < 1:
                            backs.append(case)
    return skips, backs


def send_order(a: Analysis) -> tuple[list[Case], list[Case]]:
    """(nonmonotonic-send, int-send-skip) cases."""
    backs: list[Case] = []
    skips: list[Case] = []
    for process, ops in a.by_process.items():
        last: dict[str, tuple[Any, Op]] = {}
        for o in ops:
            if o.type not in (OK, INFO) or o.f not in ("send", "txn"):
                continue
            for k, pairs in a.writes[o.index].items():
                order = a.orders.get(k)
                values = [v for _, v in pairs]
                if order is not None:
                    prev = last.get(k)
                    if prev is not None:
                        i, j = order.index(prev[0]), order.index(values[0])
                        if i is not None and j is not None and j - i < 1:
                            backs.append(
                                {
                                    "key": k,
                                    "process": process,
                                    "values": [prev[0], values[0]],
                                    "delta": j - i,
                                    "ops": [brief(prev[1]), brief(o)],
                                }
                            )
                    for v1, v2 in pairwise(values):
                        i, j = order.index(v1), order.index(v2)
                        if i is None or j is None:
                            continue
                        case = {"key": k, "values": [v1, v2], "delta": j - i, "op": brief(o)}
                        if j - i < 1:
                            backs.append(case)
                        elif j - i > 1:
                            skips.append(case)
                last[k] = (values[-1], o)
    return backs, skips


def offline_at_end(ops: list[Op]) -> set[str] | None:
    """The keys (topic-partitions) that had no leader when the final reads were made, from
    the last "settled" nemesis record; None when the history does not say (an older history
    or a run that failed before settling)."""
    for o in reversed(ops):
        if o.process == "nemesis" and o.f == "settled":
            v = o.value
            if isinstance(v, dict) and isinstance(v.get("offline"), list):
                return {str(k) for k in v["offline"]}
            return None
    return None


def unseen(a: Analysis, offline: set[str] | None = None) -> tuple[bool, list[Case], list[Case]]:
    """(judged, unseen cases, unavailable cases): acknowledged values no ok read returned, if
    the run read back at the end; those of a key in `offline` are unavailable, not unseen.
    A run whose every acknowledged key ended offline has nothing to read back (the harness
    makes no final read), and is judged all the same: all its unread values are unavailable."""
    sent = a.writes_by_type.get(OK, {})
    all_offline = offline is not None and all(k in offline for k in sent)
    judged = all_offline or any(o.f == "final-poll" for o in a.completions)
    if not judged:
        return False, [], []
    read = a.reads_by_type.get(OK, {})
    out: list[Case] = []
    gone: list[Case] = []
    for k in sorted(sent):
        missing = sorted(sent[k] - read.get(k, set()), key=repr)
        if missing:
            case = {"key": k, "count": len(missing), "values": missing[:32]}
            (gone if offline and k in offline else out).append(case)
    return True, out, gone
