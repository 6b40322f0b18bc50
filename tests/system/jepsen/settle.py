"""Before the final reads: wait until no transaction is open on any partition the workloads
wrote (the read_committed end, the last stable offset, has reached the high watermark).

A transactional client that the workload dropped mid-transaction (W2 replaces its clients
after an unknown outcome; the producer family kills one) leaves its transaction open until
the coordinator aborts it after transaction.timeout.ms (Kafka's behaviour); read_committed
final reads stop at the last stable offset until then, and every value acknowledged after it
would look unseen. A transaction still open after `timeout` is a hanging transaction (the
KIP-890 class): the wait gives up, says so, and the final reads show what it hides.

A partition with no leader all along the last OFFLINE_S of the wait (every in-sync replica
came back from an unclean shutdown: KIP-966 keeps it offline while unclean election is off)
is listed as offline and not waited for.
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, TopicPartition

__all__ = ["settle"]

OFFLINE_S = 10.0


def _ends(bootstrap: str, parts: list[TopicPartition], isolation: str) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "jepsen-settle",
                  "isolation.level": isolation, "enable.auto.commit": False})
    try:
        return [c.get_watermark_offsets(p, timeout=10, cached=False)[1] for p in parts]
    finally:
        c.close()


def _leaderless(bootstrap: str, topics: list[str]) -> set[str]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "jepsen-settle"})
    try:
        md = c.list_topics(timeout=10)
    finally:
        c.close()
    return {f"{t}-{p}" for t in topics if t in md.topics
            for p, pm in md.topics[t].partitions.items() if pm.leader < 0}


def settle(bootstrap: str, topics: list[str], partitions: int,
           timeout: float = 120.0) -> dict[str, Any]:
    """{"waited_s", "open": [topic-partition whose LSO is still below its HW at the end],
    "offline": [topic-partition without a leader for the last OFFLINE_S]}."""
    every = [TopicPartition(t, p) for t in topics for p in range(partitions)]
    t0 = time.monotonic()
    open_: list[str] = []
    since: dict[str, float] = {}  # leaderless partition -> when first seen so
    while True:
        now = time.monotonic()
        try:
            gone = _leaderless(bootstrap, topics)
        except Exception:  # a metadata call timing out: nothing known yet
            gone = set()
        since = {k: since.get(k, now) for k in gone}
        offline = sorted(k for k, t in since.items() if now - t >= OFFLINE_S)
        parts = [p for p in every if f"{p.topic}-{p.partition}" not in since]
        try:
            lso = _ends(bootstrap, parts, "read_committed")
            hw = _ends(bootstrap, parts, "read_uncommitted")
            open_ = [f"{p.topic}-{p.partition}" for p, a, b in zip(parts, lso, hw, strict=True)
                     if a < b]
        except Exception as exc:  # a metadata call timing out: try again until the deadline
            open_ = [f"error: {exc}"]
        settled = not open_ and len(offline) == len(since)
        if settled or time.monotonic() - t0 > timeout:
            return {"waited_s": round(time.monotonic() - t0, 1), "open": open_,
                    "offline": offline}
        time.sleep(1.0)
