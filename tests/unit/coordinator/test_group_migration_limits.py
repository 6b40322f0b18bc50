"""The limits a group in migration keeps, as Kafka's GroupMetadataManager applies them:
group.max.size (classic groups, and a downgrade), group.consumer.max.size (members of either
protocol in a consumer group, and an upgrade), and a classic member's sync timeout (its
SyncGroup must follow its JoinGroup within its rebalance timeout). Over a real coordinator
and real logs; no clock: deadlines are swept at chosen times."""

from __future__ import annotations

import asyncio

from odradek.coordinator.group.api import JoinRequest
from odradek.coordinator.group.classic import ClassicGroup
from odradek.coordinator.group.consumer import ConsumerGroup
from odradek.protocol.errors import ErrorCode
from tests.unit.coordinator.support import Node
from tests.unit.coordinator.test_classic import form_group, join_req
from tests.unit.coordinator.test_group_migration import hb, sub_v1

E = ErrorCode
FULL = "The consumer group has reached its maximum capacity of {} members."
FAR = 10**12


def make(tmp_path, classic_max: int, consumer_max: int) -> Node:
    return Node(tmp_path, {"t": 6}, consumer_session_timeout_ms=60_000,
                classic_max_size=classic_max, consumer_max_size=consumer_max)


def classic_join(member: str = "", rebalance_ms: int = 20_000) -> JoinRequest:
    return JoinRequest("g", member, None, "kp", "/127.0.0.1", 10_000, rebalance_ms, "consumer",
                       [("range", sub_v1(["t"], {}))], True)


async def classic_join_with_id(coord, rebalance_ms: int = 20_000):
    first = await coord.join_group(classic_join(rebalance_ms=rebalance_ms))
    assert first.error == E.member_id_required, first
    return await coord.join_group(classic_join(first.member_id, rebalance_ms))


def test_size_limits_through_upgrade_and_downgrade(tmp_path):
    node = make(tmp_path, classic_max=2, consumer_max=3)
    coord = node.coordinator

    async def run():
        await form_group(coord, 2)
        # the classic group is full: a third member is refused before it gets a member id
        refused = await coord.join_group(join_req())
        assert refused.error == E.group_max_size_reached
        assert len(coord.groups["g"].members) == 2
        # a consumer-protocol member upgrades it: 2 + 1 members fit group.consumer.max.size
        a = hb(coord)
        assert a.error == E.none and isinstance(coord.groups["g"], ConsumerGroup)
        # full now, for both protocols, with Kafka's message
        b = hb(coord)
        assert (b.error, b.message) == (E.group_max_size_reached, FULL.format(3))
        c = await coord.join_group(classic_join())
        assert c.error == E.group_max_size_reached
        g = coord.groups["g"]
        assert len(g.members) == 3
        # a member already in the group is not refused: it is not joining
        assert hb(coord, a.member_id, a.member_epoch).error == E.none
        # the consumer member leaves: its two classic members do not fit group.max.size=1,
        # so the group stays a consumer group (Kafka's validateOnlineDowngrade...)
        coord.config.classic_max_size = 1
        hb(coord, a.member_id, -1, topics=None)
        g = coord.groups["g"]
        assert isinstance(g, ConsumerGroup) and len(g.members) == 2
        assert all(m.classic is not None for m in g.members.values())

    asyncio.run(run())
    node.close()


def test_downgrade_within_the_classic_limit(tmp_path):
    node = make(tmp_path, classic_max=2, consumer_max=3)
    coord = node.coordinator

    async def run():
        await form_group(coord, 2)
        a = hb(coord)
        assert a.error == E.none
        hb(coord, a.member_id, -1, topics=None)
        back = coord.groups["g"]
        assert isinstance(back, ClassicGroup) and len(back.members) == 2

    asyncio.run(run())
    node.close()


def test_upgrade_refused_by_the_consumer_limit(tmp_path):
    node = make(tmp_path, classic_max=10, consumer_max=1)
    coord = node.coordinator

    async def run():
        results, _ = await form_group(coord, 2)
        # two classic members exceed group.consumer.max.size=1: no upgrade (Kafka answers
        # "not a consumer group" as for any other refused upgrade)
        r = hb(coord)
        assert r.error == E.group_id_not_found and "is not a consumer group" in r.message
        # exactly at the limit: it would be full for the newcomer, so it stays classic and
        # nothing is written
        coord.config.consumer_max_size = 2
        r = hb(coord)
        assert (r.error, r.message) == (E.group_max_size_reached, FULL.format(2))
        g = coord.groups["g"]
        assert isinstance(g, ClassicGroup) and len(g.members) == 2
        for res in results:
            assert coord.heartbeat("g", res.generation_id, res.member_id, None) == E.none

    asyncio.run(run())
    node.close()


def test_classic_member_without_sync_is_removed_at_its_rebalance_timeout(tmp_path):
    node = make(tmp_path, classic_max=10, consumer_max=10)
    coord = node.coordinator

    async def run():
        await form_group(coord, 1)
        a = hb(coord)
        assert a.error == E.none
        g = coord.groups["g"]
        assert isinstance(g, ConsumerGroup)
        late = await classic_join_with_id(coord, rebalance_ms=5_000)
        on_time = await classic_join_with_id(coord, rebalance_ms=5_000)
        assert late.error == on_time.error == E.none
        sync = await coord.sync_group("g", on_time.generation_id, on_time.member_id, None,
                                      "consumer", "range", {})
        assert sync.error == E.none
        m = g.members[late.member_id]
        assert m.sync_deadline_ms is not None
        assert g.members[on_time.member_id].sync_deadline_ms is None
        # nothing else runs out: only the missing SyncGroup counts
        for other in g.members.values():
            other.deadline_ms = FAR
            other.revoke_deadline_ms = None
        coord.sweep(m.sync_deadline_ms - 1)
        assert late.member_id in g.members
        coord.sweep(m.sync_deadline_ms + 1)
        assert late.member_id not in g.members
        assert on_time.member_id in g.members and a.member_id in g.members
        # it is gone: its SyncGroup now is refused
        too_late = await coord.sync_group("g", late.generation_id, late.member_id, None,
                                          "consumer", "range", {})
        assert too_late.error == E.unknown_member_id

    asyncio.run(run())
    node.close()
