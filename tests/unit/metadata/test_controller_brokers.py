"""Registration, heartbeats, fencing and controlled shutdown against the in-memory quorum."""

from __future__ import annotations

import uuid

import pytest

from odradek.metadata.records import RegisterBrokerRecord
from odradek.protocol.errors import ErrorCode, KafkaError
from tests.unit.metadata.cluster_support import make_cluster

E = ErrorCode


def test_registration_epoch_is_the_record_offset_and_starts_fenced():
    c = make_cluster()
    end = c.quorum.end_offset
    reply = c.register(1, rack="r1")
    assert reply.error_code == E.none
    assert reply.broker_epoch == end
    [offset] = [o for o, r in c.quorum.log if isinstance(r, RegisterBrokerRecord)]
    assert offset == reply.broker_epoch
    reg = c.image.brokers[1]
    assert reg.fenced and reg.rack == "r1" and reg.epoch == end
    assert reg.endpoints[0].port == 9001


def test_unfenced_only_once_caught_up_with_its_registration():
    c = make_cluster()
    epoch = c.register(1).broker_epoch
    behind = c.heartbeat(1, offset=epoch - 1)
    assert (behind.is_caught_up, behind.is_fenced) == (False, True)
    assert c.image.brokers[1].fenced
    caught = c.heartbeat(1, offset=epoch)
    assert (caught.is_caught_up, caught.is_fenced, caught.should_shut_down) == (True, False, False)
    assert not c.image.brokers[1].fenced


def test_inconsistent_cluster_id():
    c = make_cluster()
    reply = c.register(1, cluster_id="another-cluster")
    assert reply.error_code == E.inconsistent_cluster_id
    assert 1 not in c.image.brokers


def test_duplicate_registration_of_a_live_broker_with_another_incarnation():
    c = make_cluster()
    c.start_brokers(1)
    first = c.incarnations[1]
    assert c.register(1, incarnation=uuid.uuid4()).error_code == E.duplicate_broker_registration
    assert c.image.brokers[1].incarnation_id == first
    # the same incarnation may register again (a retried request)
    assert c.register(1, incarnation=first).error_code == E.none
    # once its session expired, a new incarnation may take the id
    c.start_brokers(2)
    c.clock.now += 10_000
    c.heartbeat(2)
    c.controller.tick()
    assert c.image.brokers[1].fenced
    assert c.register(1, incarnation=uuid.uuid4()).error_code == E.none


def test_unsupported_finalized_feature_refuses_registration():
    c = make_cluster()
    reply = c.register(1, features=[("metadata.version", 1, 21)])  # no transaction.version 2
    assert reply.error_code == E.unsupported_version
    assert "transaction.version" in reply.error_message


def test_stale_epoch_and_unknown_broker_heartbeats():
    c = make_cluster()
    c.start_brokers(1)
    assert c.heartbeat(1, epoch=c.epochs[1] - 1).error_code == E.stale_broker_epoch
    c.epochs[7] = 3
    assert c.heartbeat(7).error_code == E.broker_id_not_registered


def test_session_timeout_fences_and_moves_leadership():
    c = make_cluster({"broker.session.timeout.ms": "9000"})
    c.start_brokers(1, 2, 3)
    c.create("t", partitions=1, assignments={0: [1, 2, 3]})
    assert c.partition("t").leader == 1
    c.clock.now += 5000
    c.heartbeat(2)
    c.heartbeat(3)
    c.controller.tick()
    assert not c.image.brokers[1].fenced  # 5 s < 9 s
    c.clock.now += 4500
    c.heartbeat(2)
    c.heartbeat(3)
    c.controller.tick()
    assert c.image.brokers[1].fenced
    part = c.partition("t")
    assert part.leader == 2 and part.isr == (2, 3) and part.leader_epoch == 1


def test_fencing_the_last_isr_member_keeps_it_and_leaves_no_leader():
    c = make_cluster()
    c.start_brokers(1, 2)
    c.create("t", assignments={0: [1, 2]})
    c.clock.now += 10_000
    c.heartbeat(1)
    c.controller.tick()  # 2 fenced
    assert c.partition("t").isr == (1,)
    c.clock.now += 10_000
    c.controller.tick()  # 1 fenced too
    part = c.partition("t")
    assert part.isr == (1,) and part.leader == -1
    # 2 comes back: not in the ISR, so no clean leader
    c.register(2)
    c.heartbeat(2)
    assert c.partition("t").leader == -1
    # 1 comes back: it is the ISR, so it leads again
    c.register(1)
    c.heartbeat(1)
    part = c.partition("t")
    assert part.leader == 1 and part.isr == (1,)


def test_failover_gives_every_broker_a_fresh_session():
    c = make_cluster()
    c.start_brokers(1)
    c.clock.now += 60_000
    c.quorum.set_leader(True)  # a new term
    c.controller.tick()
    assert not c.image.brokers[1].fenced
    c.clock.now += 9_000
    c.controller.tick()
    assert c.image.brokers[1].fenced


def test_the_node_that_led_the_quorum_gets_a_fresh_session_too():
    """Kafka's rule (ClusterControlManager.activate touches every broker): the old quorum
    leader's broker starts its session at the takeover, whatever the quorum last heard of
    it; dead, it is fenced one full session later (docs/reliability.md, finding 8)."""
    c = make_cluster()
    c.start_brokers(1, 2, 3)
    c.create("t", partitions=1, assignments={0: [1, 2, 3]})
    last_heard = c.clock.now
    c.quorum.leader_contact = (1, c.quorum.leader_epoch, last_heard)  # type: ignore[attr-defined]
    c.clock.now += 8_000  # the election
    c.quorum.set_leader(True)
    takeover = c.clock.now
    c.controller.tick()
    c.clock.now = takeover + 8_999
    c.heartbeat(2)
    c.heartbeat(3)
    c.controller.tick()
    assert not any(c.image.brokers[b].fenced for b in (1, 2, 3))
    c.clock.now = takeover + 9_000
    c.controller.tick()
    assert c.image.brokers[1].fenced and c.partition("t").leader != 1
    assert not c.image.brokers[2].fenced and not c.image.brokers[3].fenced


def test_controlled_shutdown_moves_leaders_then_says_shut_down():
    c = make_cluster()
    c.start_brokers(1, 2, 3)
    c.create("t", assignments={0: [1, 2, 3], 1: [2, 1, 3]})
    c.create("solo", assignments={0: [1]})
    reply = c.heartbeat(1, want_shut_down=True)
    assert not reply.should_shut_down and not reply.is_fenced
    assert c.image.brokers[1].in_controlled_shutdown
    assert c.partition("t", 0).leader == 2 and c.partition("t", 0).isr == (2, 3)
    assert c.partition("t", 1).isr == (2, 3)
    solo = c.partition("solo")
    assert (solo.leader, solo.isr) == (-1, (1,))
    # the others have not yet seen the change
    reply = c.heartbeat(1, want_shut_down=True)
    assert not reply.should_shut_down
    c.heartbeat(2)
    c.heartbeat(3)
    reply = c.heartbeat(1, want_shut_down=True)
    assert reply.should_shut_down and reply.is_fenced
    assert c.image.brokers[1].fenced


def test_shutdown_of_a_broker_leading_nothing_is_at_once():
    c = make_cluster()
    c.start_brokers(1, 2)
    c.create("t", assignments={0: [1, 2]})
    reply = c.heartbeat(2, want_shut_down=True)
    assert reply.should_shut_down
    assert c.partition("t").isr == (1,)


def test_controlled_shutdown_of_the_only_broker():
    c = make_cluster()
    c.start_brokers(1)
    c.create("t", rf=1)
    assert not c.heartbeat(1, want_shut_down=True).should_shut_down
    assert c.heartbeat(1, want_shut_down=True).should_shut_down


def test_want_fence():
    c = make_cluster()
    c.start_brokers(1, 2)
    c.create("t", assignments={0: [1, 2]})
    assert c.heartbeat(1, want_fence=True).is_fenced
    assert c.partition("t").leader == 2


def test_reregistration_of_a_live_broker_moves_its_leadership():
    c = make_cluster()
    c.start_brokers(1, 2)
    c.create("t", assignments={0: [1, 2]})
    c.clock.now += 10_000
    c.heartbeat(2)
    c.controller.tick()
    c.heartbeat(2)
    # 1 is fenced by now; a new incarnation registers
    assert c.register(1, incarnation=uuid.uuid4()).error_code == E.none
    assert c.partition("t").leader == 2


def test_unregister_broker():
    c = make_cluster()
    c.start_brokers(1, 2)
    c.create("t", assignments={0: [1, 2]})
    c.controller.unregister_broker(1)
    assert 1 not in c.image.brokers
    assert c.partition("t").leader == 2 and c.partition("t").isr == (2,)
    with pytest.raises(KafkaError) as err:
        c.controller.unregister_broker(1)
    assert err.value.code == E.broker_id_not_registered


def test_only_the_active_controller_writes():
    c = make_cluster()
    c.quorum.set_leader(False)
    with pytest.raises(KafkaError) as err:
        c.register(1)
    assert err.value.code == E.not_controller
    c.controller.tick()  # a standby's timer does nothing


def test_local_registration_unfences_at_once_and_keeps_leaders():
    c = make_cluster(node_id=1)
    epoch = c.controller.register_broker()
    assert isinstance(epoch, int)
    assert not c.image.brokers[1].fenced
    c.create("t", rf=1)
    before = c.partition("t")
    c.controller.register_broker()  # a restart
    after = c.partition("t")
    assert (after.leader, after.leader_epoch) == (before.leader, before.leader_epoch)


def test_a_just_elected_controller_waits_until_its_publisher_caught_up():
    import threading

    c = make_cluster(node_id=100)

    class Electing(type(c.quorum)):
        ready = False

        @property
        def is_leader(self) -> bool:
            return self.ready

        @property
        def leader_id(self) -> int:
            return 100  # elected, not yet caught up

    c.quorum.__class__ = Electing
    timer = threading.Timer(0.05, lambda: setattr(c.quorum, "ready", True))
    timer.start()
    assert c.register(1).error_code == E.none  # waited for the flip, did not refuse
    timer.join()


def test_a_follower_refuses_at_once():
    c = make_cluster()
    c.quorum.set_leader(False)  # another node leads
    with pytest.raises(KafkaError) as err:
        c.controller.bootstrap()
    assert err.value.code == E.not_controller
