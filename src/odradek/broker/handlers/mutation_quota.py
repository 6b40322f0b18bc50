"""controller_mutation_rate (KIP-599): partitions created or deleted per second, charged by
CreateTopics, CreatePartitions and DeleteTopics.

As Kafka: the versions that know THROTTLING_QUOTA_EXCEEDED (CreateTopics v6+, CreatePartitions
v3+, DeleteTopics v5+) are strict, a topic asked for while the rate is over the quota is not
done and answers that error; older ones are permissive, everything is done and charged. Either
way the answer carries the throttle time and the channel is muted that long.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.authz import SessionHeader
from odradek.security.quotas import CONTROLLER_MUTATION_RATE

STRICT_FROM = {19: 6, 37: 3, 20: 5}  # CreateTopics, CreatePartitions, DeleteTopics


def admit(ctx: Any, header: Any, costs: list[tuple[Any, int]]) -> set[Any]:
    """The items (name, partitions) refused for the quota; the rest are charged."""
    quotas = ctx.quotas
    if quotas is None or not quotas.active or not isinstance(header, SessionHeader):
        return set()
    user, client = header.session.principal.name, header.client_id or ""
    strict = header.api_version >= STRICT_FROM.get(header.api_key, 1 << 15)
    refused: set[Any] = set()
    throttle = 0
    for item, cost in costs:
        if strict:
            wait = quotas.throttle_ms(CONTROLLER_MUTATION_RATE, user, client)
            if wait > 0:
                refused.add(item)
                throttle = max(throttle, wait)
                continue
        throttle = max(throttle, quotas.record(CONTROLLER_MUTATION_RATE, user, client,
                                               max(cost, 0)))
    if throttle > 0:
        header.throttle_ms = max(header.throttle_ms, throttle)
        mute = getattr(header.conn, "mute", None)
        if mute is not None:
            mute(throttle)
    return refused
