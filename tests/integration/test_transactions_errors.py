"""Bad transactional requests get Kafka's error codes and change nothing."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.add_partitions_to_txn.v3 import request as apt3
from kio.schema.describe_transactions.v0 import request as dt0
from kio.schema.end_txn.v1 import request as et1
from kio.schema.end_txn.v3 import request as et3
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4 import request as fc4
from kio.schema.init_producer_id.v4 import request as ip4
from kio.schema.list_transactions.v1 import request as lt1
from kio.schema.produce.v9 import request as p9
from kio.schema.txn_offset_commit.v3 import request as toc3
from kio.static.primitive import i16, i32, i64

from odradek.protocol.records import Record, build_batch
from tests.support.broker import BrokerProcess
from tests.support.wire import Conn

TIMEOUT = datetime.timedelta(seconds=10)


def init(conn: Conn, tid: str, timeout_ms: int = 60000, pid: int = -1, epoch: int = -1) -> Any:
    return conn.request(ip4.InitProducerIdRequest(
        transactional_id=tid, transaction_timeout=datetime.timedelta(milliseconds=timeout_ms),
        producer_id=i64(pid), producer_epoch=i16(epoch)))


def add(conn: Conn, tid: str, pid: int, epoch: int, topic: str, partition: int = 0) -> ErrorCode:
    r = conn.request(apt3.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=tid, v3_and_below_producer_id=i64(pid),
        v3_and_below_producer_epoch=i16(epoch), v3_and_below_topics=(
            apt3.AddPartitionsToTxnTopic(name=topic, partitions=(i32(partition),)),)))
    return r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code


def end(conn: Conn, tid: str, pid: int, epoch: int, commit: bool, mod: Any = et3) -> ErrorCode:
    return conn.request(mod.EndTxnRequest(transactional_id=tid, producer_id=i64(pid),
                                          producer_epoch=i16(epoch), committed=commit)).error_code


def describe(conn: Conn, tid: str) -> Any:
    return conn.request(dt0.DescribeTransactionsRequest(transactional_ids=(tid,))).transaction_states[0]


def listed(conn: Conn, states: tuple[str, ...] = ()) -> dict[str, tuple[int, str]]:
    """ListTransactions (DescribeTransactions of a never-started transaction carries a start
    time of -1, which kio's reader refuses)."""
    r = conn.request(lt1.ListTransactionsRequest(
        state_filters=states, producer_id_filters=(), duration_filter=i64(-1)))
    return {t.transactional_id: (int(t.producer_id), t.transaction_state)
            for t in r.transaction_states}


def produce_txn(conn: Conn, topic: str, pid: int, epoch: int, seq: int) -> ErrorCode:
    batch = build_batch([Record(-1, 1000, b"k", b"v", [])], producer_id=pid,
                        producer_epoch=epoch, base_sequence=seq, transactional=True)
    r = conn.request(p9.ProduceRequest(
        transactional_id="t-bad", acks=i16(-1), timeout=TIMEOUT,
        topic_data=(p9.TopicProduceData(name=topic, partition_data=(
            p9.PartitionProduceData(index=i32(0), records=batch),)),)))
    return r.responses[0].partition_responses[0].error_code


def test_bad_transactional_requests(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("bad-t", 1, 1)])["bad-t"].result(30)
    with Conn(broker.port) as conn:
        fc = conn.request(fc4.FindCoordinatorRequest(key_type=1, coordinator_keys=("t-bad",)))
        assert fc.coordinators[0].error_code == ErrorCode.none
        assert init(conn, "t-bad", timeout_ms=10**9).error_code == ErrorCode.invalid_transaction_timeout
        r = init(conn, "t-bad")
        assert r.error_code == ErrorCode.none
        pid, epoch = int(r.producer_id), int(r.producer_epoch)
        other = init(conn, "t-other")
        before = listed(conn)
        assert before["t-bad"] == (pid, "Empty")

        # EndTxn with no transaction
        assert end(conn, "t-bad", pid, epoch, True) == ErrorCode.invalid_txn_state
        # unknown producer id, and the producer id of another transactional id
        assert add(conn, "t-bad", 999999, epoch, "bad-t") == ErrorCode.invalid_producer_id_mapping
        assert add(conn, "t-bad", int(other.producer_id), 0, "bad-t") == \
            ErrorCode.invalid_producer_id_mapping
        # a stale epoch: PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH for versions before it
        assert add(conn, "t-bad", pid, epoch - 1, "bad-t") == ErrorCode.producer_fenced
        assert end(conn, "t-bad", pid, epoch - 1, False, et1) == ErrorCode.invalid_producer_epoch
        # transactional data for a partition not added to the transaction (KIP-890)
        assert produce_txn(conn, "bad-t", pid, epoch, 0) == ErrorCode.invalid_txn_state
        # offsets for a group never added to the transaction
        toc = conn.request(toc3.TxnOffsetCommitRequest(
            transactional_id="t-bad", group_id="g-bad", producer_id=i64(pid),
            producer_epoch=i16(epoch), generation_id=i32(-1), member_id="",
            group_instance_id=None, topics=(toc3.TxnOffsetCommitRequestTopic(
                name="bad-t", partitions=(toc3.TxnOffsetCommitRequestPartition(
                    partition_index=i32(0), committed_offset=i64(1),
                    committed_leader_epoch=i32(-1), committed_metadata=None),)),)))
        assert toc.topics[0].partitions[0].error_code == ErrorCode.invalid_txn_state
        assert listed(conn) == before

        # the happy path still works on this connection after all that
        assert add(conn, "t-bad", pid, epoch, "bad-t") == ErrorCode.none
        assert produce_txn(conn, "bad-t", pid, epoch, 0) == ErrorCode.none
        assert listed(conn, ("Ongoing",)) == {"t-bad": (pid, "Ongoing")}
        d = describe(conn, "t-bad")
        assert (d.transaction_state, int(d.producer_epoch), [t.topic for t in d.topics]) == (
            "Ongoing", epoch, ["bad-t"])
        assert end(conn, "t-bad", pid, epoch, False) == ErrorCode.none
        assert end(conn, "t-bad", pid, epoch, False) == ErrorCode.none  # a retry
        assert end(conn, "t-bad", pid, epoch, True) == ErrorCode.invalid_txn_state
        # a new instance fences the old epoch
        bumped = init(conn, "t-bad", pid=pid, epoch=epoch)
        assert (int(bumped.producer_id), int(bumped.producer_epoch)) == (pid, epoch + 1)
        assert produce_txn(conn, "bad-t", pid, epoch, 1) == ErrorCode.invalid_producer_epoch


def test_describe_producers(broker: BrokerProcess) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from kio.schema.describe_producers.v0 import request as dp0

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("dp-t", 1, 1)])["dp-t"].result(30)
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    for i in range(10):
        p.produce("dp-t", b"%d" % i, partition=0)
    assert p.flush(30) == 0
    with Conn(broker.port) as conn:
        r = conn.request(dp0.DescribeProducersRequest(topics=(
            dp0.TopicRequest(name="dp-t", partition_indexes=(i32(0), i32(7))),)))
    ok, missing = r.topics[0].partitions
    assert missing.error_code == ErrorCode.unknown_topic_or_partition
    [state] = ok.active_producers
    assert (int(state.producer_epoch), int(state.last_sequence),
            int(state.current_txn_start_offset)) == (0, 9, -1)
