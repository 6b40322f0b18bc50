"""The admin HTTP's answers as plain data: readiness, /v1/cluster and /v1/partitions.

Ready means: the node serves (started), its metadata is caught up (a broker in a cluster:
the controller said so in its last heartbeat; a single node: it leads its own quorum), it
is not fenced, and no partition it hosts is offline (no leader). Each reason it is not
ready is one short sentence in the answer.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.handlers.common import valid_topic_name
from odradek.broker.node_view import NodeView
from odradek.storage.log_dir_failure import channel_for

MAX_LIMIT = 10_000


class BadParameter(Exception):
    """A query parameter the endpoint cannot use: answered 400 with the message."""

    status = 400


class NotFound(BadParameter):
    """What the parameters name does not exist: 404 with the message."""

    status = 404


def readiness(view: NodeView) -> list[str]:
    problems = []
    if view.stopping:
        problems.append("the node is stopping")
    if not view.started:
        problems.append("the node is still starting")
    lifecycle = view.lifecycle
    if lifecycle is not None:
        if not lifecycle.caught_up:
            problems.append("metadata is not caught up with the controller")
        if lifecycle.fenced:
            problems.append("the broker is fenced")
    elif view.quorum is not None and view.quorum.leader_id is None:
        problems.append("the metadata quorum has no leader")
    if view.ctx is not None and channel_for(view.ctx.log_dir).offline:
        problems.append("the log directory is offline")
    image = view.image
    if image is not None and "broker" in view.roles:
        offline = [f"{name}-{p.partition}" for name, topic in image.topics_by_name.items()
                   for p in topic.partitions.values()
                   if p.leader < 0 and view.node_id in p.replicas]
        if offline:
            shown = ", ".join(sorted(offline)[:10])
            more = f" and {len(offline) - 10} more" if len(offline) > 10 else ""
            problems.append(f"{len(offline)} partition(s) hosted here are offline: "
                            f"{shown}{more}")
    return problems


def cluster_json(view: NodeView) -> dict[str, Any]:
    image = view.image
    quorum = view.quorum
    brokers = []
    if image is not None:
        for bid, reg in sorted(image.brokers.items()):
            brokers.append({
                "id": bid, "rack": reg.rack, "fenced": reg.fenced,
                "in_controlled_shutdown": reg.in_controlled_shutdown,
                "endpoints": [{"name": e.name, "host": e.host, "port": e.port}
                              for e in reg.endpoints]})
    out: dict[str, Any] = {
        "cluster_id": view.cluster_id, "node_id": view.node_id, "roles": list(view.roles),
        "ready": not readiness(view), "brokers": brokers,
        "topics": len(image.topics_by_name) if image is not None else 0,
        "partitions": (sum(len(t.partitions) for t in image.topics_by_name.values())
                       if image is not None else 0),
    }
    if quorum is not None:
        out["quorum"] = {"leader_id": quorum.leader_id, "leader_epoch": quorum.leader_epoch,
                         "high_watermark": quorum.high_watermark,
                         "voters": list(getattr(quorum, "voters", []))}
    if view.lifecycle is not None:
        out["broker"] = view.lifecycle.status()
    return out


def _int_param(params: dict[str, str], name: str, default: int, lo: int, hi: int) -> int:
    raw = params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadParameter(f"{name} must be an integer, got {raw[:50]!r}") from None
    if not lo <= value <= hi:
        raise BadParameter(f"{name} must be between {lo} and {hi}, got {value}")
    return value


def partitions_json(view: NodeView, params: dict[str, str]) -> dict[str, Any]:
    """Every partition of the cluster (or of `topic`), with this node's log view of the ones
    it hosts; paged by `offset` and `limit`."""
    unknown = sorted(set(params) - {"topic", "offset", "limit"})
    if unknown:
        raise BadParameter(f"unknown parameter(s): {', '.join(u[:50] for u in unknown)} "
                           "(known: topic, offset, limit)")
    topic = params.get("topic")
    if topic is not None and not valid_topic_name(topic):
        raise BadParameter(f"invalid topic name {topic[:260]!r}")
    offset = _int_param(params, "offset", 0, 0, 1 << 31)
    limit = _int_param(params, "limit", 1000, 1, MAX_LIMIT)
    image = view.image
    rm = view.replica_manager
    rows: list[dict[str, Any]] = []
    total = 0
    if image is not None:
        names = [topic] if topic is not None else sorted(image.topics_by_name)
        for name in names:
            t = image.topics_by_name.get(name)
            if t is None:
                continue
            for index in sorted(t.partitions):
                total += 1
                if total <= offset or len(rows) >= limit:
                    continue
                p = t.partitions[index]
                row: dict[str, Any] = {
                    "topic": name, "partition": index, "leader": p.leader,
                    "leader_epoch": p.leader_epoch, "replicas": list(p.replicas),
                    "isr": list(p.isr), "offline": p.leader < 0,
                    "under_replicated": len(p.isr) < len(p.replicas)}
                local = rm.get(name, index) if rm is not None else None
                if local is not None:
                    row["local"] = {
                        "high_watermark": local.high_watermark,
                        "log_start_offset": local.log_start_offset,
                        "log_end_offset": local.log_end_offset,
                        "size_bytes": local.log.size_bytes}
                rows.append(row)
        if topic is not None and topic not in image.topics_by_name:
            raise NotFound(f"unknown topic {topic!r}")
    return {"total": total, "offset": offset, "limit": limit, "partitions": rows}
