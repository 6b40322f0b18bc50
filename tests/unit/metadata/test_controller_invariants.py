"""Random runs of broker churn, ISR changes, elections and reassignments against the
controller; after every step the partition invariants hold (seeded, so a failure replays)."""

from __future__ import annotations

import random

import pytest

from odradek.metadata.controller_requests import AlterPartitionItem, ReassignmentTarget
from odradek.protocol.errors import ErrorCode
from tests.unit.metadata.cluster_support import make_cluster

BROKERS = (1, 2, 3, 4, 5)


def check(c, before):
    image = c.image
    for topic in image.topics_by_id.values():
        for part in topic.partitions.values():
            key = (topic.name, part.partition)
            # never empty, but where its last member came back from an unclean shutdown
            # (KIP-966): then nobody leads until an unclean election
            assert part.isr or part.leader == -1, key
            assert set(part.isr) <= set(part.replicas), key
            assert len(set(part.replicas)) == len(part.replicas), key
            if part.leader != -1:
                assert part.leader in part.isr, key
                reg = image.brokers.get(part.leader)
                assert reg is not None and reg.active, key  # unfenced, not shutting down
            assert set(part.adding_replicas) <= set(part.replicas), key
            assert set(part.removing_replicas) <= set(part.replicas), key
            old = before.get(key)
            if old is not None:
                assert part.leader_epoch >= old.leader_epoch, key
                assert part.partition_epoch >= old.partition_epoch, key
                if part.leader != old.leader:
                    assert part.leader_epoch > old.leader_epoch, key
            before[key] = part


def step(c, rng):
    image = c.image
    op = rng.randrange(8)
    b = rng.choice(BROKERS)
    registered = b in image.brokers
    if op == 0:  # a broker stops heartbeating: time passes for it alone
        c.clock.now += 10_000
        for other in BROKERS:
            if other != b and other in c.epochs and other in image.brokers:
                c.heartbeat(other)
        c.controller.tick()
    elif op == 1:  # (re)start of a broker, after a clean or an unclean shutdown
        import uuid
        previous = c.epochs.get(b, -1) if rng.random() < 0.5 else -1
        if c.register(b, incarnation=uuid.uuid4(),
                      previous_epoch=previous).error_code == ErrorCode.none:
            c.heartbeat(b)
    elif op == 2 and registered:
        c.heartbeat(b, want_shut_down=rng.random() < 0.5, want_fence=rng.random() < 0.2)
    elif op == 3:  # a leader changes its ISR
        topic = rng.choice(list(image.topics_by_id.values()))
        part = rng.choice(list(topic.partitions.values()))
        if part.leader == -1 or part.leader not in c.epochs:
            return
        others = [r for r in part.replicas if r != part.leader and rng.random() < 0.6]
        item = AlterPartitionItem(topic.topic_id, part.partition, part.leader_epoch,
                                  part.partition_epoch,
                                  [(part.leader, -1)] + [(r, -1) for r in others])
        try:
            c.controller.alter_partition(part.leader, c.epochs[part.leader], [item])
        except Exception as exc:  # a stale broker epoch: the leader re-registered
            assert getattr(exc, "code", None) in (ErrorCode.stale_broker_epoch,
                                                   ErrorCode.broker_id_not_registered)
    elif op == 4:
        c.controller.elect_leaders(rng.randrange(2), None)
    elif op == 5:
        topic = rng.choice(list(image.topics_by_id.values()))
        p = rng.choice(list(topic.partitions))
        target = None if rng.random() < 0.3 else rng.sample(BROKERS, rng.randrange(1, 4))
        c.controller.alter_partition_reassignments([ReassignmentTarget(topic.name, p, target)])
    elif op == 6:
        c.controller.tick()
    else:  # a controller failover: every session starts afresh, nobody heard from yet
        c.quorum.set_leader(True)


@pytest.mark.parametrize("seed", range(40))
def test_partition_invariants_hold(seed):
    rng = random.Random(seed)
    props = {"unclean.leader.election.enable": "true"} if seed % 4 == 0 else {}
    c = make_cluster(props)
    c.start_brokers(*BROKERS)
    c.create("a", partitions=4, rf=3)
    c.create("b", partitions=2, rf=2)
    before = {}
    check(c, before)
    for _ in range(150):
        step(c, rng)
        check(c, before)
