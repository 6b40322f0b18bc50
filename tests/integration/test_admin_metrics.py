"""Issue 18: the admin HTTP of a real `odradek serve` node, and its metrics moving by the
right amounts as real clients produce and consume."""

from __future__ import annotations

import datetime
import json
import socket
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.fetch.v11 import request as f11
from kio.static.primitive import i8, i32, i64

from tests.support.broker import ODRADEK, BrokerProcess, free_port
from tests.support.metrics import get, get_json, scrape, value, wait_for
from tests.support.requests import api_versions_v3, produce
from tests.support.wire import Conn, Rec, build_batch_v2

pytestmark = pytest.mark.timeout(240)

ERRORS = "kafka_network_requestmetrics_errors_total"
OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION = 1, 3


def fetch_v11(topic: str, offset: int) -> f11.FetchRequest:
    return f11.FetchRequest(
        replica_id=i32(-1), max_wait=datetime.timedelta(0), min_bytes=i32(1),
        max_bytes=i32(1 << 20), isolation_level=i8(0), session_id=i32(0),
        session_epoch=i32(-1), rack_id="", forgotten_topics_data=(),
        topics=(f11.FetchTopic(topic=topic, partitions=(f11.FetchPartition(
            partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(offset),
            log_start_offset=i64(-1), partition_max_bytes=i32(1 << 20)),)),))


@pytest.fixture
def node(tmp_path: Path):  # type: ignore[no-untyped-def]
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        wait_for(lambda: get(broker.admin_url + "/health/ready")[0] == 200, "ready")
        yield broker
    finally:
        broker.stop()


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        fut.result(30)


def test_health_cluster_and_partitions(node: BrokerProcess) -> None:
    status, live = get_json(node.admin_url + "/health/live")
    assert status == 200 and live["status"] == "live"
    status, ready = get_json(node.admin_url + "/health/ready")
    assert status == 200 and ready["status"] == "ready", ready
    create_topic(node.bootstrap, "adm", 3)
    status, cluster = get_json(node.admin_url + "/v1/cluster")
    assert status == 200
    assert [b["id"] for b in cluster["brokers"]] == [1]
    assert cluster["brokers"][0]["endpoints"][0]["port"] == node.port
    assert cluster["quorum"]["leader_id"] == 1
    status, parts = get_json(node.admin_url + "/v1/partitions?topic=adm")
    assert status == 200 and parts["total"] == 3
    assert [p["partition"] for p in parts["partitions"]] == [0, 1, 2]
    assert all(p["leader"] == 1 and p["isr"] == [1] for p in parts["partitions"])
    status, page = get_json(node.admin_url + "/v1/partitions?topic=adm&offset=1&limit=1")
    assert status == 200 and [p["partition"] for p in page["partitions"]] == [1]


@pytest.mark.parametrize(("path", "status", "says"), [
    ("/nope", 404, "no such endpoint"),
    ("/v1/partitions?limit=abc", 400, "limit must be an integer"),
    ("/v1/partitions?limit=0", 400, "between 1 and"),
    ("/v1/partitions?offset=-5", 400, "between 0 and"),
    ("/v1/partitions?topic=bad%2Fname", 400, "invalid topic name"),
    ("/v1/partitions?topic=absent", 404, "unknown topic"),
    ("/v1/partitions?bogus=1", 400, "unknown parameter"),
    ("/v1/partitions?topic=" + "a" * 20000, 414, "over the limit"),
])
def test_bad_input_is_4xx_with_a_message(node: BrokerProcess, path: str, status: int,
                                         says: str) -> None:
    got, body = get(node.admin_url + path)
    assert got == status, body[:300]
    assert says in json.loads(body)["error"]
    assert get(node.admin_url + "/health/ready")[0] == 200


def test_hostile_http_leaves_the_node_serving(node: BrokerProcess) -> None:
    # a request line far over the head limit, garbage, and a wrong method
    for raw in (b"GET /" + b"x" * 100_000 + b" HTTP/1.1\r\nHost: a\r\n\r\n",
                b"\x00\x01\x02 not http at all\r\n\r\n",
                b"DELETE /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"):
        with socket.create_connection(("127.0.0.1", node.admin_port), timeout=10) as s:
            try:
                s.sendall(raw)
                answer = s.recv(200)
            except ConnectionResetError:
                answer = b""
        if answer:
            code = int(answer.split(b" ", 2)[1])
            assert 400 <= code < 500, answer
    assert get(node.admin_url + "/health/live")[0] == 200
    with Conn(node.port) as conn:
        assert conn.request(api_versions_v3()).error_code == 0


def test_produce_and_consume_move_the_counters_by_the_right_amounts(
        node: BrokerProcess) -> None:
    create_topic(node.bootstrap, "counted")
    before = scrape(node.admin_url)
    batch = build_batch_v2([Rec(b"k%d" % i, b"value-%d" % i, [], 1_700_000_000_000 + i)
                            for i in range(7)])
    with Conn(node.port) as conn:
        for _ in range(3):
            assert conn.request(api_versions_v3()).error_code == 0
        resp = conn.request(produce(9, "counted", 0, batch))
        assert resp.responses[0].partition_responses[0].error_code == 0
        # a produce to a partition that does not exist: a failed produce of no topic here
        bad = conn.request(produce(9, "counted", 5, batch))
    after = scrape(node.admin_url)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("kafka_server_brokertopicmetrics_messagesin_total", topic="counted") == 7
    assert delta("kafka_server_brokertopicmetrics_messagesin_total") == 7
    assert delta("kafka_server_brokertopicmetrics_bytesin_total", topic="counted") == len(batch)
    assert delta("kafka_server_brokertopicmetrics_totalproducerequests_total",
                 topic="counted") == 1
    assert delta("kafka_network_requestmetrics_requests_total", request="ApiVersions",
                 version="3") == 3
    assert delta("kafka_network_requestmetrics_requests_total", request="Produce",
                 version="9") == 2
    for kind in ("totaltimems", "localtimems", "requestqueuetimems"):
        assert delta(f"kafka_network_requestmetrics_{kind}_count", request="Produce") == 2
        assert delta(f"kafka_network_requestmetrics_{kind}_bucket", request="Produce",
                     le="+Inf") == 2
        assert delta(f"kafka_network_requestmetrics_{kind}_sum", request="Produce") >= 0
    # errors_total (Kafka's ErrorsPerSec): the codes the responses carried, NONE once for
    # each response without another code
    assert bad.responses[0].partition_responses[0].error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert delta(ERRORS, request="Produce", error="UNKNOWN_TOPIC_OR_PARTITION") == 1
    assert delta(ERRORS, request="Produce", error="NONE") == 1
    assert delta(ERRORS, request="ApiVersions", error="NONE") == 3
    assert value(after, "kafka_log_log_size", topic="counted", partition="0") == len(batch)
    assert value(after, "kafka_log_log_logendoffset", topic="counted", partition="0") == 7
    assert value(after, "kafka_log_log_numlogsegments", topic="counted", partition="0") == 1
    assert value(after, "kafka_topic_partition_current_offset", topic="counted",
                 partition="0") == 7

    # a consumer reads the batch once: bytes out by exactly its size
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition("counted", 0, 0)])
        got = 0
        deadline = time.monotonic() + 60
        while got < 7 and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                got += 1
        assert got == 7
        wait_for(lambda: value(scrape(node.admin_url),
                               "kafka_server_brokertopicmetrics_bytesout_total",
                               topic="counted") - value(
            before, "kafka_server_brokertopicmetrics_bytesout_total", topic="counted")
            == len(batch), "bytes out to equal the batch")
    finally:
        consumer.close()
    final = scrape(node.admin_url)
    assert value(final, "kafka_server_brokertopicmetrics_totalfetchrequests_total",
                 topic="counted") >= 1
    assert value(final, "kafka_network_requestmetrics_requests_total", request="Fetch",
                 version="17") >= 1 or any(
        k[0] == "kafka_network_requestmetrics_requests_total"
        and ("request", "Fetch") in k[1] for k in final)

    # fetches past the log's end answer OFFSET_OUT_OF_RANGE: one raw Fetch v11 counts exactly
    # one (Fetch's NONE is not checked: the closed consumer's last long poll may still end)
    with Conn(node.port) as conn:
        resp = conn.request(fetch_v11("counted", 1000))
        assert resp.responses[0].partitions[0].error_code == OFFSET_OUT_OF_RANGE
    ranged = scrape(node.admin_url)
    assert (value(ranged, ERRORS, request="Fetch", error="OFFSET_OUT_OF_RANGE")
            - value(final, ERRORS, request="Fetch", error="OFFSET_OUT_OF_RANGE")) == 1
    # and a real consumer asked to start there (auto.offset.reset=error: it reports the
    # error to the application instead of resetting)
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "auto.offset.reset": "error"})
    try:
        consumer.assign([TopicPartition("counted", 0, 500)])

        def counted() -> bool:
            consumer.poll(0.5)
            return value(scrape(node.admin_url), ERRORS, request="Fetch",
                         error="OFFSET_OUT_OF_RANGE") > value(
                ranged, ERRORS, request="Fetch", error="OFFSET_OUT_OF_RANGE")

        wait_for(counted, "the consumer's out-of-range fetch to be counted")
    finally:
        consumer.close()


def test_lag_metrics_match_group_describe(node: BrokerProcess) -> None:
    create_topic(node.bootstrap, "lagged", 2)
    producer = Producer({"bootstrap.servers": node.bootstrap})
    for i in range(10):
        producer.produce("lagged", b"v%d" % i, partition=i % 2)
    producer.flush(30)
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "g-lag",
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition("lagged", 0, 2), TopicPartition("lagged", 1, 4)],
                        asynchronous=False)
    finally:
        consumer.close()
    out = subprocess.run([*ODRADEK, "group", "describe", "g-lag", "-b", node.bootstrap,
                          "--format", "json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    described_json = json.loads(out.stdout)
    rows = described_json["rows"]
    described = {(r["topic"], int(r["partition"])): int(r["lag"]) for r in rows}
    assert described == {("lagged", 0): 3, ("lagged", 1): 1}
    samples = scrape(node.admin_url)
    for (topic, partition), lag in described.items():
        assert value(samples, "kafka_consumergroup_lag", consumergroup="g-lag", topic=topic,
                     partition=str(partition)) == lag
    assert value(samples, "kafka_consumergroup_lag_sum", consumergroup="g-lag",
                 topic="lagged") == 4
    assert value(samples, "kafka_consumergroup_current_offset", consumergroup="g-lag",
                 topic="lagged", partition="1") == 4
    burrow = {"OK": 1, "WARN": 2, "ERR": 3}[described_json["group_status"]]
    assert value(samples, "kafka_burrow_status", group="g-lag") == burrow
    assert value(samples, "kafka_coordinator_group_groupmetadatamanager_numgroups") >= 1


def test_unservable_admin_listeners_are_refused(tmp_path: Path) -> None:
    def serve(*settings: str) -> subprocess.CompletedProcess[str]:
        cmd = [*ODRADEK, "serve", "--data-dir", str(tmp_path / "d"),
               "--set", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
               "--set", "console.listeners="]
        for s in settings:
            cmd += ["--set", s]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60)

    res = serve(f"admin.listeners=https://127.0.0.1:{free_port()}")
    assert res.returncode == 2 and "plain HTTP only" in res.stderr, res.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        res = serve(f"admin.listeners=http://127.0.0.1:{port}")
    assert res.returncode == 2, res.stderr
    assert f"cannot listen on ADMIN://127.0.0.1:{port}" in res.stderr, res.stderr


def test_empty_admin_listeners_serve_no_http(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", settings={"admin.listeners": ""}).start()
    try:
        with Conn(broker.port) as conn:
            assert conn.request(api_versions_v3()).error_code == 0
        with pytest.raises(OSError), socket.create_connection(
                ("127.0.0.1", broker.admin_port), timeout=2):
            pass
    finally:
        broker.stop()
