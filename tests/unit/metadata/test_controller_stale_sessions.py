"""A broker whose session the controller knows expired is fenced before another broker's
request moves ISRs, and a controlled shutdown never leaves an ISR to brokers the controller
has not heard from since it took over; sans I/O (docs/reliability.md, finding 5).

Kill seed 20's order: node 3, leading the quorum and partitions, was killed -9; node 1 took
over as controller and handled its own controlled shutdown before its first tick fenced
broker 3. The shutdown left broker 3, dead but unfenced, as the last ISR member; broker 3 came
back unclean (finding 1's rule: it leaves every ISR) and the partitions stayed offline. Now
broker 1's shutdown waits until broker 3 heartbeats or is fenced (one session after the
takeover: every session starts there, finding 8); broker 3 is fenced, broker 1 stays the last
member, shuts down cleanly and leads again on its return.
"""

from __future__ import annotations

import uuid

from odradek.protocol.errors import ErrorCode
from tests.unit.metadata.cluster_support import Cluster, make_cluster

E = ErrorCode
TIMEOUT_MS = 4000
SESSION = {"broker.session.timeout.ms": str(TIMEOUT_MS)}


def _quorum_leader_dies(c: Cluster, dead: int, election_ms: int) -> None:
    """The quorum leader `dead` is killed; `election_ms` later this controller takes over,
    having last heard of it when it died (the quorum's last Fetch answer from it, which the
    controller no longer uses: every session starts at the takeover)."""
    c.quorum.leader_contact = (dead, c.quorum.leader_epoch, c.clock.now)  # type: ignore[attr-defined]
    c.clock.now += election_ms
    c.quorum.set_leader(True)


def _seed_20(c: Cluster) -> None:
    """Brokers 1, 2, 3; broker 2 stopped cleanly (out of every ISR, fenced), so the ISRs are
    [3, 1] and [1, 3]; broker 3 dies with the quorum leadership and the election is longer
    than its session."""
    c.start_brokers(1, 2, 3)
    c.create("t", assignments={0: [3, 1, 2], 1: [1, 3, 2]})
    assert c.heartbeat(2, want_shut_down=True).should_shut_down  # it leads nothing
    assert [c.partition("t", i).isr for i in (0, 1)] == [(3, 1), (1, 3)]
    _quorum_leader_dies(c, 3, election_ms=12_875)


def test_a_controlled_shutdown_before_the_first_tick_keeps_the_isr_on_the_live_member():
    """On session 10's code broker 1's shutdown left both ISRs as [3] (and 3 leading)."""
    c = make_cluster(SESSION)
    _seed_20(c)
    takeover = c.clock.now
    # the new controller's first request: broker 1's own controlled shutdown, before any
    # tick; broker 3 has not been heard from since the takeover, so the shutdown waits
    for _ in range(3):
        reply = c.heartbeat(1, want_shut_down=True)
        assert not reply.should_shut_down and not reply.is_fenced
        assert not c.image.brokers[1].in_controlled_shutdown
        assert [c.partition("t", i).isr for i in (0, 1)] == [(3, 1), (1, 3)]
        c.clock.now += 100
    # broker 3's session, started at the takeover, runs out: the timer fences it
    c.clock.now = takeover + TIMEOUT_MS
    c.controller.tick()
    assert c.image.brokers[3].fenced
    reply = c.heartbeat(1, want_shut_down=True)
    for i in (0, 1):
        part = c.partition("t", i)
        assert (part.isr, part.leader) == ((1,), -1), part
    assert not reply.should_shut_down and c.image.brokers[1].in_controlled_shutdown
    assert c.heartbeat(1, want_shut_down=True).should_shut_down  # nobody left to catch up
    # broker 3 comes back from its kill -9 (unclean), broker 1 from its clean stop
    assert c.register(3, incarnation=uuid.uuid4(), previous_epoch=-1).error_code == E.none
    assert c.register(1, incarnation=uuid.uuid4(),
                      previous_epoch=c.epochs[1]).error_code == E.none
    assert not c.heartbeat(3).is_fenced
    assert not c.heartbeat(1).is_fenced
    for i in (0, 1):
        part = c.partition("t", i)
        assert (part.isr, part.leader) == ((1,), 1), part


def test_a_shutdown_after_the_session_ran_out_fences_the_dead_member_first():
    """The timer's first run at the takeover starts the sessions; no tick has run since
    broker 3's ran out (a busy controller): broker 1's shutdown heartbeat fences it first,
    and goes on at once."""
    c = make_cluster(SESSION)
    _seed_20(c)
    c.controller.tick()
    c.clock.now += TIMEOUT_MS
    c.heartbeat(1, want_shut_down=True)
    assert c.image.brokers[3].fenced and c.image.brokers[1].in_controlled_shutdown
    for i in (0, 1):
        part = c.partition("t", i)
        assert (part.isr, part.leader) == ((1,), -1), part


def test_the_requesting_broker_is_not_fenced_by_its_own_late_heartbeat():
    """A shutdown heartbeat that arrives after its sender's session ran out, before the tick
    fenced it, is a controlled shutdown (Kafka's touch): only the others are fenced first."""
    c = make_cluster(SESSION)
    c.start_brokers(1, 2)
    c.create("t", assignments={0: [1, 2]})
    c.clock.now += TIMEOUT_MS + 1_000
    reply = c.heartbeat(1, want_shut_down=True)
    assert c.image.brokers[2].fenced
    assert not reply.should_shut_down and not c.image.brokers[1].fenced
    assert c.image.brokers[1].in_controlled_shutdown
    part = c.partition("t")
    assert (part.isr, part.leader) == ((1,), -1)


def test_a_plain_heartbeat_leaves_fencing_to_the_timer():
    """As in Kafka: after a stall, the heartbeats queued behind this one must not find their
    senders fenced; a plain heartbeat moves no ISR, so it fences nobody."""
    c = make_cluster(SESSION)
    c.start_brokers(1, 2)
    c.clock.now += TIMEOUT_MS + 1_000
    c.heartbeat(1)
    assert not c.image.brokers[2].fenced
    c.heartbeat(2)
    c.controller.tick()
    assert not c.image.brokers[2].fenced


def test_a_registration_fences_the_stale_brokers_before_moving_isrs():
    """A new incarnation of broker 1 (clean stop) leaves the ISRs in its registration batch;
    broker 3's session has already run out, so 3 is fenced first and 1 stays the last
    member (on the old code 3 was left as the ISR's only member and its leader)."""
    c = make_cluster(SESSION)
    c.start_brokers(1, 2, 3)
    c.create("t", assignments={0: [1, 3]})
    c.clock.now += TIMEOUT_MS + 1_000  # every session ran out; no tick has run yet
    reply = c.register(1, incarnation=uuid.uuid4(), previous_epoch=c.epochs[1])
    # broker 1's own old session ran out too: its new incarnation is not refused
    assert reply.error_code == E.none
    assert c.image.brokers[3].fenced
    part = c.partition("t")
    assert (part.isr, part.leader) == ((1,), -1)
    assert not c.heartbeat(1).is_fenced
    part = c.partition("t")
    assert (part.isr, part.leader) == ((1,), 1)


def test_a_broker_that_dies_after_its_first_heartbeat_still_takes_the_isr():
    """What the rules do not cover, said plainly (Kafka without eligible leader replicas
    behaves the same): a broker heard from after the takeover that dies within its session
    is taken as alive, so a controlled shutdown meanwhile hands the ISR to it."""
    c = make_cluster(SESSION)
    c.start_brokers(1, 2, 3)
    c.create("t", assignments={0: [1, 3]})
    c.clock.now += 1_000
    c.quorum.set_leader(True)  # a failover: every session starts afresh
    c.heartbeat(3)  # its last heartbeat: it dies now
    c.clock.now += 1_000
    c.heartbeat(1, want_shut_down=True)
    assert not c.image.brokers[3].fenced
    part = c.partition("t")
    assert (part.isr, part.leader) == ((3,), 3)
