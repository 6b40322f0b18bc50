"""Issue 14, point 5: coordinators follow leadership on a real 3-node cluster.

The internal topics have replication factor 3. A consumer group keeps its committed offsets
across a kill -9 of its coordinator's node: FindCoordinator moves to the new leader of the
group's `__consumer_offsets` partition, which has the latest commit (it loads its log to the
end, and a commit is acknowledged only once the ISR has it), and the member goes on from
there without re-reading or skipping a record. A transactional consume-transform-produce
loop goes on across a kill -9 of its transaction coordinator's node (which leads its data
partitions too) in the middle of an open transaction: the transaction is aborted or committed
on the new coordinator, and read_committed sees every input transformed exactly once. One
cluster for the module.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.coordinator.offsets_topic import partition_for
from tests.system.cluster_support import Cluster, running_cluster, wait_until

TOPIC = "orders"
PARTITIONS = 3
FIRST = 300
LAST = 30
MORE = 300
TXN_RECORDS = 300
INTERNAL_PARTITIONS = 12


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    # enough coordinator partitions that a group and a transactional id share replicas
    internal = {"offsets.topic.num.partitions": str(INTERNAL_PARTITIONS),
                "transaction.state.log.num.partitions": str(INTERNAL_PARTITIONS)}
    with running_cluster(tmp_path_factory.mktemp("coordinators") / "c", 3,
                         settings=internal) as c:
        yield c


def produce(bootstrap: str, start: int, count: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "message.timeout.ms": 120000})
    for i in range(start, start + count):
        p.produce(TOPIC, str(i).encode(), key=str(i).encode())
        p.poll(0)
    assert p.flush(120) == 0


def commit(consumer: Consumer, positions: dict[int, int], cluster: Cluster) -> None:
    """Commit the next offsets to read, synchronously, until the coordinator acknowledges."""
    offsets = [TopicPartition(TOPIC, p, o) for p, o in sorted(positions.items())]

    def done() -> bool:
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException:
            return False
        return True

    wait_until(done, "the commit acknowledged", 120, cluster, every=0.5)


def group_coordinator(admin: AdminClient, group: str) -> int:
    description = admin.describe_consumer_groups([group])[group].result(60)
    return int(description.coordinator.id)


def test_internal_topics_have_replication_factor_3(cluster: Cluster) -> None:
    # the group and transaction coordinators write their topics with acks=all to 3 replicas
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(60)
    cluster.wait_isr(TOPIC, 3)
    for name in ("__consumer_offsets", "__transaction_state"):
        parts = cluster.wait_isr(name, 3)
        assert parts and all(len(p["replicas"]) == 3 for p in parts.values()), (name, parts)


def matching_names(cluster: Cluster) -> tuple[str, str, list[int]]:
    """A transactional id, the replicas of its coordinator partition (the leader first), and a
    group whose coordinator is on another node. The loop's topics get the transaction's
    replicas, so one kill -9 takes the transaction coordinator and every data leader of the
    loop at once; test_cluster_txn_markers.py covers leaders spread over the nodes.

    The group's coordinator stays up on purpose: librdkafka (2.16) hangs in
    send_offsets_to_transaction, past its timeout, when the group's cached coordinator is a
    broker that left the metadata (confluentinc/librdkafka#5511 and #5456, open; Kafka drops a
    fenced broker from Metadata too, so it hangs against Kafka the same way). A group
    coordinator's kill -9 is test_group_keeps_committed_offsets_across_kill_of_its_coordinator
    below."""
    offsets = cluster.partitions("__consumer_offsets")
    txns = cluster.partitions("__transaction_state")
    groups = [f"etl-{i}" for i in range(100)]
    tids = [f"etl-txn-{i}" for i in range(100)]
    for tid in tids:
        t = txns[partition_for(tid, INTERNAL_PARTITIONS)]
        if t["leader"] != t["replicas"][0]:
            continue
        for group in groups:
            o = offsets[partition_for(group, INTERNAL_PARTITIONS)]
            if o["leader"] not in (-1, t["leader"]):
                return group, tid, t["replicas"]
    raise AssertionError(f"no usable coordinator partitions: {offsets} {txns}")


def test_transactional_loop_continues_across_kill_of_its_transaction_coordinator(
        cluster: Cluster) -> None:
    group, tid, replicas = matching_names(cluster)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for name in ("etl-in", "etl-out"):
        admin.create_topics([NewTopic(name, num_partitions=2, replica_assignment=[replicas, replicas])])[
            name].result(60)
        cluster.wait_isr(name, 3)
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(TXN_RECORDS):
        p.produce("etl-in", str(i).encode(), partition=i % 2)
    assert p.flush(60) == 0

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": tid,
                         "transaction.timeout.ms": 60000})
    producer.init_transactions(60)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "session.timeout.ms": 10000})
    consumer.subscribe(["etl-in"])
    coordinator = replicas[0]
    state: dict[str, Any] = {"done": 0, "killed": False, "aborted": 0, "fatal": None}

    def rewind() -> None:
        # after an abort the inputs of the transaction are read again from the committed
        # offsets (what Kafka's consume-transform-produce recipe does)
        assignment = consumer.assignment()
        for tp in consumer.committed(assignment, timeout=30):
            consumer.seek(TopicPartition(tp.topic, tp.partition,
                                         tp.offset if tp.offset >= 0 else 0))

    def abort() -> bool:
        try:
            producer.abort_transaction(30)
        except KafkaException as exc:
            if exc.args[0].fatal():
                raise
            return False
        return True

    def step() -> bool:
        msgs = [m for m in consumer.consume(50, 0.5) if m.error() is None]
        if not msgs:
            return state["done"] >= TXN_RECORDS
        producer.begin_transaction()
        try:
            for m in msgs:
                producer.produce("etl-out", b"out-" + m.value(), partition=m.partition())
            if not state["killed"] and state["done"] >= TXN_RECORDS // 3:
                # the transaction is open, its records on the leader: its coordinator dies
                producer.flush(30)
                cluster.kill9(coordinator)
                state["killed"] = True
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()), consumer.consumer_group_metadata(),
                60)
            producer.commit_transaction(60)
        except KafkaException as exc:
            err = exc.args[0]
            if err.fatal():
                state["fatal"] = str(err)
                return True
            wait_until(abort, "the open transaction aborted", 120, cluster)
            state["aborted"] += 1
            rewind()
            return False
        state["done"] += len(msgs)
        return state["done"] >= TXN_RECORDS

    try:
        wait_until(step, "the transactional loop through every input", 240, cluster)
        assert state["fatal"] is None and state["killed"]
    finally:
        consumer.close()
    survivors = cluster.bootstrap_of()
    reader = Consumer({"bootstrap.servers": survivors, "group.id": "etl-check",
                       "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    reader.subscribe(["etl-out"])
    out: list[bytes] = []

    def read() -> bool:
        out.extend(m.value() for m in reader.consume(500, 1.0) if m.error() is None)
        return len(out) >= TXN_RECORDS

    try:
        wait_until(read, "every transformed record, read_committed", 120, cluster)
        out.extend(m.value() for m in reader.consume(500, 2.0) if m.error() is None)
    finally:
        reader.close()
    # no aborted and no duplicated record: each input transformed exactly once
    assert sorted(out) == sorted(b"out-%d" % i for i in range(TXN_RECORDS))
    cluster.restart(coordinator)
    cluster.wait_ready()
    cluster.wait_isr("__transaction_state", 3)


def consume(consumer: Consumer, seen: dict[int, list[int]], want: int, cluster: Cluster,
            positions: dict[int, int]) -> None:
    """Read until `want` records in all, committing after each poll (what was read)."""

    def more() -> bool:
        got = [m for m in consumer.consume(100, 0.5) if m.error() is None]
        for m in got:
            seen.setdefault(m.partition(), []).append(m.offset())
            positions[m.partition()] = m.offset() + 1
        if got:
            commit(consumer, positions, cluster)
        return sum(len(v) for v in seen.values()) >= want

    wait_until(more, f"{want} records read by the group", 120, cluster)


def test_group_keeps_committed_offsets_across_kill_of_its_coordinator(cluster: Cluster) -> None:
    group = "ledger"
    produce(cluster.bootstrap, 0, FIRST)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 10000, "heartbeat.interval.ms": 500})
    consumer.subscribe([TOPIC])
    seen: dict[int, list[int]] = {}
    positions: dict[int, int] = {}
    try:
        consume(consumer, seen, FIRST, cluster, positions)
        assert sum(len(v) for v in seen.values()) == FIRST  # nothing beyond what was written
        coordinator = group_coordinator(admin, group)
        offsets_partition = partition_for(group, INTERNAL_PARTITIONS)
        leader = cluster.partitions("__consumer_offsets")[offsets_partition]["leader"]
        assert coordinator == leader  # FindCoordinator: the leader of the group's partition

        # the last commit goes right before the kill: the followers' HW has not caught up
        # with it yet, so the new leader must load its log beyond its HW to have it
        produce(cluster.bootstrap, FIRST, LAST)
        consume(consumer, seen, FIRST + LAST, cluster, positions)
        cluster.kill9(coordinator)
        survivors = cluster.bootstrap_of()
        admin = AdminClient({"bootstrap.servers": survivors})

        def moved() -> int | None:
            part = cluster.partitions("__consumer_offsets")[offsets_partition]
            if part["leader"] in (coordinator, -1):
                return None
            now = group_coordinator(admin, group)
            return now if now == part["leader"] else None

        new_coordinator = wait_until(moved, "the group's coordinator on a new leader", 90,
                                     cluster)
        assert new_coordinator != coordinator

        # every committed offset is there on the new coordinator, asked by a fresh client
        probe = Consumer({"bootstrap.servers": survivors, "group.id": group,
                          "enable.auto.commit": False})
        try:
            wanted = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]

            def committed() -> dict[int, int] | None:
                try:
                    got = probe.committed(wanted, timeout=5)
                except KafkaException:
                    return None
                return {tp.partition: tp.offset for tp in got}

            after = wait_until(committed, "the committed offsets from the new coordinator", 60,
                               cluster)
        finally:
            probe.close()
        assert after == {p: positions.get(p, -1001) for p in range(PARTITIONS)}

        # the member goes on: new records are read once each, from where it committed
        produce(survivors, FIRST + LAST, MORE)
        consume(consumer, seen, FIRST + LAST + MORE, cluster, positions)
    finally:
        consumer.close()
    end_offsets = _end_offsets(survivors)
    for p in range(PARTITIONS):
        offsets = seen.get(p, [])
        assert offsets == list(range(end_offsets[p])), f"partition {p}: re-read or skipped"
    assert sum(end_offsets.values()) == FIRST + LAST + MORE

    cluster.restart(coordinator)
    cluster.wait_ready()
    cluster.wait_isr("__consumer_offsets", 3)


def _end_offsets(bootstrap: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "end-offsets-probe"})
    try:
        out: dict[int, Any] = {}
        for p in range(PARTITIONS):
            _, high = c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)
            out[p] = high
        return out
    finally:
        c.close()
