"""KIP-966's unclean shutdown rule in the controller, sans I/O (docs/reliability.md, finding 1).

A broker that registers a new incarnation without a clean shutdown of the registered one
(PreviousBrokerEpoch is not that registration's epoch) leaves every ISR and leadership in its
registration batch, before it can be unfenced, even where it is the ISR's last member; it
comes back into an ISR only through the leader's AlterPartition once caught up.
"""

from __future__ import annotations

import uuid

from odradek.metadata.controller_partition_change import (
    RECOVERING,
    partition_change,
)
from odradek.metadata.controller_requests import AlterPartitionItem
from odradek.metadata.image import PartitionImage
from odradek.protocol.errors import ErrorCode
from tests.unit.metadata.cluster_support import Cluster, make_cluster

E = ErrorCode
SESSION = {"broker.session.timeout.ms": "9000"}


def expire(c: Cluster, *dead: int) -> None:
    """Let the sessions of `dead` run out while the others heartbeat, and tick."""
    c.clock.now += 10_000
    for b in c.image.brokers:
        if b not in dead and not c.image.brokers[b].fenced:
            c.heartbeat(b)
    c.controller.tick()


def restart(c: Cluster, broker: int, *, clean: bool) -> None:
    """A new incarnation of `broker` registers (its session expired first) and catches up."""
    previous = c.epochs[broker] if clean else -1
    reply = c.register(broker, incarnation=uuid.uuid4(), previous_epoch=previous)
    assert reply.error_code == E.none, reply


def test_the_two_tails_case_leaves_the_partition_leaderless():
    """Finding 1 in small: ISR [1, 3]; 3 and then 1 come back from unclean shutdowns. On the
    old rule 1 stayed the ISR's last member and led again without what its disk lost."""
    c = make_cluster(SESSION)
    c.start_brokers(1, 2, 3)
    c.create("t", assignments={0: [1, 2, 3]})
    expire(c, 2)
    assert c.partition("t").isr == (1, 3)
    expire(c, 3)
    restart(c, 3, clean=False)
    c.heartbeat(3)
    part = c.partition("t")
    assert part.isr == (1,) and part.leader == 1
    expire(c, 1)
    part = c.partition("t")
    assert part.isr == (1,) and part.leader == -1  # fencing never empties the ISR
    restart(c, 1, clean=False)
    part = c.partition("t")
    assert part.isr == () and part.leader == -1
    c.heartbeat(1)
    assert not c.image.brokers[1].fenced
    c.controller.tick()
    part = c.partition("t")
    assert part.isr == () and part.leader == -1  # offline: unclean election is off
    # an operator's unclean election brings it back, marked as recovering
    [result] = c.controller.elect_leaders(1, [("t", 0)])
    assert result.error_code == E.none
    part = c.partition("t")
    assert part.leader in (1, 3) and part.isr == (part.leader,)
    assert part.leader_recovery_state == RECOVERING


def test_a_clean_restart_of_the_last_member_leads_again():
    c = make_cluster(SESSION)
    c.start_brokers(1, 2)
    c.create("t", assignments={0: [1, 2]})
    expire(c, 2)
    expire(c, 1)
    assert c.partition("t").isr == (1,) and c.partition("t").leader == -1
    restart(c, 1, clean=True)
    assert c.partition("t").isr == (1,)
    c.heartbeat(1)
    part = c.partition("t")
    assert part.leader == 1 and part.isr == (1,)


def test_an_unclean_leader_leaves_isr_and_leadership_before_it_is_unfenced():
    c = make_cluster(SESSION)
    c.start_brokers(1, 2, 3)
    c.create("t", assignments={0: [1, 2, 3]})
    old = c.epochs[1]
    # back within its session: refused until the old registration is fenced
    reply = c.register(1, incarnation=uuid.uuid4(), previous_epoch=-1)
    assert reply.error_code == E.duplicate_broker_registration
    expire(c, 1)
    assert c.partition("t").isr == (2, 3)
    restart(c, 1, clean=False)
    assert c.epochs[1] != old and c.image.brokers[1].fenced
    part = c.partition("t")
    assert part.leader == 2 and part.isr == (2, 3)


def test_an_unclean_follower_rejoins_only_through_the_leaders_alter_partition():
    c = make_cluster(SESSION)
    c.start_brokers(1, 2, 3)
    c.create("t", assignments={0: [1, 2, 3]})
    expire(c, 2)
    restart(c, 2, clean=False)
    c.heartbeat(2)
    assert not c.image.brokers[2].fenced
    part = c.partition("t")
    assert part.isr == (1, 3) and part.leader == 1
    # the leader saw it catch up: ISR expansion with its new broker epoch
    item = AlterPartitionItem(c.image.topics_by_name["t"].topic_id, 0, part.leader_epoch,
                              part.partition_epoch,
                              [(1, c.epochs[1]), (2, c.epochs[2]), (3, c.epochs[3])])
    [result] = c.controller.alter_partition(1, c.epochs[1], [item])
    assert result.error_code == E.none
    assert c.partition("t").isr == (1, 2, 3)


def test_the_only_replica_keeps_its_partition():
    """Nobody can hold more than a single replica: it leads again, as a single node does."""
    c = make_cluster(SESSION)
    c.start_brokers(1, 2)
    c.create("solo", assignments={0: [1]})
    expire(c, 1)
    restart(c, 1, clean=False)
    assert c.partition("solo").isr == (1,)
    c.heartbeat(1)
    assert c.partition("solo").leader == 1


def test_the_same_incarnation_registering_again_is_not_a_restart():
    c = make_cluster(SESSION)
    c.start_brokers(1, 2)
    c.create("t", assignments={0: [1, 2]})
    expire(c, 2)
    expire(c, 1)
    assert c.register(1, previous_epoch=-1).error_code == E.none  # same process, same disk
    c.heartbeat(1)
    assert c.partition("t").leader == 1 and c.partition("t").isr == (1,)


def test_unclean_election_enabled_elects_another_replica_at_once():
    c = make_cluster({**SESSION, "unclean.leader.election.enable": "true"})
    c.start_brokers(1, 2)
    c.create("t", assignments={0: [1, 2]})
    expire(c, 2)
    restart(c, 2, clean=True)
    c.heartbeat(2)  # out of the ISR: [1]
    expire(c, 1)
    # unclean election on: the tick already elected 2 (out of sync) while 1 was away
    part = c.partition("t")
    assert part.leader == 2 and part.isr == (2,) and part.leader_recovery_state == RECOVERING


def _part(isr: tuple[int, ...], leader: int) -> PartitionImage:
    return PartitionImage(partition=0, replicas=(1, 2, 3), isr=isr, leader=leader,
                          leader_epoch=4, partition_epoch=7)


def test_partition_change_empties_the_isr_only_for_unclean_shutdown_replicas():
    tid = uuid.uuid4()
    part = _part((1,), -1)
    kept = partition_change(part, tid, lambda b: b != 1, target_isr=[])
    assert kept.isr == (1,) and kept.record is None
    emptied = partition_change(part, tid, lambda b: b != 1, target_isr=[], unclean_shutdown=[1])
    assert emptied.isr == () and emptied.leader == -1
    assert emptied.record is not None and emptied.record.isr == []
    # another member's unclean shutdown does not let this one empty the ISR
    other = partition_change(part, tid, lambda b: b != 1, target_isr=[], unclean_shutdown=[2])
    assert other.isr == (1,)
    # an empty ISR elects nobody cleanly, and an unclean election marks the leader recovering
    empty = _part((), -1)
    assert partition_change(empty, tid, lambda b: True).leader == -1
    forced = partition_change(empty, tid, lambda b: True, unclean_allowed=True)
    assert forced.leader == 1 and forced.isr == (1,) and forced.unclean
