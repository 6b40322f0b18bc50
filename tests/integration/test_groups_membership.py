"""Members coming and going: leave, kill -9, static restart, spare members, two groups,
at-least-once redelivery."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient

from tests.integration.group_support import (
    SESSION_MS,
    Member,
    confluent_conf,
    disjoint_cover,
    new_topic,
    produce,
    start_node,
    wait_until,
)

# a group member in its own process, printing its assignment and records as JSON lines,
# committing nothing (so a kill -9 leaves its progress uncommitted)
CHILD = r"""
import json, sys
from confluent_kafka import Consumer
conf = json.loads(sys.argv[1])
c = Consumer(conf)
c.subscribe([sys.argv[2]])
last = None
while True:
    m = c.poll(0.1)
    a = sorted(tp.partition for tp in c.assignment())
    if a != last:
        print(json.dumps({"assignment": a}), flush=True)
        last = a
    if m is not None and not m.error():
        print(json.dumps({"record": m.value().decode()}), flush=True)
"""


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    n = start_node(tmp_path_factory.mktemp("groups-membership") / "data")
    yield n
    n.stop()


class Child:
    def __init__(self, conf: dict, topic: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(conf), topic],
                                     stdout=subprocess.PIPE, text=True)
        self.assignment: list[int] = []
        self.records: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            msg = json.loads(line)
            if "assignment" in msg:
                self.assignment = msg["assignment"]
            else:
                self.records.append(msg["record"])

    def read_until(self, cond, timeout: float = 30.0) -> None:
        wait_until(cond, timeout, "the child member")

    def kill9(self) -> None:
        self.proc.kill()
        self.proc.wait()


LONG_SESSION_MS = 120_000


def test_leave_moves_partitions_promptly(node):
    topic = new_topic(node.bootstrap, "m-leave")
    # A session timeout far longer than the wait below: only the LeaveGroup can explain a move.
    conf = confluent_conf(node.bootstrap, topic, **{"session.timeout.ms": LONG_SESSION_MS})
    members = [Member(conf, [topic]).start() for _ in range(3)]
    try:
        wait_until(lambda: all(m.assignment for m in members) and disjoint_cover([m.assignment for m in members], 6))
        leaving = members.pop()
        leaving.stop()  # close() sends LeaveGroup
        wait_until(lambda: disjoint_cover([m.assignment for m in members], 6),
                   timeout=LONG_SESSION_MS / 1000 / 2,
                   what="the others taking over before a session timeout could")
    finally:
        for m in members:
            m.stop()


def test_kill9_member_reassigned_after_session_timeout_and_redelivered(node):
    topic = new_topic(node.bootstrap, "m-kill")
    conf = confluent_conf(node.bootstrap, topic)
    survivor = Member(conf, [topic]).start()
    child = Child(conf, topic)
    try:
        wait_until(lambda: len(survivor.assignment) == 3, what="two members")
        child.read_until(lambda: len(child.assignment) == 3)
        assert disjoint_cover([survivor.assignment, set(child.assignment)], 6)
        produce(node.bootstrap, topic, 300)
        # the child processes its share but commits nothing
        child.read_until(lambda: len(child.records) + survivor.count() >= 300)
        child_records = set(child.records)
        assert child_records
        child.kill9()
        wait_until(lambda: survivor.assignment == set(range(6)), timeout=SESSION_MS / 1000 + 15,
                   what="the survivor taking the dead member's partitions")
        # at least once: what the dead member processed without committing comes again
        wait_until(lambda: child_records <= {v.decode() for _, _, v in survivor.records},
                   what="redelivery of uncommitted records")
    finally:
        child.kill9()
        survivor.stop()


class ClientStats:
    """What a member's librdkafka reports of itself in its statistics (every 100 ms, delivered
    by its poll): the group heartbeats it has sent (Heartbeat, or ConsumerGroupHeartbeat under
    KIP-848) and the rebalances it went through (cgrp.rebalance_cnt).

    A member's heartbeats are the clock a quiet period is measured by: a rebalance reaches a
    member in the answer to its next heartbeat, and a member joining again stops heartbeating
    until it has its new assignment. So once a member has sent a few more heartbeats, any
    rebalance started before them has reached it and been counted."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.heartbeats = 0
        self.rebalances = 0
        self.reports = 0

    def conf(self) -> dict:
        return {"statistics.interval.ms": 100, "stats_cb": self._on_stats}

    def _on_stats(self, text: str) -> None:
        stats = json.loads(text)
        # the requests sent on the group coordinator's connection (`tx`) less those of other
        # types: librdkafka 2.16 lists Heartbeat in `req` but not ConsumerGroupHeartbeat
        coordinator = stats.get("brokers", {}).get("GroupCoordinator", {})
        others = sum(n for name, n in coordinator.get("req", {}).items()
                     if name not in ("Heartbeat", "ConsumerGroupHeartbeat"))
        beats = coordinator.get("tx", 0) - others
        with self._lock:
            self.heartbeats = beats
            self.rebalances = stats.get("cgrp", {}).get("rebalance_cnt", 0)
            self.reports += 1

    def wait_heartbeats(self, count: int, what: str) -> None:
        """Until the member has sent `count` more heartbeats than now."""
        wait_until(lambda: self.reports > 0, what="the member's first statistics")
        start = self.heartbeats
        wait_until(lambda: self.heartbeats >= start + count, timeout=60,
                   what=f"{count} heartbeats of the member ({what})")


# heartbeats of the other member that any rebalance would have reached it within: one to be
# told (REBALANCE_IN_PROGRESS, or a new assignment under KIP-848), the ones after it are sent
# only once the member has joined again
QUIET_HEARTBEATS = 3


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_static_member_restart_without_rebalance(node, protocol):
    topic = new_topic(node.bootstrap, f"m-static-{protocol}")
    extra = {"session_timeout_ms": 20000} if protocol == "classic" else {}
    base = confluent_conf(node.bootstrap, topic, protocol, **extra)
    stats = ClientStats()
    other = Member({**base, "group.instance.id": "other", **stats.conf()}, [topic]).start()
    static = Member({**base, "group.instance.id": "s1"}, [topic]).start()
    try:
        wait_until(lambda: len(other.assignment) == 3 and len(static.assignment) == 3)
        # the group has settled once the other member heartbeats on with its three partitions
        stats.wait_heartbeats(QUIET_HEARTBEATS, "the group settling")
        assigns_before, rebalances_before = other.assigns, stats.rebalances
        mine = set(static.assignment)
        static.stop()  # a static member does not leave on close
        again = Member({**base, "group.instance.id": "s1"}, [topic]).start()
        try:
            wait_until(lambda: again.assignment == mine, what="the static member's old partitions")
            stats.wait_heartbeats(QUIET_HEARTBEATS, "after the static member came back")
            assert other.assigns == assigns_before, "the other member saw a rebalance"
            assert stats.rebalances == rebalances_before, "the other member saw a rebalance"
            assert len(other.assignment) == 3
        finally:
            again.stop()
    finally:
        other.stop()


def test_more_consumers_than_partitions(node):
    topic = new_topic(node.bootstrap, "m-spare", partitions=2)
    conf = confluent_conf(node.bootstrap, topic)
    members = [Child(conf, topic) for _ in range(3)]
    try:
        wait_until(lambda: sorted(len(m.assignment) for m in members) == [0, 1, 1]
                   and disjoint_cover([set(m.assignment) for m in members], 2))
        busy = next(m for m in members if m.assignment)
        spare = next(m for m in members if not m.assignment)
        busy.kill9()
        members.remove(busy)
        wait_until(lambda: spare.assignment and disjoint_cover(
            [set(m.assignment) for m in members], 2), timeout=SESSION_MS / 1000 + 15,
            what="the spare member taking over from the dead one")
    finally:
        for m in members:
            m.kill9()


def test_two_groups_progress_independently(node):
    topic = new_topic(node.bootstrap, "m-two-groups", partitions=3)
    produce(node.bootstrap, topic, 90)
    a = Member(confluent_conf(node.bootstrap, "group-a"), [topic]).start()
    wait_until(lambda: a.count() >= 90, what="group a reading everything")
    a.stop()
    b = Member(confluent_conf(node.bootstrap, "group-b"), [topic]).start()
    wait_until(lambda: b.count() >= 90, what="group b reading everything too")
    b.stop()
    assert sorted(v for _, _, v in a.records) == sorted(v for _, _, v in b.records)
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    produce(node.bootstrap, topic, 30, start=90)
    b2 = Member(confluent_conf(node.bootstrap, "group-b"), [topic]).start()
    wait_until(lambda: b2.count() >= 30)
    b2.stop()
    assert len(b2.records) == 30  # group b resumed from its own commits

    def committed(group: str) -> int:
        res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
        return sum(tp.offset for tp in res.result(30).topic_partitions)

    assert committed("group-a") == 90 and committed("group-b") == 120
