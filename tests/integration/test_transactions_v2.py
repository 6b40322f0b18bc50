"""KIP-890 part 2 (transaction version 2) on the wire: Produce v12, EndTxn v5, TxnOffsetCommit v5.

No client we ship sends these versions yet (librdkafka 2.16 and kafka-python 3.0 stop at
EndTxn v1/v3, aiokafka at v1), so the tests speak raw Kafka. What they check:
- a v12 produce adds its partition to the transaction (no AddPartitionsToTxn);
- TxnOffsetCommit v5 adds the group's offsets partition (no AddOffsetsToTxn);
- EndTxn v5 bumps the epoch and answers with it; a retry of it gets the same answer;
- the defences: a late produce or EndTxn from the previous transaction (old epoch) is
  refused with Kafka's error code and changes nothing (log end offsets, transaction state,
  what read_committed consumers see).
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.describe_transactions.v0 import request as dt0
from kio.schema.end_txn.v3 import request as et3
from kio.schema.end_txn.v5 import request as et5
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4 import request as ip4
from kio.schema.produce.v12 import request as p12
from kio.schema.txn_offset_commit.v5 import request as toc5
from kio.static.primitive import i16, i32, i64

from odradek.protocol.records import Record, build_batch
from tests.support.broker import BrokerProcess
from tests.support.wire import Conn

TIMEOUT = datetime.timedelta(seconds=10)


def init(conn: Conn, tid: str) -> tuple[int, int]:
    r = conn.request(ip4.InitProducerIdRequest(
        transactional_id=tid, transaction_timeout=datetime.timedelta(milliseconds=60000),
        producer_id=i64(-1), producer_epoch=i16(-1)))
    assert r.error_code == ErrorCode.none
    return int(r.producer_id), int(r.producer_epoch)


def produce12(conn: Conn, tid: str, topic: str, partition: int, pid: int, epoch: int, seq: int,
              values: list[bytes]) -> tuple[ErrorCode, int]:
    batch = build_batch([Record(-1, 1000 + i, b"k", v, []) for i, v in enumerate(values)],
                        producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                        transactional=True)
    r = conn.request(p12.ProduceRequest(
        transactional_id=tid, acks=i16(-1), timeout=TIMEOUT,
        topic_data=(p12.TopicProduceData(name=topic, partition_data=(
            p12.PartitionProduceData(index=i32(partition), records=batch),)),)))
    pr = r.responses[0].partition_responses[0]
    return pr.error_code, int(pr.base_offset)


def end5(conn: Conn, tid: str, pid: int, epoch: int, commit: bool) -> tuple[ErrorCode, int, int]:
    r = conn.request(et5.EndTxnRequest(transactional_id=tid, producer_id=i64(pid),
                                       producer_epoch=i16(epoch), committed=commit))
    return r.error_code, int(r.producer_id), int(r.producer_epoch)


def state(conn: Conn, tid: str) -> tuple[str, int, int, list[tuple[str, tuple[int, ...]]]]:
    d = conn.request(dt0.DescribeTransactionsRequest(transactional_ids=(tid,))).transaction_states[0]
    assert d.error_code == ErrorCode.none
    return (d.transaction_state, int(d.producer_id), int(d.producer_epoch),
            sorted((t.topic, tuple(int(p) for p in t.partitions)) for t in d.topics))


def ends(bootstrap: str, topic: str, partitions: int) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ends-probe"})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=30, cached=False)[1]
                for p in range(partitions)]
    finally:
        c.close()


def read_all(bootstrap: str, topic: str, isolation: str, expected: int) -> list[bytes]:
    """Every record value of `topic` a consumer with `isolation` is handed, reading to the end."""
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{isolation}-{topic}",
                  "isolation.level": isolation, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.subscribe([topic])
    out: list[bytes] = []
    eofs: set[int] = set()
    try:
        for _ in range(300):
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                eofs.add(m.partition())
                if len(eofs) == 2 and len(out) >= expected:
                    break
                continue
            eofs.discard(m.partition())
            out.append(m.value())
    finally:
        c.close()
    return out


def create(bootstrap: str, *names: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(n, 2, 1) for n in names]).values():
        fut.result(30)


def test_v2_transaction_bumps_epoch_and_fences_late_requests(broker: BrokerProcess) -> None:
    topic = "v2-out"
    create(broker.bootstrap, topic)
    tid = "v2-txn"
    with Conn(broker.port) as conn:
        pid, e = init(conn, tid)
        # a v12 produce joins its partition to the transaction by itself
        assert produce12(conn, tid, topic, 0, pid, e, 0, [b"c1", b"c2"])[0] == ErrorCode.none
        assert state(conn, tid) == ("Ongoing", pid, e, [(topic, (0,))])
        # EndTxn v5 bumps the epoch and answers with it
        assert end5(conn, tid, pid, e, True) == (ErrorCode.none, pid, e + 1)
        after_commit = state(conn, tid)
        assert after_commit == ("CompleteCommit", pid, e + 1, [])
        # a retry of that EndTxn (its answer was lost) gets the same answer, changes nothing
        assert end5(conn, tid, pid, e, True) == (ErrorCode.none, pid, e + 1)
        assert end5(conn, tid, pid, e, False)[0] == ErrorCode.invalid_txn_state
        assert state(conn, tid) == after_commit
        leo = ends(broker.bootstrap, topic, 2)

        # late produces of the committed transaction (old epoch): fenced, nothing appended,
        # on the partition it wrote to and on one it never touched
        assert produce12(conn, tid, topic, 0, pid, e, 1, [b"late0"])[0] == \
            ErrorCode.invalid_producer_epoch
        assert produce12(conn, tid, topic, 1, pid, e, 0, [b"late1"])[0] == \
            ErrorCode.invalid_producer_epoch
        assert ends(broker.bootstrap, topic, 2) == leo
        assert state(conn, tid) == after_commit

        # the next transaction, at the bumped epoch, sequences from 0
        assert produce12(conn, tid, topic, 1, pid, e + 1, 0, [b"a1"])[0] == ErrorCode.none
        ongoing = state(conn, tid)
        assert ongoing == ("Ongoing", pid, e + 1, [(topic, (1,))])
        # a late EndTxn of the previous transaction must not end this one
        assert end5(conn, tid, pid, e, True)[0] == ErrorCode.producer_fenced
        assert conn.request(et3.EndTxnRequest(transactional_id=tid, producer_id=i64(pid),
                                              producer_epoch=i16(e), committed=True)
                            ).error_code == ErrorCode.producer_fenced
        assert state(conn, tid) == ongoing
        # and a late produce of the old epoch does not join it either
        assert produce12(conn, tid, topic, 0, pid, e, 2, [b"late2"])[0] == \
            ErrorCode.invalid_producer_epoch
        assert state(conn, tid) == ongoing
        # abort it: the epoch moves on again
        assert end5(conn, tid, pid, e + 1, False) == (ErrorCode.none, pid, e + 2)
        # commit with no transaction open is refused; abort is allowed and bumps the epoch
        assert end5(conn, tid, pid, e + 2, True)[0] == ErrorCode.invalid_txn_state
        assert end5(conn, tid, pid, e + 2, False) == (ErrorCode.none, pid, e + 3)
        assert state(conn, tid)[:3] == ("CompleteAbort", pid, e + 3)

    committed = read_all(broker.bootstrap, topic, "read_committed", 2)
    assert sorted(committed) == [b"c1", b"c2"]
    uncommitted = read_all(broker.bootstrap, topic, "read_uncommitted", 3)
    assert sorted(uncommitted) == [b"a1", b"c1", b"c2"]


def offsets_of(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, 0), TopicPartition(topic, 1)])])[group]
    return {tp.partition: tp.offset for tp in fut.result(30).topic_partitions if tp.offset >= 0}


def txn_commit5(conn: Conn, tid: str, group: str, pid: int, epoch: int, topic: str,
                offset: int) -> Any:
    r = conn.request(toc5.TxnOffsetCommitRequest(
        transactional_id=tid, group_id=group, producer_id=i64(pid), producer_epoch=i16(epoch),
        generation_id=i32(-1), member_id="", group_instance_id=None,
        topics=(toc5.TxnOffsetCommitRequestTopic(name=topic, partitions=(
            toc5.TxnOffsetCommitRequestPartition(
                partition_index=i32(0), committed_offset=i64(offset),
                committed_leader_epoch=i32(-1), committed_metadata=None),)),)))
    return r.topics[0].partitions[0].error_code


def test_v2_txn_offset_commit_adds_the_offsets_partition(broker: BrokerProcess) -> None:
    src, out = "v2-src", "v2-sink"
    create(broker.bootstrap, src, out)
    tid, group = "v2-ctp", "v2-group"
    with Conn(broker.port) as conn:
        pid, e = init(conn, tid)
        # transaction 1: output and input offsets, no AddPartitionsToTxn/AddOffsetsToTxn
        assert produce12(conn, tid, out, 0, pid, e, 0, [b"r1"])[0] == ErrorCode.none
        assert txn_commit5(conn, tid, group, pid, e, src, 7) == ErrorCode.none
        st = state(conn, tid)
        assert st[0] == "Ongoing" and {t for t, _ in st[3]} == {out, "__consumer_offsets"}
        assert offsets_of(broker.bootstrap, group, src) == {}  # not before the commit
        assert end5(conn, tid, pid, e, True) == (ErrorCode.none, pid, e + 1)
        assert offsets_of(broker.bootstrap, group, src) == {0: 7}
        # transaction 2 is aborted: its offsets never show
        assert txn_commit5(conn, tid, group, pid, e + 1, src, 9) == ErrorCode.none
        # a late TxnOffsetCommit of the old epoch is fenced
        assert txn_commit5(conn, tid, group, pid, e, src, 11) == ErrorCode.producer_fenced
        assert end5(conn, tid, pid, e + 1, False) == (ErrorCode.none, pid, e + 2)
        assert offsets_of(broker.bootstrap, group, src) == {0: 7}
    # and after a restart the log says the same
    broker.restart()
    assert offsets_of(broker.bootstrap, group, src) == {0: 7}
