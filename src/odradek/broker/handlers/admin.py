"""Calls into the controller for the admin handlers.

Controller operations append to the metadata log (disk), so they run in a
thread, one at a time; afterwards the replica manager follows the new image
(creating or deleting logs) before the handler answers, so a client that
creates a topic can produce to it at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from odradek.metadata.controller_requests import CreatableTopic
from odradek.protocol.errors import ErrorCode, KafkaError

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    node_id: int
    host: str
    port: int
    rack: str | None
    fenced: bool = False


def all_brokers(ctx: Any) -> list[BrokerAddress]:
    """Every registered broker, fenced ones too, with its endpoint on our listener name."""
    name = ctx.listener_name or (ctx.advertised[0].name if ctx.advertised else "PLAINTEXT")
    out = []
    for b in sorted(ctx.image.brokers.values(), key=lambda b: b.broker_id):
        ep = next((e for e in b.endpoints if e.name.upper() == name), None)
        if ep is None and b.endpoints and ctx.link is None:
            ep = b.endpoints[0]
        if ep is not None:
            out.append(BrokerAddress(b.broker_id, ep.host, ep.port, b.rack, bool(b.fenced)))
    return out


def live_brokers(ctx: Any) -> list[BrokerAddress]:
    """Unfenced brokers with their endpoint on the listener the request came in on (clients
    connect there), as Kafka answers Metadata and DescribeCluster."""
    image = ctx.image
    listener_name = ctx.listener_name or (ctx.advertised[0].name if ctx.advertised
                                          else "PLAINTEXT")
    out = []
    for b in sorted(image.brokers.values(), key=lambda b: b.broker_id):
        if b.fenced:
            continue
        ep = next((e for e in b.endpoints if e.name.upper() == listener_name), None)
        if ep is None and b.endpoints and ctx.link is None:
            ep = b.endpoints[0]  # a single node: its one client listener
        if ep is not None:
            out.append(BrokerAddress(b.broker_id, ep.host, ep.port, b.rack))
    if not out and ctx.advertised and ctx.link is None:
        a = ctx.advertised[0]
        out.append(BrokerAddress(ctx.node_id, a.host, a.port, None))
    return out


def coordinator_at(ctx: Any, topic: str, partition: int, key: str) -> dict[str, Any] | None:
    """FindCoordinator's answer in a cluster: the leader of the key's internal partition, on
    the listener the request came in on (None: no live leader, COORDINATOR_NOT_AVAILABLE)."""
    part = ctx.image.partition(topic, partition)
    if part is None or part.leader < 0:
        return None
    node = next((b for b in live_brokers(ctx) if b.node_id == part.leader), None)
    if node is None:
        return None
    return {"key": key, "node_id": node.node_id, "host": node.host, "port": node.port,
            "error_code": ErrorCode.none, "error_message": None}


async def run(ctx: Any, fn: Callable[..., T], *args: Any,
              refused: Callable[[KafkaError], T] | None = None, **kwargs: Any) -> T:
    """Run a controller operation in a thread, then let the partitions follow the image.
    A KafkaError for the whole operation (NOT_CONTROLLER: leadership moved) becomes
    `refused(exc)`, the per-item answers carrying its code, when given."""
    async with ctx.admin_lock:
        try:
            result = await asyncio.to_thread(fn, *args, **kwargs)
        except KafkaError as exc:
            if refused is None:
                raise
            return refused(exc)
        if ctx.replica_manager is not None:  # a controller-only node hosts no partitions
            await ctx.replica_manager.sync(ctx.image)
    return result


async def auto_create_topics(ctx: Any, names: list[str]) -> dict[str, ErrorCode]:
    """Create topics with the broker defaults; returns the errors by name."""
    specs = [CreatableTopic(name=n) for n in names]
    results = await run(ctx, ctx.controller.create_topics, specs, False)
    return {r.name: r.error_code for r in results
            if r.error_code not in (ErrorCode.none, ErrorCode.topic_already_exists)}
