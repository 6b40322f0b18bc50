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
from odradek.protocol.errors import ErrorCode

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


async def run(ctx: Any, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a controller operation in a thread, then let the partitions follow the image."""
    async with ctx.admin_lock:
        result = await asyncio.to_thread(fn, *args, **kwargs)
        if ctx.replica_manager is not None:  # a controller-only node hosts no partitions
            await ctx.replica_manager.sync(ctx.image)
    return result


async def auto_create_topics(ctx: Any, names: list[str]) -> dict[str, ErrorCode]:
    """Create topics with the broker defaults; returns the errors by name."""
    specs = [CreatableTopic(name=n) for n in names]
    results = await run(ctx, ctx.controller.create_topics, specs, False)
    return {r.name: r.error_code for r in results
            if r.error_code not in (ErrorCode.none, ErrorCode.topic_already_exists)}
