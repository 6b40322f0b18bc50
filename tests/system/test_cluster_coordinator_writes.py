"""Issue 14: a coordinator write that cannot reach the ISR is answered with Kafka's retriable
coordinator error, not acknowledged and not a dropped connection, on a real 3-node cluster.

The two followers of the coordinator's `__transaction_state` and `__consumer_offsets`
partitions are stopped (SIGSTOP: still in the ISR, fetching nothing, and with the quorum
gone the ISR cannot shrink), so the coordinator's records stay above the high watermark.
InitProducerId then gets COORDINATOR_NOT_AVAILABLE and OffsetCommit COORDINATOR_NOT_AVAILABLE
for each partition, as Kafka's TransactionStateManager and GroupCoordinator answer a write
that timed out; the node stays up. Once the followers are back the same requests succeed
and the committed offset is the one the retry wrote.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.broker.admin_calls import call
from odradek.coordinator.offsets_topic import partition_for
from odradek.protocol.errors import ErrorCode
from tests.system.cluster_support import Cluster, running_cluster, wait_until

INTERNAL_PARTITIONS = 3
OFFSET_COMMIT, INIT_PRODUCER_ID = 8, 22
TOPIC = "cw"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("cwrites") / "c", 3) as c:
        c.wait_isr("__transaction_state", 3)
        c.wait_isr("__consumer_offsets", 3)
        yield c


def names_led_by_one_node(cluster: Cluster) -> tuple[str, str, int]:
    txns = cluster.partitions("__transaction_state")
    offsets = cluster.partitions("__consumer_offsets")
    for i in range(100):
        tid = f"cw-txn-{i}"
        leader = txns[partition_for(tid, INTERNAL_PARTITIONS)]["leader"]
        for j in range(100):
            group = f"cw-group-{j}"
            if offsets[partition_for(group, INTERNAL_PARTITIONS)]["leader"] == leader:
                return tid, group, leader
    raise AssertionError(f"no shared leader: {txns} {offsets}")


def init_producer_id(cluster: Cluster, node: int, tid: str) -> Any:
    return call(cluster.bootstrap_of([node]), INIT_PRODUCER_ID, 4, {
        "transactional_id": tid, "transaction_timeout": 60000, "producer_id": -1,
        "producer_epoch": -1}, 60)


def offset_commit(cluster: Cluster, node: int, group: str, offset: int) -> ErrorCode:
    r = call(cluster.bootstrap_of([node]), OFFSET_COMMIT, 8, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
        "group_instance_id": None, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
             "committed_metadata": ""}]}]}, 60)
    return ErrorCode(r.topics[0].partitions[0].error_code)


def test_unreplicated_coordinator_writes_get_retriable_errors(cluster: Cluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_of()})
    admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(60)
    cluster.wait_isr(TOPIC, 3)
    tid, group, coordinator = names_led_by_one_node(cluster)
    assert offset_commit(cluster, coordinator, group, 1) == ErrorCode.none
    others = [n for n in sorted(cluster.nodes) if n != coordinator]
    for n in others:
        cluster.pause(n)
    try:
        r = init_producer_id(cluster, coordinator, tid)
        assert ErrorCode(r.error_code) == ErrorCode.coordinator_not_available
        assert (int(r.producer_id), int(r.producer_epoch)) == (-1, -1)
        assert offset_commit(cluster, coordinator, group, 7) == \
            ErrorCode.coordinator_not_available
        cluster.check_alive()
    finally:
        for n in others:
            cluster.resume(n)
    cluster.wait_ready()
    cluster.wait_isr("__transaction_state", 3, timeout=120)

    def initialised() -> Any:
        r = init_producer_id(cluster, coordinator, tid)
        return r if ErrorCode(r.error_code) == ErrorCode.none else None

    r = wait_until(initialised, "InitProducerId answered once the ISR is back", 120, cluster)
    assert int(r.producer_id) >= 0 and int(r.producer_epoch) >= 0
    wait_until(lambda: offset_commit(cluster, coordinator, group, 9) == ErrorCode.none,
               "the offset commit acknowledged once the ISR is back", 120, cluster)
    probe = Consumer({"bootstrap.servers": cluster.bootstrap_of(), "group.id": group})
    try:
        [tp] = probe.committed([TopicPartition(TOPIC, 0)], 30)
    finally:
        probe.close()
    assert tp.offset == 9
