"""Issue 14: transactions whose partitions are led by other nodes than their coordinator
(WriteTxnMarkers, API 27), on a real 3-node cluster.

The consume-transform-produce loop reads `mk-in` and writes `mk-out`, 3 partitions each,
with partition i led by a different node, so every transaction's markers go to all three
nodes, and its transactional id's `__transaction_state` partition and its group's
`__consumer_offsets` partition are led by two different nodes. Some transactions are
aborted on purpose. read_committed then sees every input transformed exactly once and no
record of an aborted transaction. The second run kills -9 the node leading the
transactional id's `__transaction_state` partition with a transaction open: its successor
loads the transaction and completes or aborts it as Kafka does (a PrepareCommit is resent,
an Ongoing one times out or is fenced by the next InitProducerId), nothing lost or doubled.
The bad-input test sends WriteTxnMarkers by hand: a partition the node does not lead, a
stale coordinator epoch and a stale producer epoch each get Kafka's error, and the nodes
stay up. One cluster for the module.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.broker.admin_calls import call
from odradek.coordinator.offsets_topic import partition_for
from odradek.protocol.errors import ErrorCode
from tests.system.cluster_support import Cluster, running_cluster, wait_until

INTERNAL_PARTITIONS = 6
PARTITIONS = 3
RECORDS = 240
WRITE_TXN_MARKERS, DESCRIBE_PRODUCERS = 27, 61


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    internal = {"offsets.topic.num.partitions": str(INTERNAL_PARTITIONS),
                "transaction.state.log.num.partitions": str(INTERNAL_PARTITIONS)}
    with running_cluster(tmp_path_factory.mktemp("markers") / "c", 3, settings=internal) as c:
        c.wait_isr("__transaction_state", 3)
        c.wait_isr("__consumer_offsets", 3)
        yield c


def spread_topics(cluster: Cluster, prefix: str) -> tuple[str, str, list[int]]:
    """Input and output topics whose partition i is led by node i (preferred leader first)."""
    ids = sorted(cluster.nodes)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_of()})
    assignment = [ids[i:] + ids[:i] for i in range(PARTITIONS)]
    names = (f"{prefix}-in", f"{prefix}-out")
    for name in names:
        admin.create_topics([NewTopic(name, num_partitions=PARTITIONS, replica_assignment=assignment)])[name].result(60)
        cluster.wait_isr(name, 3)
    leaders = [cluster.partitions(names[0])[p]["leader"] for p in range(PARTITIONS)]
    assert sorted(leaders) == ids, leaders  # spread: markers go to every node
    return names[0], names[1], ids


def coordinator_names(cluster: Cluster, prefix: str) -> tuple[str, str, int]:
    """A transactional id and a group whose coordinator partitions are led by two different
    nodes; and the transaction coordinator's node."""
    txns = cluster.partitions("__transaction_state")
    offsets = cluster.partitions("__consumer_offsets")
    for i in range(200):
        tid = f"{prefix}-txn-{i}"
        t_leader = txns[partition_for(tid, INTERNAL_PARTITIONS)]["leader"]
        for j in range(200):
            group = f"{prefix}-group-{j}"
            if offsets[partition_for(group, INTERNAL_PARTITIONS)]["leader"] not in (t_leader, -1):
                return tid, group, t_leader
    raise AssertionError(f"no split coordinators: {txns} {offsets}")


def fill(cluster: Cluster, topic: str) -> None:
    p = Producer({"bootstrap.servers": cluster.bootstrap_of(), "acks": "all",
                  "enable.idempotence": True})
    for i in range(RECORDS):
        p.produce(topic, str(i).encode(), partition=i % PARTITIONS)
    assert p.flush(60) == 0


def transform_loop(cluster: Cluster, tid: str, group: str, src: str, dst: str,
                   kill: int | None) -> dict[str, Any]:
    """Read `src`, write `dst` in transactions with the offsets; every 4th transaction is
    aborted on purpose (and its inputs read again). With `kill`, that node dies by kill -9
    while a transaction is open, a third of the way through."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap_of(), "transactional.id": tid,
                         "transaction.timeout.ms": 20000})
    producer.init_transactions(60)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_of(), "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "session.timeout.ms": 10000})
    consumer.subscribe([src])
    state: dict[str, Any] = {"done": 0, "txns": 0, "aborted": 0, "killed": False,
                             "fatal": None}

    def rewind() -> None:
        assignment = consumer.assignment()
        for tp in consumer.committed(assignment, timeout=30):
            consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))

    def abort() -> bool:
        try:
            producer.abort_transaction(30)
        except KafkaException as exc:
            if exc.args[0].fatal():
                raise
            return False
        return True

    def step() -> bool:
        msgs = [m for m in consumer.consume(40, 0.5) if m.error() is None]
        if not msgs:
            return bool(state["done"] >= RECORDS)
        producer.begin_transaction()
        state["txns"] += 1
        try:
            for m in msgs:
                producer.produce(dst, b"out-" + m.value(), partition=m.partition())
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()), consumer.consumer_group_metadata(),
                60)
            if kill is not None and not state["killed"] and state["done"] >= RECORDS // 3:
                # the transaction is open, its records and offsets written: its
                # coordinator's node dies
                producer.flush(30)
                cluster.kill9(kill)
                state["killed"] = True
            if state["txns"] % 4 == 0:
                # on purpose: none of this transaction may be seen by read_committed
                wait_until(abort, "the transaction aborted", 120, cluster)
                state["aborted"] += 1
                rewind()
                return False
            producer.commit_transaction(60)
        except KafkaException as exc:
            if exc.args[0].fatal():
                state["fatal"] = str(exc.args[0])
                return True
            wait_until(abort, "the failed transaction aborted", 120, cluster)
            state["aborted"] += 1
            rewind()
            return False
        state["done"] += len(msgs)
        return bool(state["done"] >= RECORDS)

    try:
        wait_until(step, "the transactional loop through every input", 300, cluster, every=0)
    finally:
        consumer.close()
    assert state["fatal"] is None, state
    assert state["aborted"] > 0
    return state


def read_committed(cluster: Cluster, topic: str) -> list[bytes]:
    reader = Consumer({"bootstrap.servers": cluster.bootstrap_of(), "group.id": f"{topic}-check",
                       "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    reader.subscribe([topic])
    out: list[bytes] = []

    def read() -> bool:
        out.extend(m.value() for m in reader.consume(500, 1.0) if m.error() is None)
        return len(out) >= RECORDS

    try:
        wait_until(read, f"every transformed record of {topic}, read_committed", 120, cluster)
        # anything beyond would be a duplicate or an aborted record: look a while longer
        for _ in range(3):
            out.extend(m.value() for m in reader.consume(500, 1.0) if m.error() is None)
    finally:
        reader.close()
    return out


def expected() -> list[bytes]:
    return sorted(b"out-%d" % i for i in range(RECORDS))


def test_markers_reach_leaders_on_every_node(cluster: Cluster) -> None:
    src, dst, _ = spread_topics(cluster, "mk")
    tid, group, _ = coordinator_names(cluster, "mk")
    fill(cluster, src)
    transform_loop(cluster, tid, group, src, dst, kill=None)
    assert sorted(read_committed(cluster, dst)) == expected()
    # the group's committed offsets came with the commit markers, on another node
    probe = Consumer({"bootstrap.servers": cluster.bootstrap_of(), "group.id": group})
    try:
        committed = probe.committed([TopicPartition(src, p) for p in range(PARTITIONS)], 10)
    finally:
        probe.close()
    assert sum(tp.offset for tp in committed) == RECORDS
    # no transaction is left open anywhere: every partition's LSO reached its end
    for topic in (src, dst):
        for p in range(PARTITIONS):
            assert not open_producers(cluster, topic, p), (topic, p)


def open_producers(cluster: Cluster, topic: str, partition: int) -> list[Any]:
    leader = cluster.partitions(topic)[partition]["leader"]
    r = call(cluster.bootstrap_of([leader]), DESCRIBE_PRODUCERS, 0, {
        "topics": [{"name": topic, "partition_indexes": [partition]}]}, 10)
    part = r.topics[0].partitions[0]
    assert int(part.error_code) == 0
    return [p for p in part.active_producers if int(p.current_txn_start_offset) >= 0]


def test_markers_across_kill_of_the_transaction_coordinator(cluster: Cluster) -> None:
    src, dst, _ = spread_topics(cluster, "mkk")
    tid, group, coordinator = coordinator_names(cluster, "mkk")
    fill(cluster, src)
    state = transform_loop(cluster, tid, group, src, dst, kill=coordinator)
    assert state["killed"]
    assert sorted(read_committed(cluster, dst)) == expected()
    cluster.restart(coordinator)
    cluster.wait_ready()
    for topic in (src, dst, "__transaction_state"):
        cluster.wait_isr(topic, 3, timeout=120)

    def settled() -> bool:  # the markers of the killed transaction end every open one
        return not any(open_producers(cluster, t, p) for t in (src, dst)
                       for p in range(PARTITIONS))

    wait_until(settled, "no transaction left open on any partition", 120, cluster)


def marker(topic: str, partition: int, pid: int, epoch: int, coordinator_epoch: int
           ) -> dict[str, Any]:
    return {"markers": [{"producer_id": pid, "producer_epoch": epoch,
                         "transaction_result": False, "coordinator_epoch": coordinator_epoch,
                         "topics": [{"name": topic, "partition_indexes": [partition]}]}]}


def marker_error(cluster: Cluster, node: int, values: dict[str, Any]) -> ErrorCode:
    r = call(cluster.bootstrap_of([node]), WRITE_TXN_MARKERS, 1, values, 40)
    return ErrorCode(r.markers[0].topics[0].partitions[0].error_code)


def test_write_txn_markers_bad_input(cluster: Cluster) -> None:
    topic = "mk-bad"
    ids = sorted(cluster.nodes)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_of()})
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[ids])])[topic].result(60)
    cluster.wait_isr(topic, 3)
    leader = cluster.partitions(topic)[0]["leader"]
    follower = next(i for i in ids if i != leader)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_of(),
                         "transactional.id": "mk-bad-txn"})
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce(topic, b"x", partition=0)
    producer.commit_transaction(60)

    r = call(cluster.bootstrap_of([leader]), DESCRIBE_PRODUCERS, 0, {
        "topics": [{"name": topic, "partition_indexes": [0]}]}, 10)
    [entry] = r.topics[0].partitions[0].active_producers
    pid, epoch = int(entry.producer_id), int(entry.producer_epoch)
    coord_epoch = int(entry.coordinator_epoch)
    assert coord_epoch >= 0
    end_before = end_offset(cluster, topic)

    # a follower does not take markers
    assert marker_error(cluster, follower, marker(topic, 0, pid, epoch, coord_epoch)) == \
        ErrorCode.not_leader_or_follower
    # nor does anyone for a partition that does not exist
    assert marker_error(cluster, leader, marker("mk-nowhere", 0, pid, epoch, coord_epoch)) == \
        ErrorCode.unknown_topic_or_partition
    # a coordinator older than the one that wrote the last marker is fenced
    assert marker_error(cluster, leader, marker(topic, 0, pid, epoch, coord_epoch - 1)) == \
        ErrorCode.transaction_coordinator_fenced
    # an older producer epoch is refused
    assert marker_error(cluster, leader, marker(topic, 0, pid, epoch - 1, coord_epoch)) == \
        ErrorCode.invalid_producer_epoch
    assert end_offset(cluster, topic) == end_before  # none of them appended anything
    cluster.check_alive()
    cluster.wait_ready()


def end_offset(cluster: Cluster, topic: str) -> int:
    c = Consumer({"bootstrap.servers": cluster.bootstrap_of(), "group.id": "mk-probe"})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1])
    finally:
        c.close()
