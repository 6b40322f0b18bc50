from __future__ import annotations

import pytest

from odradek.coordinator.group.assignors import range_assign, uniform_assign
from odradek.coordinator.group.coordinator import mono_ms
from odradek.protocol.errors import ErrorCode
from tests.unit.coordinator.support import Node

E = ErrorCode


@pytest.fixture
def node(tmp_path):
    n = Node(tmp_path, {"t": 6}, consumer_session_timeout_ms=1000)
    yield n
    n.close()


def hb(coord, member="", epoch=0, owned=None, topics=("t",), assignor=None, instance=None):
    return coord.consumer_group_heartbeat("g", member, epoch, instance, None, 30_000,
                                          list(topics) if topics is not None else None, assignor,
                                          owned, "client", "/h")


def owned_of(r):
    return {t: set(ps) for t, ps in (r.assignment or {}).items()}


def test_join_gets_everything_then_revokes_before_reassignment(node):
    coord = node.coordinator
    a = hb(coord)
    assert a.error == E.none and a.member_epoch == 1 and a.assignment == {"t": list(range(6))}
    b = hb(coord)
    assert b.error == E.none and b.member_epoch == 2
    # b gets nothing yet: a still owns every partition
    assert b.assignment == {}
    g = coord.groups["g"]
    assert g.state == "reconciling"
    # a is told to give up half, and keeps its epoch until it does
    a2 = hb(coord, a.member_id, 1, owned={"t": set(range(6))}, topics=None)
    assert a2.member_epoch == 1 and len(a2.assignment["t"]) == 3
    a3 = hb(coord, a.member_id, 1, owned=owned_of(a2), topics=None)
    assert a3.member_epoch == 2
    b2 = hb(coord, b.member_id, 2, owned={}, topics=None)
    assert sorted(a3.assignment["t"] + b2.assignment["t"]) == list(range(6))
    assert not set(a3.assignment["t"]) & set(b2.assignment["t"])
    assert g.state == "stable"
    # a member leaves: the other gets everything at the next epoch
    assert hb(coord, b.member_id, -1, topics=None).member_epoch == -1
    a4 = hb(coord, a.member_id, 2, owned=owned_of(a3), topics=None)
    assert a4.member_epoch == 3 and a4.assignment == {"t": list(range(6))}


def test_errors(node):
    coord = node.coordinator
    assert hb(coord, "x", 5).error == E.unknown_member_id
    assert hb(coord, topics=None).error == E.invalid_request
    assert hb(coord, assignor="nope").error == E.unsupported_assignor
    a = hb(coord)
    assert hb(coord, a.member_id, 7, topics=None).error == E.fenced_member_epoch
    errs = coord.commit_offsets("g", 9, a.member_id, None, [])
    assert errs == {}
    from odradek.coordinator.group.coordinator import OffsetCommitEntry
    assert coord.commit_offsets("g", 9, a.member_id, None, [OffsetCommitEntry("t", 0, 1)]) == {
        ("t", 0): E.stale_member_epoch}
    assert coord.commit_offsets("g", 1, a.member_id, None, [OffsetCommitEntry("t", 0, 1)]) == {
        ("t", 0): E.none}


def test_session_timeout_frees_partitions(node):
    coord = node.coordinator
    a = hb(coord)
    b = hb(coord)
    coord.sweep(mono_ms() + 5000)
    assert coord.groups["g"].members == {}
    again = hb(coord, a.member_id, 1, topics=None)
    assert again.error == E.unknown_member_id
    assert b.error == E.none


def test_consumer_group_survives_reload(tmp_path):
    node = Node(tmp_path, {"t": 6})
    a = hb(node.coordinator)
    node.close()
    again = Node(tmp_path)
    try:
        g = again.coordinator.groups["g"]
        assert g.group_epoch == 1 and set(g.members) == {a.member_id}
        assert g.members[a.member_id].assigned == {"t": set(range(6))}
        r = hb(again.coordinator, a.member_id, 1, topics=None)
        assert r.error == E.none and r.member_epoch == 1
    finally:
        again.close()


def test_assignors():
    subs = {"a": {"x", "y"}, "b": {"x", "y"}, "c": {"x"}}
    parts = {"x": 5, "y": 2}
    r = range_assign(subs, parts)
    assert r["a"]["x"] == [0, 1] and r["b"]["x"] == [2, 3] and r["c"]["x"] == [4]
    assert r["a"]["y"] == [0] and r["b"]["y"] == [1]
    u = uniform_assign(subs, parts)
    got = sorted((t, p) for m in u.values() for t, ps in m.items() for p in ps)
    assert got == [("x", p) for p in range(5)] + [("y", 0), ("y", 1)]
    sizes = sorted(sum(len(ps) for ps in m.values()) for m in u.values())
    assert sizes[-1] - sizes[0] <= 1
    # sticky: a new member takes only what it must
    before = uniform_assign({"a": {"x"}, "b": {"x"}}, {"x": 6})
    after = uniform_assign({"a": {"x"}, "b": {"x"}, "c": {"x"}}, {"x": 6}, before)
    moved = sum(1 for m in ("a", "b") for p in before[m]["x"] if p not in after[m].get("x", []))
    assert moved == 2 and len(after["c"]["x"]) == 2


def test_static_member_rejoins_with_its_partitions(node):
    coord = node.coordinator
    a = hb(coord, instance="s1")
    b = hb(coord, instance="s2")
    a2 = hb(coord, a.member_id, 1, owned={"t": set(range(6))}, topics=None, instance="s1")
    a3 = hb(coord, a.member_id, 1, owned=owned_of(a2), topics=None, instance="s1")
    b2 = hb(coord, b.member_id, 2, owned={}, topics=None, instance="s2")
    epoch = coord.groups["g"].group_epoch
    mine = owned_of(a3)
    assert hb(coord, a.member_id, -2, topics=None, instance="s1").member_epoch == -2
    # while the old incarnation holds its place, a second one with the id is refused ...
    assert hb(coord, instance="s2").error == E.unreleased_instance_id
    # ... and the restarted s1 takes over its partitions without a new group epoch
    again = hb(coord, instance="s1")
    assert again.error == E.none and again.member_id != a.member_id
    assert owned_of(again) == mine and coord.groups["g"].group_epoch == epoch
    assert b2.error == E.none
    # a static member that never comes back is dropped after the session timeout
    assert hb(coord, b.member_id, -2, topics=None, instance="s2").error == E.none
    coord.sweep(mono_ms() + 5000)
    assert set(coord.groups["g"].members) == set()


def test_regex_subscription(tmp_path):
    node = Node(tmp_path, {"orders-eu": 2, "orders-us": 2, "clicks": 2})
    try:
        r = node.coordinator.consumer_group_heartbeat(
            "g", "", 0, None, None, 30_000, None, None, None, "c", "/h", "orders-.*")
        assert r.error == E.none and r.assignment == {"orders-eu": [0, 1], "orders-us": [0, 1]}
        bad = node.coordinator.consumer_group_heartbeat(
            "g2", "", 0, None, None, 30_000, None, None, None, "c", "/h", "(")
        assert bad.error == E.invalid_regular_expression
    finally:
        node.close()


def test_group_configs_override_session_and_heartbeat(node):
    # consumer.session.timeout.ms / consumer.heartbeat.interval.ms set on the GROUP resource
    # replace the broker's values for that group only
    coord = node.coordinator
    overrides = {"g": {"consumer.session.timeout.ms": "50000",
                       "consumer.heartbeat.interval.ms": "7000"}}
    coord.group_overrides = lambda group_id: overrides.get(group_id, {})
    a = hb(coord)
    assert a.heartbeat_interval_ms == 7000
    member = coord.groups["g"].members[a.member_id]
    assert member.deadline_ms - mono_ms() > 45_000  # the broker's 1000 would be far below
    coord.sweep(mono_ms() + 5000)
    assert a.member_id in coord.groups["g"].members
    coord.sweep(mono_ms() + 51_000)
    assert a.member_id not in coord.groups["g"].members
    other = coord.consumer_group_heartbeat("h", "", 0, None, None, 30_000, ["t"], None, None,
                                           "client", "/h")
    assert other.heartbeat_interval_ms == node.coordinator.config.consumer_heartbeat_interval_ms
