"""The checker: reads a whole history and names every anomaly Jepsen's Kafka workload defines
(`anomalies.py`), W3's metadata checks (`metadata.py`) and the Raft invariants of the nodes'
metadata quorum (`raft.py`). `check(ops)` and `check_raft(node_dirs)` return a `Report` whose
`table()` is the run's summary; `python -m tests.system.jepsen.checker HISTORY [NODE_DIR...]`
checks a kept history again.
"""

from __future__ import annotations

from collections import Counter

from ..history import Op
from . import anomalies, metadata
from .model import analyse
from .raft import check_raft
from .report import ALLOWED, DATA_ANOMALIES, NOT_LOSS, Report


def check(ops: list[Op]) -> Report:
    a = analyse(ops)
    r = Report()
    r.add("lost-write", anomalies.lost_writes(a) + anomalies.vanished_writes(a))
    r.add("duplicate", anomalies.duplicates(a))
    r.add("inconsistent-offsets", anomalies.inconsistent_offsets(a))
    r.add("G1a", anomalies.g1a(a))
    r.add("precommitted-read", anomalies.precommitted_reads(a))
    skips, backs = anomalies.poll_order(a)
    r.add("poll-skip", skips)
    r.add("nonmonotonic-poll", backs)
    sends_back, send_skips = anomalies.send_order(a)
    r.add("nonmonotonic-send", sends_back)
    r.add("int-send-skip", send_skips)
    offline = anomalies.offline_at_end(ops)
    judged, missing, unreadable = anomalies.unseen(a, offline)
    if judged:
        r.add("unseen", missing)
        if offline is None:
            # an older history: which partitions ended offline is not known, so their
            # unread values stay counted as unseen (the checker's behaviour before)
            r.not_checked["unavailable"] = "the history does not record which partitions " \
                "ended offline (no \"settled\" record): their values count as unseen"
        else:
            r.add("unavailable", unreadable)
    else:
        r.not_checked["unseen"] = "no final-poll after heal in this history"
    for name, cases in metadata.check_metadata(ops).items():
        r.add(name, cases)
    types = Counter(o.type for o in ops if o.process != "nemesis")
    r.stats = {
        "ops": len(ops),
        "invoke": types["invoke"],
        "ok": types["ok"],
        "fail": types["fail"],
        "info": types["info"],
        "nemesis": sum(1 for o in ops if o.process == "nemesis"),
        "keys": len(a.orders),
        "values-sent-ok": sum(len(v) for v in a.writes_by_type.get("ok", {}).values()),
        "offline-at-end": sorted(offline) if offline is not None else None,
    }
    return r


__all__ = ["ALLOWED", "DATA_ANOMALIES", "NOT_LOSS", "Report", "check", "check_raft"]
