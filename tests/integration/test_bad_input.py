"""Bad input against a live node, raw sockets, while a real client keeps working beside it.

Every case expects what Apache Kafka does (an error code in the response, or closing the
connection) plus one log line naming the problem or the connection; afterwards the node
still serves, and the background confluent-kafka producer/consumer (tests/support/
background.py) saw no error and got every record back intact.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator

import psutil
import pytest
from confluent_kafka import Consumer, TopicPartition
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from tests.support import requests as rq
from tests.support import wire
from tests.support.background import BackgroundTraffic, create_topic
from tests.support.broker import BrokerProcess
from tests.support.nodelog import NodeLog

MAX_REQUEST = 1048576
TARGET = "bad-input-target"
FUZZ_TARGET = "fuzz-target"
INVALID_NAMES = ["bad/name", "..", ".", "a" * 250, "", "bad name", "bad\u00e9"]
CONNECTION_WORDS = ["closing", "closed", "disconnect"]


class Env:
    def __init__(self, node: BrokerProcess, traffic: BackgroundTraffic) -> None:
        self.node = node
        self.traffic = traffic
        self.log = NodeLog(node.log_path)

    def assert_healthy(self) -> None:
        assert self.node.alive(), f"node died:\n{self.node.log()}"
        with wire.Conn(self.node.port) as c:
            resp = c.request(rq.api_versions_v3())
            assert resp.error_code == ErrorCode.none
            assert resp.api_keys
        assert not self.traffic.errors, f"background client saw errors: {self.traffic.errors[:10]}"

    def assert_logged(self, mark: int, needles: list[str]) -> None:
        lines = self.log.wait_for(mark, needles)
        new = self.log.since(mark)
        assert lines, (f"no new node log line mentions any of {needles!r}; "
                       f"new log output was:\n{new[-3000:]}")
        assert "Traceback" not in new, f"bad input produced a traceback:\n{new[-5000:]}"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    node = BrokerProcess(tmp_path_factory.mktemp("bad-input") / "data",
                         settings={"socket.request.max.bytes": str(MAX_REQUEST)})
    node.start()
    create_topic(node.bootstrap, TARGET, 1)
    create_topic(node.bootstrap, FUZZ_TARGET, 1)
    traffic = BackgroundTraffic(node.bootstrap, "background")
    traffic.start()
    try:
        yield Env(node, traffic)
        traffic.stop_and_check()
        assert node.alive()
    finally:
        traffic.__exit__()
        if node.alive():
            assert node.stop() == 0, node.log()


def peer_needles(c: wire.Conn, *extra: str) -> list[str]:
    return [f":{c.local_port}", f" {c.local_port}", f"={c.local_port}", *extra]


def high_watermark(node: BrokerProcess, topic: str, partition: int = 0) -> int:
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "unused",
                  "enable.auto.commit": False})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)[1])
    finally:
        c.close()


def now_ms() -> int:
    return int(time.time() * 1000)


# --- framing ------------------------------------------------------------------------------

@pytest.mark.timeout(60)
def test_truncated_frame_then_close(env: Env) -> None:
    mark = env.log.mark()
    c = wire.Conn(env.node.port)
    port = c.local_port
    c.send(struct.pack(">i", 100) + wire.raw_header_v1(18, 0, 1)[:6])
    c.close()
    env.assert_healthy()
    env.assert_logged(mark, [f":{port}", f" {port}", f"={port}", "truncat", "incomplete",
                             "partial", "mid-frame"])


@pytest.mark.timeout(60)
def test_frame_too_short_for_a_header(env: Env) -> None:
    mark = env.log.mark()
    with wire.Conn(env.node.port) as c:
        c.send(wire.frame(b"\x00\x12\x00"))
        assert c.wait_closed(), "node kept a connection whose frame cannot hold a request header"
        env.assert_logged(mark, peer_needles(c, "header", "truncat", "malformed"))
    env.assert_healthy()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("size", [2**31 - 1, 10 * 1024 * 1024, MAX_REQUEST + 1, -1, -(2**31)])
def test_oversized_or_negative_frame_size(env: Env, size: int) -> None:
    proc = psutil.Process(env.node.proc.pid)  # type: ignore[union-attr]
    rss_before = proc.memory_info().rss
    mark = env.log.mark()
    with wire.Conn(env.node.port) as c:
        c.send(struct.pack(">i", size) + wire.raw_header_v1(3, 1, 1))
        assert c.wait_closed(), f"node did not close a connection announcing a {size}-byte frame"
        env.assert_logged(mark, peer_needles(c, str(size)))
    grown = proc.memory_info().rss - rss_before
    assert grown < 32 * 1024 * 1024, f"node grew {grown} bytes after a {size}-byte frame header"
    env.assert_healthy()


# --- declared lengths larger than the bytes left (CVE-2022-34917 class) -------------------

def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _str(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def _cstr(s: str) -> bytes:
    return _uvarint(len(s) + 1) + s.encode()


LYING_LENGTHS = {
    "client-id-length": struct.pack(">hhih", 18, 0, 1, 32767) + b"abc",
    "metadata-v1-topics-array": wire.raw_header_v1(3, 1, 1) + struct.pack(">i", 0x7FFFFFFF),
    "metadata-v1-topic-string": wire.raw_header_v1(3, 1, 1) + struct.pack(">ih", 1, 32767) + b"ab",
    "metadata-v9-compact-array": wire.raw_header_v1(3, 9, 1) + b"\x00" + _uvarint(0x7FFFFFFF),
    "metadata-v9-compact-string": wire.raw_header_v1(3, 9, 1) + b"\x00\x02" + _uvarint(100000) + b"ab",
    "produce-v7-topics-array": wire.raw_header_v1(0, 7, 1) + struct.pack(">hhii", -1, 1, 1000, 0x7FFFFFFF),
    "produce-v7-records-bytes": wire.raw_header_v1(0, 7, 1) + struct.pack(">hhii", -1, 1, 1000, 1)
    + _str(TARGET) + struct.pack(">iii", 1, 0, 0x7FFFFFFF) + b"\x00" * 16,
    "produce-v9-compact-records": wire.raw_header_v1(0, 9, 1) + b"\x00" + b"\x00" + struct.pack(">hi", 1, 1000)
    + b"\x02" + _cstr(TARGET) + b"\x02" + struct.pack(">i", 0) + _uvarint(0x7FFFFFF0) + b"\x00" * 16,
    "tagged-field-length": wire.raw_header_v1(18, 3, 1) + b"\x01" + b"\x00" + _uvarint(0x7FFFFFF0) + b"x",
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", sorted(LYING_LENGTHS))
def test_declared_length_larger_than_bytes_left(env: Env, case: str) -> None:
    proc = psutil.Process(env.node.proc.pid)  # type: ignore[union-attr]
    rss_before = proc.memory_info().rss
    hw_before = high_watermark(env.node, TARGET)
    mark = env.log.mark()
    with wire.Conn(env.node.port) as c:
        c.send(wire.frame(LYING_LENGTHS[case]))
        assert c.wait_closed(), f"{case}: node did not close the connection (Kafka does)"
        env.assert_logged(mark, peer_needles(c, "length", "malformed", "truncat", "decode",
                                             "parse", "invalid request"))
    grown = proc.memory_info().rss - rss_before
    assert grown < 32 * 1024 * 1024, f"{case}: node grew {grown} bytes"
    assert high_watermark(env.node, TARGET) == hw_before, f"{case}: something was appended"
    env.assert_healthy()


@pytest.mark.timeout(60)
def test_batch_length_beyond_the_records_bytes(env: Env) -> None:
    batch = bytearray(wire.build_batch_v2([wire.Rec(b"k", b"v" * 50, [], now_ms())]))
    struct.pack_into(">i", batch, 8, 1_000_000)  # batch length far beyond the bytes sent
    hw_before = high_watermark(env.node, TARGET)
    mark = env.log.mark()
    with wire.Conn(env.node.port) as c:
        resp = c.request(rq.produce(7, TARGET, 0, bytes(batch)))
    (part,) = resp.responses[0].partition_responses
    # Kafka finds no complete batch: INVALID_RECORD (87); CORRUPT_MESSAGE (2) is its other answer
    # for unreadable record framing.
    assert part.error_code in (ErrorCode.invalid_record, ErrorCode.corrupt_message), part
    assert high_watermark(env.node, TARGET) == hw_before
    env.assert_healthy()
    env.assert_logged(mark, [TARGET, "batch", "corrupt", "invalid record"])


# --- unknown keys, unsupported versions -------------------------------------------------

@pytest.mark.timeout(60)
def test_unknown_api_key_disconnects(env: Env) -> None:
    mark = env.log.mark()
    with wire.Conn(env.node.port) as c:
        c.send(wire.frame(wire.raw_header_v1(9999, 0, 1) + b"\x00" * 8))
        assert c.wait_closed(), "node did not close a connection sending api key 9999"
        env.assert_logged(mark, peer_needles(c, "9999"))
    env.assert_healthy()


@pytest.mark.timeout(60)
def test_unsupported_metadata_version_disconnects(env: Env) -> None:
    mark = env.log.mark()
    with wire.Conn(env.node.port) as c:
        c.send(wire.frame(wire.raw_header_v1(3, 99, 1) + struct.pack(">i", -1)))
        assert c.wait_closed(), "node did not close a connection sending Metadata v99"
        env.assert_logged(mark, peer_needles(c, "version 99", "v99", "version=99", "unsupported"))
    env.assert_healthy()


@pytest.mark.timeout(60)
def test_api_versions_v99_gets_v0_error_with_the_supported_list(env: Env) -> None:
    """Kafka answers an ApiVersions it does not know with v0 and UNSUPPORTED_VERSION, then
    keeps the connection so the client can retry at a version both know. (This is ordinary
    negotiation by newer clients, so no log line is demanded here.)"""
    from kio.schema.api_versions.v0.response import ApiVersionsResponse
    from kio.serial import entity_reader

    with wire.Conn(env.node.port) as c:
        # a v99 body might carry anything: send the v3 body a new client would
        c.send(wire.frame(wire.raw_header_v1(18, 99, 42) + b"\x00" + b"\x05odrad\x041.00\x00"))
        payload = c.recv_frame()
        (cid,) = struct.unpack_from(">i", payload)
        assert cid == 42
        body, size = entity_reader(ApiVersionsResponse)(payload, 4)
        assert 4 + size == len(payload), "the v0 response has trailing bytes"
        assert body.error_code == ErrorCode.unsupported_version
        versions = {a.api_key: (a.min_version, a.max_version) for a in body.api_keys}
        assert 18 in versions and versions[18][0] == 0 and versions[18][1] >= 3, versions
        assert 0 in versions and 3 in versions and 1 in versions, versions
        # the connection stays usable
        resp = c.request(rq.api_versions_v0())
        assert resp.error_code == ErrorCode.none
        assert {a.api_key: (a.min_version, a.max_version) for a in resp.api_keys} == versions
    env.assert_healthy()


# --- record batches ----------------------------------------------------------------------

@pytest.mark.timeout(60)
@pytest.mark.parametrize("version", [3, 7, 9])
def test_corrupt_crc_is_refused_and_nothing_is_stored(env: Env, version: int) -> None:
    good = wire.build_batch_v2([wire.Rec(b"k%d" % i, b"value-%d" % i, [("h", b"1")], now_ms())
                                for i in range(5)])
    bad = wire.flip_payload_byte(good)
    assert bad != good
    hw_before = high_watermark(env.node, TARGET)
    mark = env.log.mark()
    with wire.Conn(env.node.port) as c:
        resp = c.request(rq.produce(version, TARGET, 0, bad))
        (part,) = resp.responses[0].partition_responses
        assert part.error_code == ErrorCode.corrupt_message, part
        assert high_watermark(env.node, TARGET) == hw_before, "a corrupt batch was appended"
        # the same connection then produces the intact batch at the old end
        resp = c.request(rq.produce(version, TARGET, 0, good))
        (part,) = resp.responses[0].partition_responses
        assert part.error_code == ErrorCode.none, part
        assert part.base_offset == hw_before
    assert high_watermark(env.node, TARGET) == hw_before + 5
    c2 = Consumer({"bootstrap.servers": env.node.bootstrap, "group.id": "unused",
                   "enable.auto.commit": False})
    try:
        c2.assign([TopicPartition(TARGET, 0, hw_before)])
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 5 and time.monotonic() < deadline:
            got += [m for m in c2.consume(5, timeout=0.5) if m.error() is None]
        assert [(m.offset(), m.key(), m.value()) for m in got] == [
            (hw_before + i, b"k%d" % i, b"value-%d" % i) for i in range(5)]
    finally:
        c2.close()
    env.assert_healthy()
    env.assert_logged(mark, ["crc", "corrupt", "checksum"])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("version", [3, 7])
def test_magic_1_message_set_is_refused(env: Env, version: int) -> None:
    """Kafka: "Produce requests with version >= 3 are only allowed to contain record batches
    with magic version 2" -> InvalidRecordException -> INVALID_RECORD (87)."""
    hw_before = high_watermark(env.node, TARGET)
    mark = env.log.mark()
    with wire.Conn(env.node.port) as c:
        resp = c.request(rq.produce(version, TARGET, 0, wire.build_message_set_v1(b"k", b"v", now_ms())))
    (part,) = resp.responses[0].partition_responses
    assert part.error_code == ErrorCode.invalid_record, part
    assert high_watermark(env.node, TARGET) == hw_before
    env.assert_healthy()
    env.assert_logged(mark, ["magic"])


# --- topic names, client ids ------------------------------------------------------------

@pytest.mark.timeout(60)
@pytest.mark.parametrize("version", [4, 5])
def test_create_topics_with_invalid_names(env: Env, version: int) -> None:
    good = f"valid-name-v{version}"
    mark = env.log.mark()
    with wire.Conn(env.node.port) as c:
        resp = c.request(rq.create_topics(version, [*INVALID_NAMES, good]))
    codes = {t.name: t.error_code for t in resp.topics}
    assert codes == {**dict.fromkeys(INVALID_NAMES, ErrorCode.invalid_topic_exception),
                     good: ErrorCode.none}, codes
    env.assert_healthy()
    env.assert_logged(mark, ["bad/name"])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("version", [1, 9])
def test_metadata_auto_create_with_invalid_names(env: Env, version: int) -> None:
    mark = env.log.mark()
    req = rq.metadata_v1(INVALID_NAMES) if version == 1 else rq.metadata_v9(INVALID_NAMES)
    with wire.Conn(env.node.port) as c:
        resp = c.request(req)
    codes = {t.name: t.error_code for t in resp.topics}
    assert codes == dict.fromkeys(INVALID_NAMES, ErrorCode.invalid_topic_exception), codes
    assert all(not t.partitions for t in resp.topics)
    env.assert_healthy()
    env.assert_logged(mark, ["bad/name"])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("client_id", ["", None])
def test_empty_and_null_client_ids_are_accepted(env: Env, client_id: str | None) -> None:
    with wire.Conn(env.node.port) as c:
        for req in (rq.api_versions_v0(), rq.api_versions_v3(), rq.metadata_v1([TARGET]),
                    rq.metadata_v9([TARGET], auto_create=False)):
            resp = c.request(req, client_id=client_id)
            if hasattr(resp, "error_code"):
                assert resp.error_code == ErrorCode.none
            else:
                assert [(t.name, t.error_code) for t in resp.topics] == [(TARGET, ErrorCode.none)]
        batch = wire.build_batch_v2([wire.Rec(None, b"no client id", [], now_ms())])
        resp = c.request(rq.produce(7, TARGET, 0, batch), client_id=client_id)
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.none
    env.assert_healthy()


# --- fuzzing ------------------------------------------------------------------------------

def _valid_payloads() -> list[bytes]:
    batch = wire.build_batch_v2([wire.Rec(b"k", b"fuzz", [("h", b"v")], 1_700_000_000_000)])
    reqs = [rq.api_versions_v0(), rq.api_versions_v3(), rq.metadata_v1([FUZZ_TARGET]),
            rq.metadata_v9([FUZZ_TARGET], auto_create=False), rq.metadata_v1(None),
            rq.produce(3, FUZZ_TARGET, 0, batch), rq.produce(7, FUZZ_TARGET, 0, batch),
            rq.produce(9, FUZZ_TARGET, 0, batch)]
    return [wire.request_payload(r, 1234) for r in reqs]


VALID = _valid_payloads()


@st.composite
def fuzz_input(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["random-frame", "random-stream", "mutated"]))
    if kind == "random-frame":
        return wire.frame(draw(st.binary(max_size=400)))
    if kind == "random-stream":
        return draw(st.binary(min_size=1, max_size=400))
    payload = bytearray(draw(st.sampled_from(VALID)))
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["set", "insert", "delete", "truncate"]))
        pos = draw(st.integers(0, max(0, len(payload) - 1)))
        if op == "set" and payload:
            payload[pos] = draw(st.integers(0, 255))
        elif op == "insert":
            payload[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete" and payload:
            del payload[pos:pos + draw(st.integers(1, 8))]
        elif op == "truncate":
            del payload[pos:]
    data = wire.frame(bytes(payload))
    if draw(st.booleans()) and len(data) > 4:
        data = data[:draw(st.integers(1, len(data) - 1))]  # and cut the frame itself short
    return data


@pytest.mark.timeout(600)
def test_fuzz_frames_never_hurt_the_node(env: Env) -> None:
    mark = env.log.mark()

    @settings(max_examples=300, deadline=None, phases=[Phase.explicit, Phase.generate],
              suppress_health_check=list(HealthCheck), database=None)
    @given(data=fuzz_input())
    def one(data: bytes) -> None:
        with wire.Conn(env.node.port) as c:
            try:
                c.send(data)
                c.sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass  # the node may have closed on a bad prefix already
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    payload = c.recv_frame()
                except wire.Disconnected:
                    break
                except TimeoutError:
                    continue
                assert len(payload) >= 4, "a response frame too short for its header"
            else:
                raise AssertionError(f"node kept the connection open after EOF: {data[:64]!r}")
        assert env.node.alive(), f"node died on {data!r}"

    one()
    env.assert_healthy()
    new = env.log.since(mark)
    assert "Traceback" not in new, f"fuzzing produced a traceback:\n{new[-5000:]}"
