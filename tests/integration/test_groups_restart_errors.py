"""A node restart keeps groups and committed offsets; bad group requests get Kafka's errors."""

from __future__ import annotations

import datetime

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.join_group.v5 import request as jg5
from kio.schema.offset_commit.v8 import request as oc8
from kio.schema.sync_group.v3.request import SyncGroupRequest
from kio.static.primitive import i32, i64

from odradek.coordinator.offsets_topic import encode_subscription
from odradek.protocol.errors import ErrorCode
from tests.integration.group_support import (
    Member,
    confluent_conf,
    new_topic,
    produce,
    start_node,
    wait_until,
)
from tests.support.wire import Conn

E = ErrorCode
SESSION = datetime.timedelta(milliseconds=6000)


def committed(admin: AdminClient, group: str) -> dict[int, int]:
    res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    return {tp.partition: tp.offset for tp in res.result(30).topic_partitions}


def test_restart_keeps_offsets_and_groups(tmp_path):
    node = start_node(tmp_path / "data")
    try:
        topic = new_topic(node.bootstrap, "r-topic", partitions=3)
        produce(node.bootstrap, topic, 60)
        m = Member(confluent_conf(node.bootstrap, "r-group"), [topic]).start()
        wait_until(lambda: m.count() >= 60)
        m.stop()
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        before = committed(admin, "r-group")
        assert sum(before.values()) == 60
        node.stop()
        node.start()
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        assert committed(admin, "r-group") == before
        listed = admin.list_consumer_groups().result(30)
        assert "r-group" in {g.group_id for g in listed.valid}
        produce(node.bootstrap, topic, 15, start=60)
        again = Member(confluent_conf(node.bootstrap, "r-group"), [topic]).start()
        wait_until(lambda: again.count() >= 15)
        again.stop()
        # resumed from the commits: only the new records
        assert sorted(int(v) for _, _, v in again.records) == list(range(60, 75))
        # a crash (kill -9) keeps them too: the commits were in the log
        node.kill9()
        node.start()
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        assert sum(committed(admin, "r-group").values()) == 75
    finally:
        if node.alive():
            node.stop()


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    n = start_node(tmp_path_factory.mktemp("groups-errors") / "data")
    yield n
    n.stop()


def join(conn: Conn, group: str, member: str = "", ptype: str = "consumer",
         protocols: tuple[str, ...] = ("range",)):
    return conn.request(jg5.JoinGroupRequest(
        group_id=group, session_timeout=SESSION, rebalance_timeout=SESSION, member_id=member,
        group_instance_id=None, protocol_type=ptype, protocols=tuple(
            jg5.JoinGroupRequestProtocol(name=p, metadata=encode_subscription(["t"]))
            for p in protocols)))


def test_bad_group_requests_get_kafka_errors_and_group_keeps_working(node):
    topic = new_topic(node.bootstrap, "e-topic", partitions=2)
    produce(node.bootstrap, topic, 20)
    # a real group beside the bad requests
    member = Member(confluent_conf(node.bootstrap, "e-group"), [topic]).start()
    try:
        wait_until(lambda: member.count() >= 20)
        with Conn(node.port) as conn:
            # join with an unknown protocol type / no common protocol
            assert join(conn, "e-group", ptype="connect").error_code == E.inconsistent_group_protocol
            assert join(conn, "e-group", protocols=("nope",)).error_code == \
                E.inconsistent_group_protocol
            # heartbeat from an unknown member
            hb = conn.request(HeartbeatRequest(group_id="e-group", generation_id=i32(1),
                                               member_id="ghost", group_instance_id=None))
            assert hb.error_code == E.unknown_member_id
            # our own group: a member, then a sync from a stale generation
            first = join(conn, "e-raw")
            assert first.error_code == E.member_id_required
            joined = join(conn, "e-raw", member=first.member_id)
            assert joined.error_code == E.none
            sync = conn.request(SyncGroupRequest(
                group_id="e-raw", generation_id=joined.generation_id, member_id=joined.member_id,
                group_instance_id=None, assignments=()))
            assert sync.error_code == E.none
            stale = conn.request(SyncGroupRequest(
                group_id="e-raw", generation_id=i32(joined.generation_id - 1),
                member_id=joined.member_id, group_instance_id=None, assignments=()))
            assert stale.error_code == E.illegal_generation
            # commit to a topic that does not exist
            commit = conn.request(oc8.OffsetCommitRequest(
                group_id="e-raw", generation_id_or_member_epoch=i32(joined.generation_id),
                member_id=joined.member_id, group_instance_id=None, topics=(
                    oc8.OffsetCommitRequestTopic(name="no-such-topic", partitions=(
                        oc8.OffsetCommitRequestPartition(
                            partition_index=i32(0), committed_offset=i64(1),
                            committed_leader_epoch=i32(-1), committed_metadata=""),)),)))
            assert commit.topics[0].partitions[0].error_code == E.unknown_topic_or_partition
            # the group still works
            hb = conn.request(HeartbeatRequest(
                group_id="e-raw", generation_id=joined.generation_id,
                member_id=joined.member_id, group_instance_id=None))
            assert hb.error_code == E.none
        produce(node.bootstrap, topic, 10, start=20)
        wait_until(lambda: member.count() >= 30, what="the real group still consuming")
        assert not [e for e in member.errors if "commit" in e]
    finally:
        member.stop()


def test_clients_cannot_produce_to_internal_topics(node):
    from confluent_kafka import KafkaError, Producer

    topic = new_topic(node.bootstrap, "e-internal", partitions=1)
    produce(node.bootstrap, topic, 5)
    member = Member(confluent_conf(node.bootstrap, "e-internal-group"), [topic]).start()
    try:
        wait_until(lambda: member.count() >= 5)
    finally:
        member.stop()
    errors: list[int] = []
    producer = Producer({"bootstrap.servers": node.bootstrap, "message.send.max.retries": 0})
    for internal in ("__consumer_offsets", "__transaction_state"):
        producer.produce(internal, value=b"not a coordinator record", key=b"k", partition=0,
                         on_delivery=lambda err, _msg: errors.append(err.code() if err else 0))
    assert producer.flush(30) == 0
    assert errors == [KafkaError.TOPIC_EXCEPTION, KafkaError.TOPIC_EXCEPTION]
    # the coordinator's own writes still work: the group's commit is there
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    [fut] = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("e-internal-group")]).values()
    committed = {tp.partition: tp.offset for tp in fut.result(30).topic_partitions}
    assert committed == {0: 5}
