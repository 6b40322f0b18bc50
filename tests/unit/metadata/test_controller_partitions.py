"""AlterPartition, ElectLeaders, unclean elections and the preferred-leader rebalance."""

from __future__ import annotations

import logging
import uuid

import pytest

from odradek.metadata.controller_requests import AlterPartitionItem, IncrementalAlterConfigsResource
from odradek.metadata.records import RESOURCE_TOPIC
from odradek.protocol.errors import ErrorCode, KafkaError
from tests.unit.metadata.cluster_support import make_cluster

E = ErrorCode


def alter(c, broker, topic="t", partition=0, isr=None, *, leader_epoch=None,
          partition_epoch=None, epochs=True, version=3, recovery=0, topic_id=None):
    part = c.partition(topic, partition)
    tid = c.image.topics_by_name[topic].topic_id if topic_id is None else topic_id
    item = AlterPartitionItem(
        topic_id=tid, partition=partition,
        leader_epoch=part.leader_epoch if leader_epoch is None else leader_epoch,
        partition_epoch=part.partition_epoch if partition_epoch is None else partition_epoch,
        new_isr=[(b, c.epochs.get(b, -1) if epochs else -1) for b in isr],
        leader_recovery_state=recovery)
    [result] = c.controller.alter_partition(broker, c.epochs[broker], [item], version)
    return result


@pytest.fixture
def c():
    cluster = make_cluster()
    cluster.start_brokers(1, 2, 3)
    cluster.create("t", assignments={0: [1, 2, 3]})
    return cluster


def test_shrink_and_expand_the_isr(c):
    r = alter(c, 1, isr=[1, 2])
    assert r.error_code == E.none
    assert (r.leader_id, r.isr, r.partition_epoch, r.leader_epoch) == (1, [1, 2], 1, 0)
    part = c.partition("t")
    assert part.isr == (1, 2) and part.leader_epoch == 0  # a shrink keeps the leader epoch
    r = alter(c, 1, isr=[1, 2, 3])
    assert r.error_code == E.none and c.partition("t").isr == (1, 2, 3)


def test_an_isr_below_min_insync_is_allowed(c):
    assert alter(c, 1, isr=[1]).error_code == E.none
    assert c.partition("t").isr == (1,)


def test_stale_leader_epoch_is_fenced(c):
    assert alter(c, 1, isr=[1, 2], leader_epoch=-1).error_code == E.fenced_leader_epoch


def test_newer_leader_epoch_means_not_controller(c):
    assert alter(c, 1, isr=[1, 2], leader_epoch=5).error_code == E.not_controller


def test_stale_partition_epoch(c):
    assert alter(c, 1, isr=[1, 2]).error_code == E.none
    assert alter(c, 1, isr=[1], partition_epoch=0).error_code == E.invalid_update_version


def test_only_the_leader_may_alter(c):
    assert alter(c, 2, isr=[1, 2]).error_code == E.invalid_request


def test_the_isr_must_hold_the_leader_and_only_replicas(c):
    assert alter(c, 1, isr=[2, 3]).error_code == E.invalid_request
    c.start_brokers(4)
    assert alter(c, 1, isr=[1, 4]).error_code == E.invalid_request


def test_fenced_or_shutting_down_members_are_ineligible(c):
    alter(c, 1, isr=[1, 2])
    c.heartbeat(3, want_fence=True)
    assert alter(c, 1, isr=[1, 2, 3]).error_code == E.ineligible_replica
    assert alter(c, 1, isr=[1, 2, 3], version=0).error_code == E.operation_not_attempted


def test_a_stale_broker_epoch_in_the_isr_is_ineligible(c):
    alter(c, 1, isr=[1, 2])
    part = c.partition("t")
    item = AlterPartitionItem(c.image.topics_by_name["t"].topic_id, 0, part.leader_epoch,
                              part.partition_epoch, [(1, c.epochs[1]), (2, c.epochs[2]), (3, 0)])
    [r] = c.controller.alter_partition(1, c.epochs[1], [item])
    assert r.error_code == E.ineligible_replica


def test_request_level_stale_broker_epoch(c):
    with pytest.raises(KafkaError) as err:
        c.controller.alter_partition(1, c.epochs[1] - 1, [])
    assert err.value.code == E.stale_broker_epoch


def test_unknown_topic_id_and_partition(c):
    assert alter(c, 1, isr=[1], topic_id=uuid.uuid4()).error_code == E.unknown_topic_id
    item = AlterPartitionItem(c.image.topics_by_name["t"].topic_id, 9, 0, 0, [(1, -1)])
    [r] = c.controller.alter_partition(1, c.epochs[1], [item])
    assert r.error_code == E.unknown_topic_or_partition


def test_preferred_election(c):
    c.heartbeat(1, want_fence=True)
    assert c.partition("t").leader == 2
    c.heartbeat(1)  # unfenced, but out of the ISR
    [r] = c.controller.elect_leaders(0, [("t", 0)])
    assert r.error_code == E.preferred_leader_not_available
    alter(c, 2, isr=[2, 3, 1])
    [r] = c.controller.elect_leaders(0, [("t", 0)])
    assert r.error_code == E.none and c.partition("t").leader == 1
    [r] = c.controller.elect_leaders(0, [("t", 0)])
    assert r.error_code == E.election_not_needed
    [r] = c.controller.elect_leaders(0, [("nope", 0)])
    assert r.error_code == E.unknown_topic_or_partition
    assert c.controller.elect_leaders(0, None) == []  # all: only what needed an election


def offline(c):
    """Partition t-0 with ISR [1], 1 fenced, 2 and 3 alive and out of sync."""
    alter(c, 1, isr=[1])
    c.heartbeat(1, want_fence=True)
    part = c.partition("t")
    assert (part.leader, part.isr) == (-1, (1,))


def test_unclean_election_on_request(c, caplog):
    offline(c)
    [r] = c.controller.elect_leaders(0, [("t", 0)])
    assert r.error_code == E.preferred_leader_not_available
    with caplog.at_level(logging.WARNING):
        [r] = c.controller.elect_leaders(1, [("t", 0)])
    assert r.error_code == E.none
    part = c.partition("t")
    assert (part.leader, part.isr, part.leader_recovery_state) == (2, (2,), 1)
    assert "may be lost" in caplog.text
    [r] = c.controller.elect_leaders(1, [("t", 0)])
    assert r.error_code == E.election_not_needed


def test_unclean_election_with_no_live_replica(c):
    offline(c)
    c.heartbeat(2, want_fence=True)
    c.heartbeat(3, want_fence=True)
    [r] = c.controller.elect_leaders(1, [("t", 0)])
    assert r.error_code == E.eligible_leaders_not_available


def test_offline_stays_offline_until_unclean_is_enabled(c, caplog):
    offline(c)
    c.controller.tick()
    assert c.partition("t").leader == -1
    c.controller.incremental_alter_configs([IncrementalAlterConfigsResource(
        RESOURCE_TOPIC, "t", [("unclean.leader.election.enable", 0, "true")])])
    with caplog.at_level(logging.WARNING):
        c.controller.tick()
    part = c.partition("t")
    assert part.leader == 2 and part.isr == (2,) and part.leader_recovery_state == 1
    assert "unclean leader election" in caplog.text
    # the new leader says it recovered
    r = alter(c, 2, isr=[2], recovery=0)
    assert r.error_code == E.none and c.partition("t").leader_recovery_state == 0


def test_unclean_election_from_the_broker_config():
    c = make_cluster({"unclean.leader.election.enable": "true"})
    c.start_brokers(1, 2)
    c.create("t", assignments={0: [1, 2]})
    alter(c, 1, isr=[1])
    c.heartbeat(1, want_fence=True)
    assert c.partition("t").leader == 2  # at once, in the fencing change


def test_alter_partition_recovering_with_more_than_one_member_is_invalid(c):
    offline(c)
    c.controller.elect_leaders(1, [("t", 0)])
    assert alter(c, 2, isr=[2, 3], recovery=1).error_code == E.invalid_request


def test_auto_leader_rebalance():
    c = make_cluster({"leader.imbalance.check.interval.seconds": "1"})
    c.start_brokers(1, 2, 3)
    c.create("t", assignments={0: [1, 2, 3], 1: [1, 3, 2]})
    c.heartbeat(1, want_fence=True)
    c.heartbeat(1)
    for p in (0, 1):
        alter(c, c.partition("t", p).leader, partition=p, isr=[1, 2, 3])
    assert c.partition("t", 0).leader != 1
    c.controller.tick()  # arms the timer
    c.clock.now += 1000
    c.controller.tick()
    assert c.partition("t", 0).leader == 1 and c.partition("t", 1).leader == 1


def test_no_rebalance_when_disabled():
    c = make_cluster({"leader.imbalance.check.interval.seconds": "1",
                      "auto.leader.rebalance.enable": "false"})
    c.start_brokers(1, 2)
    c.create("t", assignments={0: [1, 2]})
    c.heartbeat(1, want_fence=True)
    c.heartbeat(1)
    alter(c, 2, isr=[2, 1])
    c.controller.tick()
    c.clock.now += 5000
    c.controller.tick()
    assert c.partition("t").leader == 2
