from __future__ import annotations

import asyncio

import pytest

from odradek.coordinator.group.classic import GroupState
from odradek.coordinator.group.coordinator import JoinRequest, OffsetCommitEntry, mono_ms
from odradek.coordinator.offsets_topic import encode_assignment, encode_subscription
from odradek.protocol.errors import ErrorCode
from tests.unit.coordinator.support import Node

E = ErrorCode
SUB = encode_subscription(["t"])


@pytest.fixture
def node(tmp_path):
    n = Node(tmp_path, {"t": 6})
    yield n
    n.close()


def join_req(group="g", member="", instance=None, protocols=None, ptype="consumer",
             session=10_000, v4=True):
    return JoinRequest(group, member, instance, "client", "/127.0.0.1", session, 20_000, ptype,
                       protocols or [("range", SUB)], v4)


async def join(coord, **kw):
    first = await coord.join_group(join_req(**kw))
    if first.error == E.member_id_required:
        kw["member"] = first.member_id
        return await coord.join_group(join_req(**kw))
    return first


async def form_group(coord, n, group="g"):
    """n members join together; the leader assigns partition i to member i."""
    results = await asyncio.gather(*[join(coord, group=group) for _ in range(n)])
    gen = results[0].generation_id
    leader = next(r for r in results if r.member_id == r.leader)
    assert len(leader.members) == n
    assignments = {mid: encode_assignment({"t": [i]}) for i, (mid, _, _) in
                   enumerate(leader.members)}
    syncs = await asyncio.gather(*[
        coord.sync_group(group, gen, r.member_id, None, "consumer", "range",
                         assignments if r.member_id == r.leader else {}) for r in results])
    assert all(s.error == E.none for s in syncs)
    return results, syncs


def test_member_id_required_then_join_sync_heartbeat(node):
    coord = node.coordinator

    async def run():
        first = await coord.join_group(join_req())
        assert first.error == E.member_id_required and first.member_id.startswith("client-")
        results, syncs = await form_group(coord, 3)
        g = coord.groups["g"]
        assert g.state is GroupState.STABLE and g.generation == 1
        assert len({r.member_id for r in results}) == 3
        assert sorted(bytes(s.assignment) for s in syncs) == sorted(
            encode_assignment({"t": [i]}) for i in range(3))
        for r in results:
            assert coord.heartbeat("g", r.generation_id, r.member_id, None) == E.none
        # a MEMBER_ID_REQUIRED id that never rejoined does not hold the group back
        assert g.assigned() == {("t", i): mid for i, (mid, _, _) in enumerate(
            next(r for r in results if r.member_id == r.leader).members)}

    asyncio.run(run())


def test_errors_of_bad_input_and_group_keeps_working(node):
    coord = node.coordinator

    async def run():
        results, _ = await form_group(coord, 2)
        gen = results[0].generation_id
        m = results[0].member_id
        bad = await coord.join_group(join_req(ptype="connect"))
        assert bad.error == E.inconsistent_group_protocol
        bad = await coord.join_group(join_req(protocols=[("roundrobin-x", SUB)]))
        assert bad.error == E.inconsistent_group_protocol
        assert (await coord.join_group(join_req(group=""))).error == E.invalid_group_id
        assert (await coord.join_group(join_req(session=1))).error == E.invalid_session_timeout
        assert (await coord.join_group(join_req(member="nobody"))).error == E.unknown_member_id
        stale = await coord.sync_group("g", gen - 1, m, None, None, None, {})
        assert stale.error == E.illegal_generation
        assert coord.heartbeat("g", gen, "nobody", None) == E.unknown_member_id
        assert coord.heartbeat("g", gen + 5, m, None) == E.illegal_generation
        assert coord.heartbeat("nogroup", 1, m, None) == E.unknown_member_id
        errs = coord.commit_offsets("g", gen, m, None, [OffsetCommitEntry("missing", 0, 5),
                                                         OffsetCommitEntry("t", 99, 5),
                                                         OffsetCommitEntry("t", 0, 5)])
        assert errs == {("missing", 0): E.unknown_topic_or_partition,
                        ("t", 99): E.unknown_topic_or_partition, ("t", 0): E.none}
        assert coord.commit_offsets("g", gen + 1, m, None, [OffsetCommitEntry("t", 0, 7)]) == {
            ("t", 0): E.illegal_generation}
        assert coord.commit_offsets("g", gen, "x", None, [OffsetCommitEntry("t", 0, 7)]) == {
            ("t", 0): E.unknown_member_id}
        meta = "m" * 5000
        assert coord.commit_offsets("g", gen, m, None, [OffsetCommitEntry("t", 1, 7, -1, meta)]) \
            == {("t", 1): E.offset_metadata_too_large}
        # still stable, still working
        assert coord.groups["g"].state is GroupState.STABLE
        assert all(coord.heartbeat("g", gen, r.member_id, None) == E.none for r in results)
        err, rows = coord.fetch_offsets("g", [("t", [0, 1])])
        assert err == E.none
        assert [(t, p, v.offset if v else None) for t, p, v in rows] == [("t", 0, 5), ("t", 1, None)]

    asyncio.run(run())


def test_leave_and_session_timeout_trigger_rebalance(node):
    coord = node.coordinator

    async def run():
        results, _ = await form_group(coord, 3)
        gen = results[0].generation_id
        a, b, _c = (r.member_id for r in results)
        top, per = coord.leave_group("g", [(a, None), ("ghost", None)])
        assert top == E.none and per == [(a, None, E.none), ("ghost", None, E.unknown_member_id)]
        g = coord.groups["g"]
        assert g.state is GroupState.PREPARING_REBALANCE
        assert coord.heartbeat("g", gen, b, None) == E.rebalance_in_progress
        # b rejoins; c never does and its session runs out
        task = asyncio.ensure_future(coord.join_group(join_req(member=b)))
        await asyncio.sleep(0)
        coord.sweep(mono_ms() + 60_000)
        r = await task
        assert r.error == E.none and r.generation_id == gen + 1 and r.leader == b
        assert [m for m, _, _ in r.members] == [b]
        assert set(g.members) == {b}

    asyncio.run(run())


def test_static_member_restart_without_rebalance(node):
    coord = node.coordinator

    async def run():
        results = await asyncio.gather(join(coord, instance="i1"), join(coord, instance="i2"))
        gen = results[0].generation_id
        leader = next(r for r in results if r.member_id == r.leader)
        assignments = {mid: encode_assignment({"t": [i]}) for i, (mid, _, _) in
                       enumerate(leader.members)}
        await asyncio.gather(*[coord.sync_group("g", gen, r.member_id, iid, None, None,
                                                assignments if r is leader else {})
                               for r, iid in zip(results, ["i1", "i2"], strict=True)])
        follower = next(r for r in results if r is not leader)
        iid = "i1" if follower is results[0] else "i2"
        # the follower restarts: same instance id, no member id
        again = await coord.join_group(join_req(instance=iid))
        assert again.error == E.none and again.generation_id == gen
        assert again.member_id != follower.member_id
        g = coord.groups["g"]
        assert g.state is GroupState.STABLE and g.generation == gen
        sync = await coord.sync_group("g", gen, again.member_id, iid, None, None, {})
        assert sync.assignment == assignments[follower.member_id]
        # the old incarnation is fenced
        assert coord.heartbeat("g", gen, follower.member_id, iid) == E.fenced_instance_id
        assert coord.heartbeat("g", gen, again.member_id, iid) == E.none

    asyncio.run(run())


def test_offsets_and_groups_survive_reload(tmp_path):
    node = Node(tmp_path, {"t": 6})

    async def run():
        results, _ = await form_group(node.coordinator, 2)
        gen = results[0].generation_id
        errs = node.coordinator.commit_offsets(
            "g", gen, results[0].member_id, None,
            [OffsetCommitEntry("t", 0, 42, 3, "meta"), OffsetCommitEntry("t", 1, 7)])
        assert set(errs.values()) == {E.none}
        assert node.coordinator.commit_offsets("simple", -1, "", None,
                                               [OffsetCommitEntry("t", 2, 9)]) == {
            ("t", 2): E.none}
        assert node.coordinator.delete_groups(["simple"]) == {"simple": E.none}
        assert node.coordinator.commit_offsets("simple2", -1, "", None,
                                               [OffsetCommitEntry("t", 2, 11)]) == {
            ("t", 2): E.none}
        return {r.member_id for r in results}

    members = asyncio.run(run())
    node.close()
    again = Node(tmp_path)
    try:
        coord = again.coordinator
        g = coord.groups["g"]
        assert g.state is GroupState.STABLE and g.generation == 1 and set(g.members) == members
        assert coord.offsets.get("g")[("t", 0)].offset == 42
        assert coord.offsets.get("g")[("t", 0)].leader_epoch == 3
        assert coord.offsets.get("g")[("t", 0)].metadata == "meta"
        assert "simple" not in coord.groups
        assert coord.offsets.get("simple2")[("t", 2)].offset == 11
        assert {row[0] for row in coord.list_groups()} == {"g", "simple2"}
    finally:
        again.close()


def test_delete_group_refused_with_members_and_offset_delete(node):
    coord = node.coordinator

    async def run():
        results, _ = await form_group(coord, 1)
        gen = results[0].generation_id
        coord.commit_offsets("g", gen, results[0].member_id, None, [OffsetCommitEntry("t", 0, 1)])
        assert coord.delete_groups(["g", "none"]) == {"g": E.non_empty_group,
                                                      "none": E.group_id_not_found}
        err, per = coord.delete_offsets("g", [("t", [0])])
        assert err == E.none and per == {("t", 0): E.group_subscribed_to_topic}
        coord.leave_group("g", [(results[0].member_id, None)])
        await asyncio.sleep(0)
        assert coord.groups["g"].state is GroupState.EMPTY
        err, per = coord.delete_offsets("g", [("t", [0])])
        assert per == {("t", 0): E.none} and not coord.offsets.has_offsets("g")
        assert coord.delete_groups(["g"]) == {"g": E.none}
        assert coord.list_groups() == []

    asyncio.run(run())


def test_offsets_expire_once_group_is_empty(tmp_path):
    node = Node(tmp_path, {"t": 6}, offsets_retention_ms=1000)
    coord = node.coordinator
    try:
        coord.commit_offsets("s", -1, "", None, [OffsetCommitEntry("t", 0, 1)])
        c = coord.offsets.get("s")[("t", 0)].commit_timestamp_ms
        assert coord.expire_offsets(c + 500) == 0
        assert coord.expire_offsets(c + 1500) == 1
        assert "s" not in coord.groups
    finally:
        node.close()


def test_lag_and_status(node):
    coord = node.coordinator
    node.produce("t", 0, 10)
    coord.commit_offsets("s", -1, "", None, [OffsetCommitEntry("t", 0, 4)])
    status, rows = coord.group_lag("s")
    [row] = rows
    assert (row.committed, row.log_end_offset, row.lag) == (4, 10, 6)
    assert status.value in ("OK", "WARN", "ERR")
