"""KIP-848's online migration between the group protocols, over a real coordinator and real
logs: upgrade of a classic group by a ConsumerGroupHeartbeat, classic members inside the
consumer group (JoinGroup/SyncGroup/Heartbeat/OffsetCommit/LeaveGroup), downgrade when the
last consumer-protocol member goes, the policy's refusals, and reload from
`__consumer_offsets` in every state."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.coordinator.group.classic import ClassicGroup, GroupState
from odradek.coordinator.group.consumer import ConsumerGroup
from odradek.coordinator.group.coordinator import GroupCoordinator, OffsetCommitEntry, mono_ms
from odradek.coordinator.group.migration import (
    MalformedProtocol,
    MigrationPolicy,
    encode_assignment,
    parse_assignment,
    parse_subscription,
)
from odradek.coordinator.offsets_topic import (
    CONSUMER_GROUP_MEMBER_METADATA_KEY,
    decode_value,
    encode_value,
)
from odradek.protocol.errors import ErrorCode, ProtocolError
from odradek.protocol.primitives import Writer
from tests.unit.coordinator.support import Node
from tests.unit.coordinator.test_classic import form_group, join_req

E = ErrorCode


def sub_v1(topics: list[str], owned: dict[str, list[int]]) -> bytes:
    """A ConsumerProtocolSubscription v1 (what cooperative clients send)."""
    w = Writer()
    w.write_int16(1)
    w.write_array_len(len(topics))
    for t in topics:
        w.write_string(t)
    w.write_nullable_bytes(None)
    w.write_array_len(len(owned))
    for t, ps in owned.items():
        w.write_string(t)
        w.write_array_len(len(ps))
        for p in ps:
            w.write_int32(p)
    return w.getvalue()


def make(tmp_path, policy: str = "bidirectional") -> Node:
    return Node(tmp_path, {"t": 6}, consumer_session_timeout_ms=60_000,
                migration_policy=policy)


def reload(node: Node) -> GroupCoordinator:
    """A second coordinator replaying the same `__consumer_offsets` (a restart)."""
    coord = GroupCoordinator(node.rm, node.coordinator.config, node.lookup, node.name_of,
                             lambda: list(node.controller.image.topics_by_name))
    coord.load()
    return coord


def hb(coord, member="", epoch=0, owned=None, topics=("t",)):
    return coord.consumer_group_heartbeat("g", member, epoch, None, None, 30_000,
                                          list(topics) if topics is not None else None, None,
                                          owned, "kip848", "/h")


def as_sets(assignment):
    return {t: set(ps) for t, ps in (assignment or {}).items()}


async def classic_rejoin(coord, member_id, protocols=None):
    r = await coord.join_group(join_req(member=member_id, protocols=protocols))
    assert r.error == E.none, r
    s = await coord.sync_group("g", r.generation_id, member_id, None, "consumer", "range", {})
    return r, s


def test_subscription_and_assignment_codecs():
    s = parse_subscription(sub_v1(["a", "b"], {"a": [1, 2]}))
    assert (s.version, s.topics, s.owned) == (1, ["a", "b"], {"a": {1, 2}})
    raw = encode_assignment(1, {"t": {3, 1}})
    assert parse_assignment(raw) == {"t": {1, 3}} and raw[:2] == b"\x00\x01"
    with pytest.raises(MalformedProtocol):
        parse_subscription(b"\x00")
    assert MigrationPolicy.parse("UPGRADE") is MigrationPolicy.UPGRADE
    assert MigrationPolicy.parse("nonsense") is MigrationPolicy.DISABLED


def test_classic_member_metadata_is_tag_0_and_survives_a_round_trip():
    value = {"instance_id": None, "rack_id": None, "client_id": "c", "client_host": "/h",
             "subscribed_topic_names": ["t"], "subscribed_topic_regex": None,
             "server_assignor": None, "rebalance_timeout_ms": 5,
             "classic_member_metadata": {"session_timeout_ms": 10_000, "supported_protocols": [
                 {"name": "range", "metadata": b"\x00\x00"}]}}
    raw = encode_value(CONSUMER_GROUP_MEMBER_METADATA_KEY, value)
    back = decode_value(CONSUMER_GROUP_MEMBER_METADATA_KEY, raw)
    assert back is not None
    assert back["classic_member_metadata"] == value["classic_member_metadata"]
    plain = encode_value(CONSUMER_GROUP_MEMBER_METADATA_KEY,
                         {**value, "classic_member_metadata": None})
    assert plain.endswith(b"\x00")  # no tagged field: an empty section
    assert decode_value(CONSUMER_GROUP_MEMBER_METADATA_KEY, plain)[
        "classic_member_metadata"] is None


def test_upgrade_mixed_membership_then_downgrade_and_reload(tmp_path):
    node = make(tmp_path)
    coord = node.coordinator

    async def run():
        results, _ = await form_group(coord, 2)
        classic = coord.groups["g"]
        assert isinstance(classic, ClassicGroup) and classic.generation == 1
        ids = [r.member_id for r in results]
        coord.commit_offsets("g", 1, ids[0], None, [OffsetCommitEntry("t", 0, 7)])

        # a KIP-848 member joins: the group is upgraded, the classic members kept at the
        # generation with their last assignment (partition i to member i)
        a = hb(coord)
        assert a.error == E.none
        g = coord.groups["g"]
        assert isinstance(g, ConsumerGroup)
        assert g.group_epoch == 2 and all(g.members[i].classic is not None for i in ids)
        assert g.members[ids[0]].assigned == {"t": {0}}
        # the new member gets nothing the classic members still hold
        assert not (as_sets(a.assignment).get("t", set()) & {0, 1})
        assert coord.fetch_offsets("g", [("t", [0])])[1][0][2].offset == 7

        # a classic member is told to rejoin; its commit with its old generation is refused
        assert coord.heartbeat("g", 1, ids[0], None) == E.rebalance_in_progress
        assert coord.commit_offsets("g", 2, ids[0], None, [OffsetCommitEntry("t", 0, 8)]) == {
            ("t", 0): E.illegal_generation}
        # reload mid-migration: classic members come back as classic members
        again = reload(node).groups["g"]
        assert isinstance(again, ConsumerGroup)
        assert again.members[ids[1]].classic == g.members[ids[1]].classic
        assert again.members[ids[1]].assigned == {"t": {1}}

        # both classic members rejoin (eager: they own nothing as they join)
        for mid in ids:
            r, s = await classic_rejoin(coord, mid)
            assert r.leader == "" and r.members == [] and r.protocol_name == "range"
            assert s.error == E.none and r.generation_id == g.members[mid].member_epoch
        a2 = hb(coord, a.member_id, a.member_epoch, owned=as_sets(a.assignment), topics=None)
        for mid in ids:
            r, s = await classic_rejoin(coord, mid)
        owners: dict[int, str] = {}
        for mid, m in g.members.items():
            for p in m.assigned.get("t", ()):
                assert p not in owners, "a partition owned twice"
                owners[p] = mid
        a3 = hb(coord, a.member_id, a2.member_epoch, owned=as_sets(a2.assignment), topics=None)
        for mid in ids:
            if coord.heartbeat("g", g.members[mid].member_epoch, mid, None) != E.none:
                await classic_rejoin(coord, mid)
        assert g.state == "stable", g.state
        assert sorted(p for m in g.members.values() for p in m.assigned.get("t", ())) == list(
            range(6))
        # a classic member's SyncGroup carries its partitions as ConsumerProtocol bytes
        m0 = g.members[ids[0]]
        s = await coord.sync_group("g", m0.member_epoch, ids[0], None, "consumer", "range", {})
        assert parse_assignment(s.assignment) == m0.assigned
        assert coord.commit_offsets("g", m0.member_epoch, ids[0], None,
                                    [OffsetCommitEntry("t", 0, 9)]) == {("t", 0): E.none}

        # the last KIP-848 member leaves: the group goes back to classic, rebalancing, its
        # members holding their target assignments
        targets = {mid: {t: set(ps) for t, ps in g.target[mid].items()} for mid in ids}
        assert hb(coord, a.member_id, -1, topics=None).error == E.none
        back = coord.groups["g"]
        assert {mid: parse_assignment(back.members[mid].assignment) for mid in ids} == targets
        assert isinstance(back, ClassicGroup)
        assert back.state is GroupState.PREPARING_REBALANCE and back.protocol_type == "consumer"
        assert set(back.members) == set(ids)
        assert coord.heartbeat("g", a3.member_epoch, ids[0], None) == E.rebalance_in_progress
        # reload after the downgrade: a classic group with the same members and offsets
        restarted = reload(node)
        rg = restarted.groups["g"]
        assert isinstance(rg, ClassicGroup) and set(rg.members) == set(ids)
        assert restarted.fetch_offsets("g", [("t", [0])])[1][0][2].offset == 9
        # the classic members rejoin and the group is a plain classic group again
        rs = await asyncio.gather(*[coord.join_group(join_req(member=mid)) for mid in ids])
        assert all(r.error == E.none for r in rs)
        assert back.generation == g.group_epoch + 1

    asyncio.run(run())
    node.close()


def test_policy_refusals(tmp_path):
    node = make(tmp_path, "downgrade")
    coord = node.coordinator

    async def run():
        await form_group(coord, 2)
        r = hb(coord)
        assert r.error == E.group_id_not_found and "is not a consumer group" in r.message
        assert isinstance(coord.groups["g"], ClassicGroup)
        # a classic group of another protocol type never upgrades
        coord.config.migration_policy = "bidirectional"
        await form_other(coord)
        r = coord.consumer_group_heartbeat("other", "", 0, None, None, 30_000, ["t"], None,
                                           None, "c", "/h")
        assert r.error == E.group_id_not_found
        # an upgrade allowed, the downgrade refused: the group stays a consumer group
        coord.config.migration_policy = "upgrade"
        a = hb(coord)
        assert a.error == E.none and isinstance(coord.groups["g"], ConsumerGroup)
        hb(coord, a.member_id, -1, topics=None)
        g = coord.groups["g"]
        assert isinstance(g, ConsumerGroup) and len(g.members) == 2

    asyncio.run(run())
    node.close()


async def form_other(coord):
    r = await coord.join_group(join_req(group="other", ptype="connect",
                                        protocols=[("v1", b"x")]))
    r = await coord.join_group(join_req(group="other", member=r.member_id, ptype="connect",
                                        protocols=[("v1", b"x")]))
    assert r.error == E.none


def test_classic_join_errors_and_session_expiry_downgrade(tmp_path):
    node = make(tmp_path)
    coord = node.coordinator

    async def run():
        results, _ = await form_group(coord, 1)
        cid = results[0].member_id
        a = hb(coord)
        g = coord.groups["g"]
        # protocols the group's classic members do not share; another protocol type
        bad = await coord.join_group(join_req(protocols=[("roundrobin", b"\x00\x00")]))
        assert bad.error == E.inconsistent_group_protocol
        bad = await coord.join_group(join_req(ptype="connect"))
        assert bad.error == E.inconsistent_group_protocol
        # a new classic member needs a member id first (JoinGroup v4+)
        first = await coord.join_group(join_req(protocols=[("range", sub_v1(["t"], {}))]))
        assert first.error == E.member_id_required
        # SyncGroup/Heartbeat of a KIP-848 member through the classic APIs
        assert coord.heartbeat("g", a.member_epoch, a.member_id, None) == E.unknown_member_id
        assert coord.heartbeat("g", 99, cid, None) == E.illegal_generation
        # a classic member leaves through LeaveGroup
        top, out = coord.leave_group("g", [(cid, None)])
        assert top == E.none and out == [(cid, None, E.none)]
        assert cid not in g.members
        # a classic member rejoins; the KIP-848 member's session runs out: downgrade
        r = await coord.join_group(join_req(member=first.member_id,
                                            protocols=[("range", sub_v1(["t"], {}))]))
        assert r.error == E.none
        g.members[first.member_id].deadline_ms = mono_ms() + 10**9
        coord.sweep(g.members[a.member_id].deadline_ms + 1)
        back = coord.groups["g"]
        assert isinstance(back, ClassicGroup) and list(back.members) == [first.member_id]

    asyncio.run(run())
    node.close()


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_embedded_protocol_parsers_take_any_bytes(data):
    # a client's subscription or assignment bytes: parsed, or refused as malformed
    for parse in (parse_subscription, parse_assignment):
        try:
            parse(data)
        except MalformedProtocol:
            pass


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=120))
def test_member_metadata_with_any_tagged_section_decodes_or_is_refused(tail):
    raw = encode_value(CONSUMER_GROUP_MEMBER_METADATA_KEY, {
        "client_id": "c", "client_host": "h", "subscribed_topic_names": ["t"]})[:-1] + tail
    try:
        decode_value(CONSUMER_GROUP_MEMBER_METADATA_KEY, raw)
    except ProtocolError:
        pass


def test_upgrade_during_the_first_rebalance_sends_waiters_back(tmp_path):
    node = make(tmp_path)
    coord = node.coordinator
    coord.config.initial_rebalance_delay_ms = 60_000  # the classic join stays pending

    async def run():
        first = await coord.join_group(join_req())
        waiting = asyncio.ensure_future(coord.join_group(join_req(member=first.member_id)))
        await asyncio.sleep(0)
        assert not waiting.done()
        r = hb(coord)
        assert r.error == E.none and isinstance(coord.groups["g"], ConsumerGroup)
        answer = await waiting
        assert answer.error == E.rebalance_in_progress
        # the classic member rejoins the consumer group and is answered at once
        again, s = await classic_rejoin(coord, first.member_id)
        assert again.generation_id == coord.groups["g"].members[first.member_id].member_epoch
        assert s.error == E.none

    asyncio.run(run())
    node.close()


def test_migration_policy_config_is_validated():
    from odradek.metadata.config.config_def import ConfigError
    from odradek.metadata.config.group_configs import GROUP_COORDINATOR_BROKER_DEFS

    d = next(d for d in GROUP_COORDINATOR_BROKER_DEFS
             if d.name == "group.consumer.migration.policy")
    assert d.default == "bidirectional"
    d.validator(d.name, "Downgrade")
    with pytest.raises(ConfigError):
        d.validator(d.name, "sideways")


def test_classic_static_member_replacing_the_last_consumer_member_downgrades(tmp_path):
    node = make(tmp_path)
    coord = node.coordinator

    async def run():
        results, _ = await form_group(coord, 1)
        cid = results[0].member_id
        a = coord.consumer_group_heartbeat("g", "", 0, "inst-1", None, 30_000, ["t"], None,
                                           None, "kip848", "/h")
        assert a.error == E.none and isinstance(coord.groups["g"], ConsumerGroup)
        # the static member comes back speaking the classic protocol (a client downgraded)
        r = await coord.join_group(join_req(instance="inst-1"))
        assert r.error == E.none
        g = coord.groups["g"]
        assert isinstance(g, ClassicGroup) and g.state is GroupState.STABLE
        assert set(g.members) == {cid, r.member_id} and a.member_id not in g.members
        assert g.static_members == {"inst-1": r.member_id}
        s = await coord.sync_group("g", r.generation_id, r.member_id, "inst-1", "consumer",
                                   "range", {})
        assert s.error == E.none
        again = reload(node).groups["g"]
        assert isinstance(again, ClassicGroup) and set(again.members) == set(g.members)

    asyncio.run(run())
    node.close()


def test_refused_join_after_the_upgrade_leaves_the_classic_group(tmp_path):
    node = make(tmp_path)
    coord = node.coordinator

    async def run():
        r = await coord.join_group(join_req(instance="inst-x"))
        assert r.error == E.none
        await coord.sync_group("g", r.generation_id, r.member_id, "inst-x", "consumer",
                               "range", {r.member_id: encode_assignment(0, {"t": {0}})})
        # a consumer-protocol member with the same instance id while it is still in use
        a = coord.consumer_group_heartbeat("g", "", 0, "inst-x", None, 30_000, ["t"], None,
                                           None, "kip848", "/h")
        assert a.error == E.unreleased_instance_id
        g = coord.groups["g"]
        assert isinstance(g, ClassicGroup) and set(g.members) == {r.member_id}
        assert isinstance(reload(node).groups["g"], ClassicGroup)
        assert coord.heartbeat("g", r.generation_id, r.member_id, "inst-x") == E.none

    asyncio.run(run())
    node.close()
