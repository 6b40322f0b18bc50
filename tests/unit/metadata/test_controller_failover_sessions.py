"""Broker sessions at a controller failover, sans I/O (docs/reliability.md, finding 8).

Reassign seed 38: node 1, the quorum leader, was killed -9; node 3 led an epoch that never
committed (stalled, not dead: its own broker's heartbeats went to it and waited), then node 2
took over. Node 2 dated broker 3's session from its last Fetch answer from node 3, 4.8 s
before, and fenced the live broker 3 225 ms after the takeover; that left dead broker 1 the
last member of five ISRs, and broker 1 came back unclean, so they stayed offline. Now every
session starts at the takeover (Kafka's ClusterControlManager.activate), and a controlled
shutdown never leaves an ISR only to brokers not heard from since then.
"""

from __future__ import annotations

import uuid

from odradek.protocol.errors import ErrorCode
from tests.unit.metadata.cluster_support import Cluster, make_cluster

E = ErrorCode
TIMEOUT_MS = 4000
SESSION = {"broker.session.timeout.ms": str(TIMEOUT_MS)}


def _isrs_and_leaders(c: Cluster) -> list[tuple[tuple[int, ...], int]]:
    return [(c.partition("t", i).isr, c.partition("t", i).leader) for i in (0, 1)]


def test_a_stalled_old_quorum_leader_is_not_fenced_at_the_takeover():
    """On the old code broker 3 was fenced at the first tick ("no heartbeat for 4819 ms"),
    the ISRs went to dead broker 1, and after its unclean return they had no leader."""
    c = make_cluster(SESSION)
    c.start_brokers(1, 2, 3)
    c.create("t", assignments={0: [3, 1], 1: [1, 3]})
    # node 1 (broker 1) dies with the quorum leadership; node 3 leads an epoch that never
    # commits, and our last Fetch answer from it comes 4.8 s before we take over
    c.quorum.set_leader(False)
    c.quorum.leader_contact = (3, c.quorum.leader_epoch, c.clock.now)  # type: ignore[attr-defined]
    c.clock.now += 4_819
    c.quorum.set_leader(True)
    takeover = c.clock.now
    c.controller.tick()
    assert not c.image.brokers[3].fenced
    assert _isrs_and_leaders(c) == [((3, 1), 3), ((1, 3), 1)]
    c.clock.now += 400
    assert not c.heartbeat(3).is_fenced  # its heartbeats find the new controller
    # broker 1, dead, is fenced one session after the takeover; broker 3 keeps the ISRs
    c.clock.now = takeover + TIMEOUT_MS
    c.controller.tick()
    assert c.image.brokers[1].fenced and not c.image.brokers[3].fenced
    assert _isrs_and_leaders(c) == [((3,), 3), ((3,), 3)]
    # broker 1 comes back from its kill -9: unclean, but nothing depended on it
    assert c.register(1, incarnation=uuid.uuid4(), previous_epoch=-1).error_code == E.none
    assert not c.heartbeat(1).is_fenced
    assert _isrs_and_leaders(c) == [((3,), 3), ((3,), 3)]


def test_a_shutdown_waiting_for_an_unheard_broker_goes_on_when_it_heartbeats():
    """The wait costs a live broker nothing: its first heartbeat to the new controller ends
    it, and the shutdown hands it the ISRs as before."""
    c = make_cluster(SESSION)
    c.start_brokers(1, 2, 3)
    c.create("t", assignments={0: [3, 1], 1: [1, 3]})
    c.clock.now += 1_000
    c.quorum.set_leader(True)
    reply = c.heartbeat(3, want_shut_down=True)
    assert not reply.should_shut_down and not c.image.brokers[3].in_controlled_shutdown
    assert _isrs_and_leaders(c) == [((3, 1), 3), ((1, 3), 1)]
    assert not c.heartbeat(1).is_fenced
    c.heartbeat(3, want_shut_down=True)
    assert c.image.brokers[3].in_controlled_shutdown
    assert _isrs_and_leaders(c) == [((1,), 1), ((1,), 1)]
    assert not c.image.brokers[1].fenced


def test_a_shutdown_leaving_a_heard_member_does_not_wait():
    """Only an ISR whose remaining live members are all unheard makes it wait."""
    c = make_cluster(SESSION)
    c.start_brokers(1, 2, 3)
    c.create("t", assignments={0: [3, 1, 2], 1: [1, 3, 2]})
    c.quorum.set_leader(True)
    c.heartbeat(2)  # broker 1 stays unheard
    c.heartbeat(3, want_shut_down=True)
    assert c.image.brokers[3].in_controlled_shutdown
    assert [c.partition("t", i).isr for i in (0, 1)] == [(1, 2), (1, 2)]
