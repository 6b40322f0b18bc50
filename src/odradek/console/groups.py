"""Consumer groups for the console: state, members and assignments, lag per partition and in
total with the node's Burrow evaluation (`client.group_lag`, the one `odradek group describe`
shows), offset resets planned (dry run) and applied, deletion; and the sampler that records
every group's lag into the history every few seconds.
"""

from __future__ import annotations

import datetime
import logging
import threading
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import OffsetSpec

from odradek.client.group_lag import node_lag
from odradek.console.cluster import TIMEOUT_S, Cluster, KafkaFailure, result
from odradek.console.lag_history import LagHistory
from odradek.console.paging import BadRequest

log = logging.getLogger(__name__)

INACTIVE = ("EMPTY", "DEAD", "UNKNOWN")
RESET_MODES = ("earliest", "latest", "offset", "timestamp")


def _state(value: Any) -> str:
    return str(getattr(value, "name", value)).upper()


def list_groups(cluster: Cluster) -> list[dict[str, Any]]:
    res = result(cluster.admin.list_consumer_groups(request_timeout=TIMEOUT_S))
    rows = [{"id": g.group_id, "state": _state(g.state),
             "type": _state(getattr(g, "type", "CLASSIC"))} for g in res.valid]
    return sorted(rows, key=lambda r: r["id"])


def _describe(cluster: Cluster, group: str) -> Any:
    return result(cluster.admin.describe_consumer_groups([group], request_timeout=TIMEOUT_S)[group])


def committed(cluster: Cluster, group: str) -> dict[tuple[str, int], int]:
    futures = cluster.admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                        request_timeout=TIMEOUT_S)
    res = result(futures[group])
    return {(tp.topic, tp.partition): tp.offset for tp in res.topic_partitions or []
            if tp.offset >= 0}


def lag_of(cluster: Cluster, group: str) -> tuple[int, dict[str, int]]:
    """(total lag, {"topic:partition": lag}) from the committed and log end offsets."""
    done = committed(cluster, group)
    ends = cluster.offsets(done, OffsetSpec.latest())
    lags = {f"{t}:{p}": max(ends[(t, p)] - off, 0) for (t, p), off in done.items()
            if ends.get((t, p), -1) >= 0}
    return sum(lags.values()), lags


def describe(cluster: Cluster, group: str) -> dict[str, Any]:
    desc = _describe(cluster, group)
    state = _state(desc.state)
    done = committed(cluster, group)
    if state == "DEAD" and not done:
        raise KafkaFailure(f"GROUP_ID_NOT_FOUND: consumer group {group!r} does not exist", 404)
    members = []
    owner: dict[tuple[str, int], str] = {}
    for m in desc.members or []:
        tps = [(tp.topic, tp.partition) for tp in (m.assignment.topic_partitions
                                                    if m.assignment else [])]
        for tp in tps:
            owner[tp] = m.member_id
        members.append({"id": m.member_id, "client_id": m.client_id, "host": m.host,
                        "assignment": [f"{t}:{p}" for t, p in sorted(tps)]})
    tps = sorted(set(done) | set(owner))
    ends = cluster.offsets(tps, OffsetSpec.latest())
    # the node's lag request logs in as the console's other clients do (TLS, SASL)
    node = node_lag(cluster.bootstrap, group, TIMEOUT_S,
                    {k: str(v) for k, v in cluster.overrides.items()}) or {}
    statuses = {(r[0], r[1]): r for r in node.get("partitions", [])}
    rows = []
    total = 0
    for tp in tps:
        cur = done.get(tp)
        end = ends.get(tp)
        lag = end - cur if cur is not None and end is not None and end >= 0 else None
        total += lag or 0
        ev = statuses.get(tp)
        rows.append({"topic": tp[0], "partition": tp[1], "committed": cur, "end": end,
                     "lag": lag, "member": owner.get(tp), "status": ev[5] if ev else "OK",
                     "lag_ms": ev[4] if ev else 0})
    coord = desc.coordinator
    return {"id": group, "state": state, "members": members, "partitions": rows,
            "total_lag": total, "status": node.get("status", "OK"),
            "assignor": desc.partition_assignor or "",
            "coordinator": f"{coord.host}:{coord.port} ({coord.id})" if coord else None}


def parse_timestamp_ms(text: str) -> int:
    """Milliseconds since the epoch, or an ISO date-time (UTC unless a zone is given)."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise BadRequest(f"a timestamp is milliseconds or an ISO date-time, not {text[:40]!r}")\
            from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return int(when.timestamp() * 1000)


def reset_plan(cluster: Cluster, group: str, mode: str, value: str,
               topic: str | None) -> list[dict[str, Any]]:
    """The new committed offsets a reset would write (Kafka clamps them into the log's range),
    for the group's partitions (of one topic, or of all it has offsets for)."""
    if mode not in RESET_MODES:
        raise BadRequest(f"mode must be one of {', '.join(RESET_MODES)}, not {mode[:20]!r}")
    target = None
    if mode == "offset":
        try:
            target = int(value.strip())
        except ValueError:
            raise BadRequest(f"the offset must be an integer, got {value[:40]!r}") from None
        if target < 0:
            raise BadRequest(f"the offset must be 0 or more, got {target}")
    stamp = parse_timestamp_ms(value) if mode == "timestamp" else None
    desc = _describe(cluster, group)
    state = _state(desc.state)
    if desc.members or state not in INACTIVE:
        raise KafkaFailure(f"offsets can be reset only while the group {group!r} is inactive; "
                           f"it is {state} with {len(desc.members or [])} member(s)", 409)
    done = committed(cluster, group)
    if topic:
        t = cluster.metadata(fresh=True).topics.get(topic)
        if t is None:
            raise KafkaFailure(f"UNKNOWN_TOPIC_OR_PARTITION: topic {topic!r} does not exist", 404)
        tps = [(topic, p) for p in sorted(t.partitions)]
    else:
        tps = sorted(done)
    if not tps:
        raise BadRequest(f"the group {group!r} has no committed offsets; name a topic")
    lo = cluster.offsets(tps, OffsetSpec.earliest())
    hi = cluster.offsets(tps, OffsetSpec.latest())
    at = cluster.offsets(tps, OffsetSpec.for_timestamp(stamp)) if stamp is not None else {}
    plan = []
    for tp in tps:
        if mode == "earliest":
            new = lo[tp]
        elif mode == "latest":
            new = hi[tp]
        elif mode == "offset":
            new = target if target is not None else 0
        else:
            new = at.get(tp, -1)
            if new < 0:
                new = hi[tp]  # nothing at or after the time: the end
        new = min(max(new, lo[tp]), hi[tp])
        plan.append({"topic": tp[0], "partition": tp[1], "current": done.get(tp),
                     "new": new})
    return plan


def apply_plan(cluster: Cluster, group: str, plan: list[dict[str, Any]]) -> None:
    tps = [TopicPartition(r["topic"], r["partition"], r["new"]) for r in plan]
    futures = cluster.admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, tps)], request_timeout=TIMEOUT_S)
    result(futures[group])


def delete_group(cluster: Cluster, group: str) -> None:
    futures = cluster.admin.delete_consumer_groups([group], request_timeout=TIMEOUT_S)
    result(futures[group])


class LagSampler:
    """Every `interval_s`, each group's lag into the history, from a daemon thread."""

    def __init__(self, cluster: Cluster, history: LagHistory, interval_s: float = 5.0) -> None:
        self.cluster = cluster
        self.history = history
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lag-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def sample_once(self) -> int:
        n = 0
        for g in list_groups(self.cluster):
            if g["state"] == "DEAD":
                continue
            try:
                total, parts = lag_of(self.cluster, g["id"])
            except KafkaFailure as exc:
                log.debug("lag of %s not sampled: %s", g["id"], exc.message)
                continue
            self.history.record(g["id"], total, parts)
            n += 1
        return n

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample_once()
            except Exception as exc:  # a cluster that is away now is back later: keep going
                log.warning("lag sample failed: %s", exc)
            self._stop.wait(self.interval_s)
