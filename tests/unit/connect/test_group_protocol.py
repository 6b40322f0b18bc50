"""Issue 19: Connect's group subprotocol (ConnectProtocol v0) bytes and the leader's
assignor, with no process; the decoders fuzzed."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.connect import group_protocol as gp


def test_metadata_bytes_are_kafkas() -> None:
    raw = gp.encode_metadata(gp.WorkerState("http://h:8083", 7))
    # version 0, url as int16-length string, config offset int64
    assert raw == b"\x00\x00" + b"\x00\x0dhttp://h:8083" + struct.pack(">q", 7)
    assert gp.decode_metadata(raw) == gp.WorkerState("http://h:8083", 7)


def test_assignment_bytes_are_kafkas() -> None:
    a = gp.Assignment(0, "m-1", "http://h:1", 12, ("c",), (("c", 0), ("c", 1)))
    raw = gp.encode_assignment(a)
    expected = (b"\x00\x00" + b"\x00\x00" + b"\x00\x03m-1" + b"\x00\x0ahttp://h:1"
                + struct.pack(">q", 12) + struct.pack(">i", 1) + b"\x00\x01c"
                + struct.pack(">i", 3) + struct.pack(">iii", -1, 0, 1))
    assert raw == expected
    assert gp.decode_assignment(raw) == a


def test_a_later_version_is_read_as_v0_and_an_older_refused() -> None:
    raw = gp.encode_metadata(gp.WorkerState("u", 1))
    assert gp.decode_metadata(b"\x00\x01" + raw[2:] + b"extra") == gp.WorkerState("u", 1)
    with pytest.raises(gp.ProtocolError, match="Unsupported subscription version"):
        gp.decode_metadata(b"\xff\xff" + raw[2:])


def test_assign_keeps_a_connector_with_its_tasks_and_spreads_connectors() -> None:
    members = {"b": gp.WorkerState("http://b", 5), "a": gp.WorkerState("http://a", 5)}
    plan = gp.assign("b", members, 5, {"x": 2, "y": 1, "z": 0})
    a, b = plan.assignments["a"], plan.assignments["b"]
    assert a.connectors == ("x", "z") and a.tasks == (("x", 0), ("x", 1))
    assert b.connectors == ("y",) and b.tasks == (("y", 0),)
    assert {a.leader, b.leader} == {"b"} and a.leader_url == "http://b"
    # Every leader computes the same plan from the same inputs.
    assert gp.assign("a", members, 5, {"z": 0, "y": 1, "x": 2}).assignments["a"].connectors \
        == a.connectors


def test_a_leader_behind_a_member_assigns_nothing() -> None:
    members = {"a": gp.WorkerState("http://a", 3), "b": gp.WorkerState("http://b", 9)}
    plan = gp.assign("a", members, 3, {"x": 1})
    assert {m: (x.error, x.config_offset, x.connectors) for m, x in plan.assignments.items()} \
        == {"a": (gp.CONFIG_MISMATCH, 9, ()), "b": (gp.CONFIG_MISMATCH, 9, ())}


names = st.text(max_size=20)


@given(st.builds(gp.Assignment, st.integers(-2, 5), names, names, st.integers(-1, 2**62),
                 st.lists(names, unique=True).map(tuple),
                 st.lists(st.tuples(names, st.integers(0, 2**31 - 1))).map(tuple)))
def test_assignments_round_trip(a: gp.Assignment) -> None:
    back = gp.decode_assignment(gp.encode_assignment(a))
    assert sorted(back.connectors) == sorted(a.connectors)
    assert sorted(back.tasks) == sorted(a.tasks)
    assert (back.error, back.leader, back.leader_url, back.config_offset) == (
        a.error, a.leader, a.leader_url, a.config_offset)


@given(st.binary(max_size=200))
def test_decoders_refuse_garbage_cleanly(raw: bytes) -> None:
    for decode in (gp.decode_metadata, gp.decode_assignment):
        try:
            decode(raw)
        except gp.ProtocolError:
            pass


def test_assign_is_sticky_within_each_members_share() -> None:
    members = {"a": gp.WorkerState("http://a", 1), "b": gp.WorkerState("http://b", 1)}
    plan = gp.assign("a", members, 1, {"x": 1, "y": 1, "z": 1},
                     {"x": "http://b", "y": "http://b", "z": "http://b"})
    # b keeps its share (two of three), the rest goes to the least loaded
    assert plan.assignments["b"].connectors == ("x", "y")
    assert plan.assignments["a"].connectors == ("z",)
    # an owner that is no longer a member (a killed worker) keeps nothing
    alone = gp.assign("a", {"a": members["a"]}, 1, {"x": 1, "y": 0}, {"x": "http://gone"})
    assert alone.assignments["a"].connectors == ("x", "y")
