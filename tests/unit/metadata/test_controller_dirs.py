"""Log directories in the controller (KIP-858): default directories at creation,
AssignReplicasToDirs, a heartbeat's offline directories moving leaderships and ISRs, no
election of a replica whose directory is offline, the records and the Metadata view."""

from __future__ import annotations

import uuid

import pytest

from odradek.broker.handlers.metadata import partition_entries
from odradek.metadata.controller_requests import (
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    CreatableTopic,
)
from odradek.metadata.directories import (
    LOST_DIR,
    MIGRATING_DIR,
    UNASSIGNED_DIR,
    aligned,
    dir_of,
    is_online,
)
from odradek.metadata.image import image_to_records
from odradek.metadata.records import (
    BrokerRegistrationChangeRecord,
    PartitionChangeRecord,
    PartitionRecord,
    decode_record,
    encode_record,
)
from odradek.protocol.errors import ErrorCode, KafkaError
from tests.unit.metadata.cluster_support import CLUSTER_ID, FEATURES, make_cluster

E = ErrorCode
A, B = uuid.UUID(int=1001), uuid.UUID(int=1002)  # broker 1's two directories
C, D = uuid.UUID(int=2001), uuid.UUID(int=3001)  # brokers 2's and 3's only one
DIRS = {1: [A, B], 2: [C], 3: [D]}


def register(c, broker_id: int, dirs: list[uuid.UUID]):
    # the same incarnation again: a restart of a live broker id would be a duplicate
    incarnation = c.incarnations.setdefault(broker_id, uuid.uuid4())
    reply = c.controller.register_broker(BrokerRegistrationRequest(
        broker_id=broker_id, cluster_id=CLUSTER_ID, incarnation_id=incarnation,
        listeners=[("PLAINTEXT", "localhost", 9000 + broker_id, 0)], features=FEATURES,
        log_dirs=dirs))
    assert reply.error_code == E.none
    c.epochs[broker_id] = reply.broker_epoch


def heartbeat(c, broker_id: int, offline: list[uuid.UUID] = ()):  # type: ignore[assignment]
    return c.controller.broker_heartbeat(BrokerHeartbeatRequest(
        broker_id=broker_id, broker_epoch=c.epochs[broker_id],
        current_metadata_offset=c.publisher.offset, offline_log_dirs=list(offline)))


def cluster(props: dict[str, str] | None = None):
    c = make_cluster(props)
    for b, dirs in DIRS.items():
        register(c, b, dirs)
    for b in DIRS:
        assert not heartbeat(c, b).is_fenced
    return c


def create(c, name: str, assignments: dict[int, list[int]], **configs: str):
    [result] = c.controller.create_topics([CreatableTopic(
        name, assignments=assignments, configs=dict(configs))])
    assert result.error_code == E.none, result
    return c.image.topics_by_name[name]


def assign(c, broker_id: int, directory: uuid.UUID, *parts: tuple[uuid.UUID, int]):
    return c.controller.assign_replicas_to_dirs(broker_id, c.epochs[broker_id],
                                                {directory: list(parts)})


def test_a_new_replica_goes_to_the_brokers_only_directory_else_unassigned():
    c = cluster()
    topic = create(c, "t", {0: [1, 2, 3]})
    assert topic.partitions[0].directories == (UNASSIGNED_DIR, C, D)


def test_assign_replicas_to_dirs_records_the_directory_and_answers_per_replica():
    c = cluster()
    t = create(c, "t", {0: [1, 2, 3]})
    u = create(c, "u", {0: [2, 3]})
    before = c.image.partition("t", 0)
    unknown = uuid.uuid4()
    results = assign(c, 1, A, (t.topic_id, 0), (u.topic_id, 0), (t.topic_id, 7),
                     (unknown, 0))
    assert results == {
        (A, t.topic_id, 0): E.none,
        (A, u.topic_id, 0): E.not_leader_or_follower,  # not a replica there
        (A, t.topic_id, 7): E.unknown_topic_or_partition,
        (A, unknown, 0): E.unknown_topic_id}
    after = c.image.partition("t", 0)
    assert after.directories == (A, C, D)
    # only the directory changed: same leader, ISR and leader epoch
    assert (after.leader, after.isr, after.leader_epoch) == (
        before.leader, before.isr, before.leader_epoch)
    offset = c.publisher.offset
    assign(c, 1, A, (t.topic_id, 0))  # the same again: nothing to write
    assert c.publisher.offset == offset
    assign(c, 1, B, (t.topic_id, 0))  # moved (AlterReplicaLogDirs)
    assert c.image.partition("t", 0).directories == (B, C, D)


def test_assign_replicas_to_dirs_with_a_stale_epoch_is_refused_whole():
    c = cluster()
    t = create(c, "t", {0: [1, 2, 3]})
    with pytest.raises(KafkaError) as err:
        c.controller.assign_replicas_to_dirs(1, c.epochs[1] - 1, {A: [(t.topic_id, 0)]})
    assert err.value.code == E.stale_broker_epoch
    assert c.image.partition("t", 0).directories == (UNASSIGNED_DIR, C, D)


def test_an_offline_directory_moves_only_its_replicas_leaderships_and_isrs():
    c = cluster()
    t = create(c, "t", {0: [1, 2, 3], 1: [1, 3, 2], 2: [2, 1, 3]})
    assign(c, 1, A, (t.topic_id, 0), (t.topic_id, 2))
    assign(c, 1, B, (t.topic_id, 1))
    assert [c.image.partition("t", p).leader for p in range(3)] == [1, 1, 2]
    assert not heartbeat(c, 1, offline=[A]).is_fenced  # the broker stays unfenced
    p0, p1, p2 = (c.image.partition("t", p) for p in range(3))
    assert (p0.leader, p0.isr) == (2, (2, 3))  # led from A: moved, 1 left the ISR
    assert (p1.leader, p1.isr) == (1, (1, 3, 2))  # on B: untouched
    assert (p2.leader, p2.isr) == (2, (2, 3))  # followed from A: left the ISR
    assert c.image.brokers[1].log_dirs == (B,)
    assert not c.image.brokers[1].fenced
    # heard again: nothing new to write
    offset = c.publisher.offset
    heartbeat(c, 1, offline=[A])
    assert c.publisher.offset == offset
    # Metadata names the replica in the failed directory offline
    [e0, e1, _] = partition_entries(c.image.topics_by_name["t"], c.image.brokers)
    assert e0["offline_replicas"] == (1,) and e1["offline_replicas"] == ()


def test_a_replica_in_an_offline_directory_is_never_elected_even_unclean():
    c = cluster()
    solo = create(c, "solo", {0: [1]})
    dirty = create(c, "dirty", {0: [1, 2]}, **{"unclean.leader.election.enable": "true"})
    assign(c, 1, A, (solo.topic_id, 0), (dirty.topic_id, 0))
    # broker 2 is fenced: broker 1 is the only in-sync replica of both
    c.controller.broker_heartbeat(BrokerHeartbeatRequest(
        broker_id=2, broker_epoch=c.epochs[2], current_metadata_offset=c.publisher.offset,
        want_fence=True))
    assert c.image.partition("dirty", 0).isr == (1,)
    heartbeat(c, 1, offline=[A])
    for name in ("solo", "dirty"):
        p = c.image.partition(name, 0)
        assert (p.leader, p.isr) == (-1, (1,))  # the ISR is never emptied; no leader
    # nor by ElectLeaders UNCLEAN, nor by the preferred-leader rebalance (1 is preferred and
    # in both ISRs): every election goes through the one leader filter
    [result] = c.controller.elect_leaders(1, [("solo", 0)])
    assert result.error_code == E.eligible_leaders_not_available
    assert [r for r in c.controller.rebalance_changes() if r.leader == 1] == []
    # broker 2's unfencing runs the offline elections: 1 is still not acceptable, the
    # unclean topic takes 2
    assert not heartbeat(c, 2).is_fenced
    assert c.image.partition("solo", 0).leader == -1
    assert c.image.partition("dirty", 0).leader == 2
    # broker 1 comes back with the directory repaired: its registration lists it again
    register(c, 1, [A, B])
    assert not heartbeat(c, 1).is_fenced
    assert c.image.partition("solo", 0).leader == 1


def test_assigning_a_replica_to_an_offline_directory_takes_it_out_of_the_isr():
    c = cluster()
    t = create(c, "t", {0: [1, 2, 3]})
    heartbeat(c, 1, offline=[A])  # nothing was known to be in A yet
    assert c.image.partition("t", 0).leader == 1
    assign(c, 1, A, (t.topic_id, 0))
    p = c.image.partition("t", 0)
    assert p.directories == (A, C, D)
    assert p.leader == 2 and 1 not in p.isr


def test_replica_changes_keep_the_directories_of_kept_replicas():
    c = cluster()
    t = create(c, "t", {0: [1, 2]})
    assign(c, 1, A, (t.topic_id, 0))
    assert c.image.partition("t", 0).directories == (A, C)
    assert aligned((1, 2), (A, C), (2, 3, 1)) == [C, UNASSIGNED_DIR, A]
    assert dir_of((1, 2), (), 1) == UNASSIGNED_DIR


def test_reserved_directories_and_registrations_without_directories():
    assert is_online(UNASSIGNED_DIR, [A]) and is_online(MIGRATING_DIR, [A])
    assert not is_online(LOST_DIR, [A])
    assert is_online(A, []) and is_online(A, [A]) and not is_online(B, [A])


def test_records_and_snapshots_carry_the_directories():
    c = cluster()
    t = create(c, "t", {0: [1, 2, 3]})
    assign(c, 1, B, (t.topic_id, 0))
    heartbeat(c, 1, offline=[A])
    snap = [r for r in image_to_records(c.image) if isinstance(r, PartitionRecord)]
    assert [r.directories for r in snap if r.topic_id == t.topic_id] == [[B, C, D]]
    for record in (PartitionChangeRecord(0, t.topic_id, directories=[A, LOST_DIR]),
                   BrokerRegistrationChangeRecord(1, 5, log_dirs=[B]),
                   PartitionRecord(0, t.topic_id, [1], [1], directories=[A])):
        assert decode_record(encode_record(record)) == record
    # a version-0 change record (before KIP-858) still reads its controlled-shutdown tag
    old = BrokerRegistrationChangeRecord(1, 5, in_controlled_shutdown=1)
    old_bytes = bytearray(encode_record(old))
    old_bytes[2] = 0  # the version byte after frame version and api key
    assert decode_record(bytes(old_bytes)).in_controlled_shutdown == 1
