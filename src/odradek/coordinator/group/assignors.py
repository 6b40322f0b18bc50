"""Server-side assignors of KIP-848 consumer groups: "uniform" (sticky, balanced) and "range".

Input: each member's subscribed topic names, the topics' partition counts and
the current target assignment (for stickiness). Output: member id ->
topic name -> sorted partitions. Pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping

Assignment = dict[str, dict[str, list[int]]]


def range_assign(subscriptions: Mapping[str, set[str]], partitions: Mapping[str, int],
                 current: Assignment | None = None) -> Assignment:
    """Per topic, contiguous ranges to the subscribed members in member-id order."""
    out: Assignment = {m: {} for m in subscriptions}
    for topic in sorted(partitions):
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not members:
            continue
        n = partitions[topic]
        per, extra = divmod(n, len(members))
        start = 0
        for i, m in enumerate(members):
            count = per + (1 if i < extra else 0)
            if count:
                out[m][topic] = list(range(start, start + count))
            start += count
    return out


def uniform_assign(subscriptions: Mapping[str, set[str]], partitions: Mapping[str, int],
                   current: Assignment | None = None) -> Assignment:
    """Balanced and sticky: members keep what they had up to their fair share."""
    current = current or {}
    members = sorted(subscriptions)
    out: dict[str, set[tuple[str, int]]] = {m: set() for m in members}
    all_tps = sorted((t, p) for t, n in partitions.items() for p in range(n)
                     if any(t in subscriptions[m] for m in members))
    if not members:
        return {}
    # the fair share, computed over the members that can take each partition
    quota, extra = divmod(len(all_tps), len(members))
    quotas = {m: quota + (1 if i < extra else 0) for i, m in enumerate(members)}
    taken: set[tuple[str, int]] = set()
    # members that had the most keep the bigger quotas, which moves fewer partitions
    by_size = sorted(members, key=lambda m: -sum(len(v) for v in current.get(m, {}).values()))
    quotas = dict(zip(by_size, sorted(quotas.values(), reverse=True), strict=True))
    for m in members:
        for topic, parts in sorted(current.get(m, {}).items()):
            if topic not in subscriptions[m] or topic not in partitions:
                continue
            for p in parts:
                tp = (topic, p)
                if p < partitions[topic] and tp not in taken and len(out[m]) < quotas[m]:
                    out[m].add(tp)
                    taken.add(tp)
    # the most constrained partitions (fewest members subscribed) first, each to the
    # least loaded member that can take it
    able_of = {t: [m for m in members if t in subscriptions[m]] for t in partitions}
    for tp in sorted(all_tps, key=lambda tp: (len(able_of[tp[0]]), tp)):
        if tp in taken:
            continue
        able = able_of[tp[0]]
        target = min(able, key=lambda m: (len(out[m]), m))
        out[target].add(tp)
        taken.add(tp)
    result: Assignment = {}
    for m, tps in out.items():
        topics: dict[str, list[int]] = {}
        for topic, p in sorted(tps):
            topics.setdefault(topic, []).append(p)
        result[m] = topics
    return result


ASSIGNORS = {"uniform": uniform_assign, "range": range_assign}
DEFAULT_ASSIGNOR = "uniform"
