"""producer.id.expiration.ms: an idle producer id is forgotten by every partition, and then
behaves as Kafka's does for an unknown producer: its batches are accepted with any sequence,
so a late retry of an old batch is appended again instead of being answered as a duplicate."""

from __future__ import annotations

import datetime
import time
from pathlib import Path

from kio.schema.describe_producers.v0 import request as dp0
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v4 import request as ip4
from kio.schema.produce.v9 import request as p9
from kio.static.primitive import i16, i32, i64

from odradek.protocol.records import Record, build_batch
from tests.support.broker import BrokerProcess
from tests.support.wire import Conn

EXPIRATION_MS = 1500


def produce(conn: Conn, topic: str, pid: int, seq: int, values: list[bytes]) -> tuple[ErrorCode, int]:
    now = int(time.time() * 1000)
    batch = build_batch([Record(-1, now, None, v, []) for v in values], producer_id=pid,
                        producer_epoch=0, base_sequence=seq)
    r = conn.request(p9.ProduceRequest(
        transactional_id=None, acks=i16(-1), timeout=datetime.timedelta(seconds=10),
        topic_data=(p9.TopicProduceData(name=topic, partition_data=(
            p9.PartitionProduceData(index=i32(0), records=batch),)),)))
    pr = r.responses[0].partition_responses[0]
    return pr.error_code, int(pr.base_offset)


def producers(conn: Conn, topic: str) -> list[int]:
    r = conn.request(dp0.DescribeProducersRequest(topics=(
        dp0.TopicRequest(name=topic, partition_indexes=(i32(0),)),)))
    return [int(p.producer_id) for p in r.topics[0].partitions[0].active_producers]


def test_idle_producer_id_expires(tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    node = BrokerProcess(tmp_path / "data", settings={
        "producer.id.expiration.ms": str(EXPIRATION_MS),
        "producer.id.expiration.check.interval.ms": "200"}).start()
    try:
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        admin.create_topics([NewTopic("exp-t", 1, 1)])["exp-t"].result(30)
        with Conn(node.port) as conn:
            r = conn.request(ip4.InitProducerIdRequest(
                transactional_id=None, transaction_timeout=datetime.timedelta(0),
                producer_id=i64(-1), producer_epoch=i16(-1)))
            pid = int(r.producer_id)
            assert produce(conn, "exp-t", pid, 0, [b"a", b"b"]) == (ErrorCode.none, 0)
            assert produce(conn, "exp-t", pid, 2, [b"c"]) == (ErrorCode.none, 2)
            # while the producer is known: a retry is a duplicate, a gap is refused
            assert produce(conn, "exp-t", pid, 2, [b"c"]) == (ErrorCode.none, 2)
            assert produce(conn, "exp-t", pid, 7, [b"x"])[0] == \
                ErrorCode.out_of_order_sequence_number
            assert producers(conn, "exp-t") == [pid]
            deadline = time.monotonic() + 30
            while producers(conn, "exp-t") and time.monotonic() < deadline:
                time.sleep(0.2)
            assert producers(conn, "exp-t") == []
            # forgotten: the same late retry is taken as new data and appended again
            # (an unknown producer's first batch may carry any sequence)
            assert produce(conn, "exp-t", pid, 2, [b"c"]) == (ErrorCode.none, 3)
            assert producers(conn, "exp-t") == [pid]
            assert produce(conn, "exp-t", pid, 3, [b"d"]) == (ErrorCode.none, 4)
            # known again: a retry is a duplicate once more, a gap refused
            assert produce(conn, "exp-t", pid, 3, [b"d"]) == (ErrorCode.none, 4)
            assert produce(conn, "exp-t", pid, 9, [b"y"])[0] == \
                ErrorCode.out_of_order_sequence_number
    finally:
        node.stop()
