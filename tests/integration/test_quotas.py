"""Issue 16, client quotas: set and read with `odradek quota` (AlterClientQuotas /
DescribeClientQuotas), enforced as Kafka does: the answer carries throttle_time_ms and the
channel is muted (a next request is not read until the throttle is over). Rates themselves
are measured in bench/quota_rates.py, not here."""

from __future__ import annotations

import datetime
import json
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.api_versions.v3 import request as av3
from kio.schema.fetch.v12 import request as f12
from kio.schema.produce.v9 import request as p9
from kio.static.primitive import i8, i16, i32, i64

from odradek.protocol.records import Record, build_batch
from tests.integration.cli_support import odradek, ok
from tests.support.broker import BrokerProcess
from tests.support.wire import Conn, frame, request_payload

VALUE = b"x" * 60_000


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A fresh node (each test's quotas would resolve the other's) whose throttles are capped
    at 4 s: a throttle is capped at the whole quota window, 11 s by default, and each muted
    channel below is waited out; 4 s still leaves 3 s between the 1 s look for an answer and
    the end of the mute."""
    node = BrokerProcess(tmp_path / "data", settings={"quota.window.num": "4"})
    node.start(timeout=120)
    try:
        yield node
    finally:
        node.stop()


def _produce(conn: Conn, topic: str, client_id: str) -> object:
    batch = build_batch([Record(-1, int(time.time() * 1000), None, VALUE, [])])
    return conn.request(p9.ProduceRequest(
        transactional_id=None, acks=i16(1), timeout=datetime.timedelta(seconds=10),
        topic_data=(p9.TopicProduceData(name=topic, partition_data=(
            p9.PartitionProduceData(index=i32(0), records=batch),)),)), client_id=client_id)


def _fetch(conn: Conn, topic: str, client_id: str) -> object:
    return conn.request(f12.FetchRequest(
        replica_id=i32(-1), max_wait=datetime.timedelta(milliseconds=100), min_bytes=i32(1),
        max_bytes=i32(10_000_000), isolation_level=i8(0), session_id=i32(0),
        session_epoch=i32(-1), topics=(f12.FetchTopic(topic=topic, partitions=(
            f12.FetchPartition(partition=i32(0), current_leader_epoch=i32(-1),
                               fetch_offset=i64(0), last_fetched_epoch=i32(-1),
                               log_start_offset=i64(-1), partition_max_bytes=i32(10_000_000)),
        )),), forgotten_topics_data=(), rack_id=""), client_id=client_id)


def _assert_muted(conn: Conn) -> None:
    """A request sent now is not answered while the channel is muted (the throttle is many
    seconds; we look for one), and is answered once it is over."""
    conn._cid += 1
    cid = conn._cid
    conn.send(frame(request_payload(av3.ApiVersionsRequest(
        client_software_name="t", client_software_version="1"), cid, "t")))
    conn.sock.settimeout(1.0)
    with pytest.raises(socket.timeout):
        conn.sock.recv(1, socket.MSG_PEEK)
    conn.sock.settimeout(60)
    payload = conn.recv_frame()
    assert struct.unpack(">i", payload[:4])[0] == cid


def test_quota_cli_and_produce_fetch_throttling(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic("q-t", 1, 1)])["q-t"].result(30)
    ok("quota", "set", "--client-id", "slow", "--add", "producer_byte_rate=1024",
       "--add", "consumer_byte_rate=1024", bootstrap=b)
    ok("quota", "set", "--user-default", "--add", "request_percentage=50", bootstrap=b)
    rows = json.loads(ok("quota", "describe", "--format", "json", bootstrap=b))
    assert {(r["client_id"], r["quota"], r["value"]) for r in rows} >= {
        ("slow", "producer_byte_rate", 1024), ("slow", "consumer_byte_rate", 1024)}
    bad = odradek("quota", "set", "--client-id", "slow", "--add", "producer_byte_rate=1.5",
                  bootstrap=b)
    assert bad.returncode != 0 and "INVALID_REQUEST" in bad.stderr

    with Conn(broker.port) as conn:
        # a client without a quota is never throttled
        assert _produce(conn, "q-t", "fast").throttle_time.total_seconds() == 0
    with Conn(broker.port) as conn:
        r = _produce(conn, "q-t", "slow")
        assert r.responses[0].partition_responses[0].error_code == 0  # appended, then throttled
        assert r.throttle_time.total_seconds() > 0
        _assert_muted(conn)
    with Conn(broker.port) as conn:
        r = _fetch(conn, "q-t", "slow")
        # throttled: answered empty (the bytes were not charged), with the throttle time
        assert r.throttle_time.total_seconds() > 0
        assert all(not p.records for t in r.responses for p in t.partitions)
        _assert_muted(conn)

    ok("quota", "set", "--client-id", "slow", "--delete", "producer_byte_rate",
       "--delete", "consumer_byte_rate", bootstrap=b)
    rows = json.loads(ok("quota", "describe", "--client-id", "slow", "--format", "json",
                         bootstrap=b))
    assert rows == []


def test_controller_mutation_and_request_quotas(broker: BrokerProcess) -> None:
    from kio.schema.create_topics.v7 import request as ct7
    from kio.schema.metadata.v12 import request as md12

    b = broker.bootstrap
    ok("quota", "set", "--client-id", "admin-slow", "--add", "controller_mutation_rate=1",
       bootstrap=b)
    ok("quota", "set", "--client-id", "busy", "--add", "request_percentage=0.000001",
       bootstrap=b)

    def create(conn: Conn, name: str) -> object:
        return conn.request(ct7.CreateTopicsRequest(
            topics=(ct7.CreatableTopic(name=name, num_partitions=i32(20),
                                       replication_factor=i16(1), assignments=(),
                                       configs=()),),
            timeout=datetime.timedelta(seconds=30), validate_only=False), client_id="admin-slow")

    with Conn(broker.port) as first, Conn(broker.port) as second:
        r = create(first, "mut-a")  # under the quota: done, then charged 20 partitions
        assert r.topics[0].error_code == 0 and r.throttle_time.total_seconds() > 0
        r = create(second, "mut-b")  # strict (v6+): over the quota, not done
        assert r.topics[0].error_code == 89  # THROTTLING_QUOTA_EXCEEDED
        assert r.throttle_time.total_seconds() > 0
    with Conn(broker.port) as conn:
        conn.request(md12.MetadataRequest(topics=(), allow_auto_topic_creation=False,
                                          include_topic_authorized_operations=False),
                     client_id="busy")
    with Conn(broker.port) as conn:
        # the first request's time is over 0.000001% of a thread: the next one is throttled
        r = conn.request(md12.MetadataRequest(topics=(), allow_auto_topic_creation=False,
                                              include_topic_authorized_operations=False),
                         client_id="busy")
        assert r.throttle_time.total_seconds() > 0
        _assert_muted(conn)
