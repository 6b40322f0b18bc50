"""Reassignments, placement over brokers and racks, and features."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from odradek.metadata.controller_features import FINALIZED_AT_BOOTSTRAP
from odradek.metadata.controller_requests import (
    AlterPartitionItem,
    CreatableTopic,
    FeatureUpdate,
    ReassignmentTarget,
)
from odradek.metadata.topic_rules import place_replicas
from odradek.protocol.errors import ErrorCode, KafkaError
from tests.unit.metadata.cluster_support import make_cluster

E = ErrorCode


def expand(c, topic, partition, isr):
    part = c.partition(topic, partition)
    item = AlterPartitionItem(c.image.topics_by_name[topic].topic_id, partition,
                              part.leader_epoch, part.partition_epoch,
                              [(b, c.epochs[b]) for b in isr])
    [r] = c.controller.alter_partition(part.leader, c.epochs[part.leader], [item])
    return r


@pytest.fixture
def c():
    cluster = make_cluster()
    cluster.start_brokers(1, 2, 3, 4)
    cluster.create("t", assignments={0: [1, 2, 3]})
    return cluster


def test_move_a_partition_to_new_brokers(c):
    [r] = c.controller.alter_partition_reassignments([ReassignmentTarget("t", 0, [2, 3, 4])])
    assert r.error_code == E.none
    part = c.partition("t")
    assert part.replicas == (2, 3, 4, 1)
    assert (part.adding_replicas, part.removing_replicas) == ((4,), (1,))
    assert part.leader == 1 and part.isr == (1, 2, 3)
    [ongoing] = c.controller.list_partition_reassignments()
    assert (ongoing.replicas, ongoing.adding_replicas, ongoing.removing_replicas) == (
        [2, 3, 4, 1], [4], [1])
    epoch = part.leader_epoch
    # the leader adds the caught-up replica: that completes the move, and 1 steps down
    r = expand(c, "t", 0, [1, 2, 3, 4])
    assert r.error_code == E.new_leader_elected
    part = c.partition("t")
    assert part.replicas == (2, 3, 4) and part.isr == (2, 3, 4)
    assert part.leader == 2 and part.leader_epoch > epoch
    assert not part.reassigning
    assert c.controller.list_partition_reassignments() == []


def test_removing_only_completes_at_once_and_bumps_the_epoch(c):
    c.controller.elect_leaders(0, [("t", 0)])
    epoch = c.partition("t").leader_epoch
    [r] = c.controller.alter_partition_reassignments([ReassignmentTarget("t", 0, [1, 2])])
    assert r.error_code == E.none
    part = c.partition("t")
    assert (part.replicas, part.isr, part.leader) == ((1, 2), (1, 2), 1)
    assert part.leader_epoch == epoch + 1  # the removed replica must stop fetching


def test_cancel_reverts(c):
    c.controller.alter_partition_reassignments([ReassignmentTarget("t", 0, [2, 3, 4])])
    [r] = c.controller.alter_partition_reassignments([ReassignmentTarget("t", 0, None)])
    assert r.error_code == E.none
    part = c.partition("t")
    # Kafka's revert: the replicas in their current order, without the adding ones
    assert part.replicas == (2, 3, 1) and not part.reassigning and part.leader == 1
    assert part.isr == (1, 2, 3)
    [r] = c.controller.alter_partition_reassignments([ReassignmentTarget("t", 0, None)])
    assert r.error_code == E.no_reassignment_in_progress


def test_bad_targets(c):
    results = c.controller.alter_partition_reassignments([
        ReassignmentTarget("t", 0, []),
        ReassignmentTarget("t", 0, [1, 1]),
        ReassignmentTarget("t", 0, [1, 9]),
        ReassignmentTarget("nope", 0, [1]),
    ])
    assert [r.error_code for r in results] == [
        E.invalid_replica_assignment, E.invalid_request, E.invalid_request,
        E.unknown_topic_or_partition]
    [r] = c.controller.alter_partition_reassignments([ReassignmentTarget("t", 0, [1, 9])])
    assert r.error_code == E.invalid_replica_assignment


def test_list_of_named_partitions_skips_unknown_ones(c):
    c.controller.alter_partition_reassignments([ReassignmentTarget("t", 0, [2, 3, 4])])
    assert [o.topic for o in c.controller.list_partition_reassignments([("t", 0), ("x", 1)])] \
        == ["t"]


# ---------------------------------------------------------------- placement


def test_replication_factor_over_the_active_brokers_is_refused():
    c = make_cluster()
    c.start_brokers(1, 2)
    [r] = c.controller.create_topics([CreatableTopic("t", 1, 3)])
    assert r.error_code == E.invalid_replication_factor
    c.register(3)  # registered but fenced: not counted
    [r] = c.controller.create_topics([CreatableTopic("t", 1, 3)])
    assert r.error_code == E.invalid_replication_factor


def test_default_replication_factor():
    c = make_cluster({"default.replication.factor": "2"})
    c.start_brokers(1, 2, 3)
    [r] = c.controller.create_topics([CreatableTopic("t", 6)])
    assert r.replication_factor == 2
    assert all(len(p.replicas) == 2 for p in c.image.topics_by_name["t"].partitions.values())


def test_leaders_round_robin_over_brokers():
    assignment = place_replicas([1, 2, 3], random.Random(7), 6, 3, 0)
    assert Counter(a[0] for a in assignment) == {1: 2, 2: 2, 3: 2}
    assert all(len(set(a)) == 3 for a in assignment)


def test_rack_aware_placement_spreads_each_partition_over_racks():
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    for seed in range(20):
        assignment = place_replicas(sorted(racks), random.Random(seed), 12, 3, 0, racks)
        for replicas in assignment:
            assert len({racks[b] for b in replicas}) == 3
            assert len(set(replicas)) == 3
        assert Counter(a[0] for a in assignment) == {b: 2 for b in racks}


def test_rack_aware_with_fewer_racks_than_replicas():
    racks = {1: "a", 2: "a", 3: "b"}
    for replicas in place_replicas([1, 2, 3], random.Random(1), 6, 3, 0, racks):
        assert sorted(replicas) == [1, 2, 3]


def test_cluster_placement_uses_racks():
    c = make_cluster()
    c.start_brokers(1, 2, 3, 4, racks={1: "a", 2: "a", 3: "b", 4: "b"})
    t = c.create("t", partitions=8, rf=2)
    for part in t.partitions.values():
        assert {c.image.brokers[b].rack for b in part.replicas} == {"a", "b"}


# ---------------------------------------------------------------- features


def test_bootstrap_finalizes_metadata_and_transaction_versions():
    c = make_cluster()
    assert dict(c.image.features) == FINALIZED_AT_BOOTSTRAP
    assert c.image.features["transaction.version"] == 2
    c.controller.bootstrap()  # nothing more the second time
    assert c.controller.bootstrap_feature_records() == []


def test_update_features():
    c = make_cluster()
    c.start_brokers(1)
    [r] = c.controller.update_features([FeatureUpdate("transaction.version", 1)])
    assert r.error_code == E.invalid_update_version  # a downgrade needs a downgrade type
    [r] = c.controller.update_features([FeatureUpdate("transaction.version", 1, 2)])
    assert r.error_code == E.none and c.image.features["transaction.version"] == 1
    [r] = c.controller.update_features([FeatureUpdate("transaction.version", 2)],
                                       validate_only=True)
    assert r.error_code == E.none and c.image.features["transaction.version"] == 1
    [r] = c.controller.update_features([FeatureUpdate("transaction.version", 3)])
    assert r.error_code == E.invalid_update_version
    [r] = c.controller.update_features([FeatureUpdate("no.such.feature", 1)])
    assert r.error_code == E.invalid_update_version
    [r] = c.controller.update_features([FeatureUpdate("metadata.version", 20, 3)])
    assert r.error_code == E.invalid_update_version
    [r] = c.controller.update_features([FeatureUpdate("transaction.version", 0, 2)])
    assert r.error_code == E.none and "transaction.version" not in c.image.features


def test_update_features_is_bounded_by_what_brokers_support():
    c = make_cluster()
    c.controller.update_features([FeatureUpdate("transaction.version", 0, 2)])
    c.start_brokers(1)
    c.register(2, features=[("metadata.version", 1, 21)])  # no transaction.version at all
    [r] = c.controller.update_features([FeatureUpdate("transaction.version", 2)])
    assert r.error_code == E.invalid_update_version
    assert "Broker 2" in r.error_message


def test_allocate_producer_ids_checks_the_broker_epoch():
    c = make_cluster()
    c.start_brokers(1)
    first, size = c.controller.allocate_producer_ids(1, c.epochs[1])
    assert c.controller.allocate_producer_ids(1, c.epochs[1])[0] == first + size
    with pytest.raises(KafkaError) as err:
        c.controller.allocate_producer_ids(1, c.epochs[1] + 1)
    assert err.value.code == E.stale_broker_epoch


def test_internal_topics_keep_their_factor_in_a_cluster():
    from odradek.metadata.topic_rules import internal_topic_replication_factor as rf
    assert rf(3, 1, single_node=True) == 1
    assert rf(3, 5, single_node=True) == 3
    assert rf(3, 1, single_node=False) == 3  # refused until 3 brokers are active, as Kafka
    c = make_cluster()
    c.start_brokers(1, 2)
    [r] = c.controller.create_topics([CreatableTopic("__consumer_offsets", 50,
                                                     rf(3, 2, single_node=False))])
    assert r.error_code == E.invalid_replication_factor
    c.start_brokers(3)
    [r] = c.controller.create_topics([CreatableTopic("__consumer_offsets", 50,
                                                     rf(3, 3, single_node=False))])
    assert r.error_code == E.none and r.replication_factor == 3
    leaders = Counter(p.leader for p in c.image.topics_by_name["__consumer_offsets"]
                      .partitions.values())
    assert set(leaders) == {1, 2, 3} and max(leaders.values()) - min(leaders.values()) <= 1


def test_removing_an_in_sync_replica_waits_for_the_kept_one_that_is_behind(c):
    """Kafka completes a reassignment only when every target replica is in the ISR. Moving
    [1, 2, 3] to [2, 3] while 2 is out of the ISR must keep 1 (in sync) until 2 is back:
    completing at once left 3 the only in-sync copy, and when 3 came back from an unclean
    shutdown the partition had no leader while 1 had deleted its copy (docs/reliability.md,
    finding 12, reassign seed 80)."""
    c.controller.elect_leaders(0, [("t", 0)])
    assert expand(c, "t", 0, [1, 3]).error_code == E.none  # 2 falls behind
    [r] = c.controller.alter_partition_reassignments([ReassignmentTarget("t", 0, [2, 3])])
    assert r.error_code == E.none
    part = c.partition("t")
    assert part.replicas == (2, 3, 1) and part.removing_replicas == (1,)
    assert part.isr == (1, 3) and part.leader == 1
    [ongoing] = c.controller.list_partition_reassignments()
    assert ongoing.removing_replicas == [1]
    # 2 catches up: now every target replica is in sync, and the move completes
    expand(c, "t", 0, [1, 2, 3])
    part = c.partition("t")
    assert part.replicas == (2, 3) and part.isr == (2, 3)
    assert part.leader in (2, 3) and not part.reassigning
    assert c.controller.list_partition_reassignments() == []
