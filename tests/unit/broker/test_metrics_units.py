"""Issue 18, without processes: the request stats' histograms, the collector's families
from them, the log formats, and the admin HTTP's parameter parsing (fuzzed)."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from odradek.broker import refusals
from odradek.broker.admin_config import admin_listeners_of
from odradek.broker.admin_views import BadParameter, partitions_json, readiness
from odradek.broker.config import ConfigError
from odradek.broker.logging_setup import JsonFormatter, OneLineFormatter
from odradek.broker.metrics.collector import NodeCollector
from odradek.broker.metrics.requests import BUCKETS_MS, RequestStats, Timer, request_name
from odradek.broker.node_view import NodeView
from odradek.metadata.config.broker_configs import BrokerConfig
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import parse_request_header
from tests.support.wire import raw_header_v1


def header(api_key: int, version: int, client: str = "c") -> object:
    # a trailing empty tagged-field section, for the flexible (header v2) versions
    return parse_request_header(raw_header_v1(api_key, version, 1, client) + b"\x00")


def samples(view: NodeView) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(NodeCollector(view))
    text = generate_latest(registry).decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def test_request_names_are_kafkas() -> None:
    assert [request_name(k) for k in (0, 1, 2, 3, 18, 23, 60)] == [
        "Produce", "Fetch", "ListOffsets", "Metadata", "ApiVersions", "OffsetForLeaderEpoch",
        "DescribeCluster"]


def test_histograms_count_each_request_in_its_bucket() -> None:
    stats = RequestStats()
    h = header(0, 9)
    # total 0.05 ms, 3 ms and 40 s: the first bucket, the 5 ms one, +Inf
    stats.record(h, 0.0, 0.0, 0.00005, 0.00005)
    stats.record(h, 1.0, 1.001, 1.002, 1.003)
    stats.record(h, 2.0, 2.0, 2.0, 42.0)
    stats.record(header(18, 3), 0.0, 0.0, 0.0, 0.0)
    view = NodeView(1, ("broker",), requests=stats)
    got = samples(view)
    req = frozenset({("request", "Produce")})

    def bucket(le: str) -> float:
        return got[("kafka_network_requestmetrics_totaltimems_bucket", req | {("le", le)})]

    assert bucket("0.1") == 1
    assert bucket("2.5") == 1
    assert bucket("5.0") == 2
    assert bucket("30000.0") == 2
    assert bucket("+Inf") == 3
    assert got[("kafka_network_requestmetrics_totaltimems_count", req)] == 3
    assert got[("kafka_network_requestmetrics_totaltimems_sum", req)] == pytest.approx(
        0.05 + 3 + 40_000, rel=1e-6)
    assert got[("kafka_network_requestmetrics_requestqueuetimems_sum", req)] == pytest.approx(
        1.0, rel=1e-6)
    # the local time's sum is implied: total less queue less the wait after the handler
    assert got[("kafka_network_requestmetrics_localtimems_sum", req)] == pytest.approx(
        0.05 + 1.0, rel=1e-6)
    assert got[("kafka_network_requestmetrics_localtimems_bucket", req | {("le", "0.1")})] == 2
    assert got[("kafka_network_requestmetrics_requests_total",
                frozenset({("request", "Produce"), ("version", "9")}))] == 3
    assert got[("kafka_network_requestmetrics_requests_total",
                frozenset({("request", "ApiVersions"), ("version", "3")}))] == 1
    assert len(BUCKETS_MS) + 1 == len([k for k in got if k[0].endswith("totaltimems_bucket")
                                       and ("request", "Produce") in k[1]])


class _Transport:
    def __init__(self) -> None:
        self.answers = 0

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default

    def set_write_buffer_limits(self, high: int = 0, low: int = 0) -> None:
        pass

    def writelines(self, parts: list[object]) -> None:
        self.answers += 1


def clocked(clock: Callable[[], float]) -> type[Timer]:
    """A Timer that takes its times from `clock` instead of the monotonic clock."""
    class Clocked(Timer):
        def mark_read(self, now: float | None = None) -> None:
            super().mark_read(clock())

        def record(self, header: tuple[Any, ...], now: float | None = None) -> None:
            super().record(header, clock())

        def handled(self, now: float | None = None) -> tuple[float, float, float]:
            return super().handled(clock())

    return Clocked


def test_the_servers_own_timing_counts_as_record_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's timing (Connection: one Timer call per read and one per request, first
    buckets implied) gives the same families as record() for the same times, every request
    counted once."""
    import asyncio

    from odradek.broker import server as srv
    from tests.support.wire import frame

    # reads: three produce requests at t=1.0 (answered at 1.00004, 1.003 and 3.5: queue time
    # for the second and third), one at 3.6 (answered at 7.6), then two ApiVersions of
    # versions no node serves (answered with UNSUPPORTED_VERSION, so counted) at 8.0
    reads = [(1.0, [(0, 9)] * 3, [1.00004, 1.003, 3.5]), (3.6, [(0, 9)], [7.6]),
             (8.0, [(18, 500), (18, -1)], [8.00001, 8.00002])]
    clock = iter([t for at, _, dones in reads for t in (at, *dones)]).__next__
    monkeypatch.setattr(srv, "Timer", clocked(clock))

    def dispatch(conn: object, frame: memoryview, h: object) -> object:
        return (0, [b"x"])

    measured, recorded = RequestStats(), RequestStats()

    async def serve() -> None:
        conn = srv.Connection(srv.Server(dispatch, 1 << 20, stats=measured))
        transport = _Transport()
        conn.connection_made(transport)  # type: ignore[arg-type]
        for at, keys, dones in reads:
            data = b"".join(frame(raw_header_v1(k, v, 1, "c") + b"\x00") for k, v in keys)
            buf = conn.get_buffer(-1)
            buf[:len(data)] = data
            conn.buffer_updated(len(data))
            started = at
            for (k, v), done in zip(keys, dones, strict=True):
                recorded.record(header(k, v), at, started, done, done)
                started = done
            await asyncio.sleep(0)
            assert transport.answers >= 1
    asyncio.run(serve())
    assert measured.apis() == recorded.apis() == [(0, {9: 4}), (18, {-1: 1, 500: 1})]
    assert samples(NodeView(1, ("broker",), requests=measured)) == samples(
        NodeView(1, ("broker",), requests=recorded))
    for kind in ("queue", "local", "total"):
        assert measured.buckets(kind, 0) == recorded.buckets(kind, 0)
        assert sum(measured.buckets(kind, 0)) == 4
    assert measured.buckets("total", 0)[0] == 1  # the 0.04 ms one: implied, never written
    assert measured.seconds("total", 0) == pytest.approx(0.00004 + 0.003 + 2.5 + 4.0, rel=1e-9)
    assert measured.seconds("queue", 0) == pytest.approx(0.00004 + 0.003, rel=1e-9)
    assert measured.seconds("local", 0) == pytest.approx(0.00004 + 0.00296 + 2.497 + 4.0,
                                                         rel=1e-9)


def test_slow_requests_are_logged_with_client_api_version_and_time(
        caplog: pytest.LogCaptureFixture) -> None:
    stats = RequestStats(slow_ms=100)
    with caplog.at_level(logging.WARNING, "odradek.requests"):
        stats.record(header(1, 11, "fast-one"), 0.0, 0.0, 0.05, 0.05)
        stats.record(header(1, 11, "slow-one"), 0.0, 0.001, 0.2, 0.25)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1
    assert "FETCH v11" in lines[0] and "'slow-one'" in lines[0] and "250.0 ms" in lines[0]


def test_readiness_names_what_is_missing() -> None:
    view = NodeView(1, ("broker", "controller"))
    assert "the node is still starting" in readiness(view)
    view.started = True
    assert readiness(view) == []
    view.stopping = True
    assert readiness(view) == ["the node is stopping"]


def test_text_log_lines_are_one_per_event() -> None:
    try:
        raise ValueError("two\nlines")
    except ValueError:
        record = logging.LogRecord("odradek.x", logging.ERROR, __file__, 1, "failed:\n%s",
                                   ("here",), sys.exc_info())
    text = OneLineFormatter().format(record)
    assert "\n" not in text and "failed: | here" in text and "ValueError: two | lines" in text
    event = json.loads(JsonFormatter().format(record))
    assert event["level"] == "ERROR" and event["logger"] == "odradek.x"
    assert event["message"] == "failed:\nhere" and "ValueError" in event["exc"]
    assert event["time"].endswith("Z")


@pytest.mark.parametrize(("spec", "ok"), [
    ("http://127.0.0.1:9644", True), ("", True), ("http://[::1]:0", True),
    ("https://127.0.0.1:9644", False), ("ADMIN://127.0.0.1:9644", False),
    ("http://127.0.0.1:9644,http://127.0.0.2:9644", False), ("http://h:99999", False),
    ("127.0.0.1:9644", False),
])
def test_admin_listeners(spec: str, ok: bool) -> None:
    config = BrokerConfig({"admin.listeners": spec})
    if ok:
        admin_listeners_of(config)
    else:
        with pytest.raises(ConfigError):
            admin_listeners_of(config)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=20), st.text(max_size=300), max_size=4))
def test_partition_query_parameters_fuzzed(params: dict[str, str]) -> None:
    """Any parameters: an answer or a BadParameter with a message, never another error."""
    view = NodeView(1, ("broker", "controller"))
    try:
        out = partitions_json(view, params)
    except BadParameter as exc:
        assert str(exc)
        return
    assert out["partitions"] == [] and 1 <= out["limit"] <= 10_000


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_admin_listeners_fuzzed(spec: str) -> None:
    try:
        config = BrokerConfig({"admin.listeners": spec})
    except Exception as exc:  # the config table refused it
        assert str(exc)
        return
    try:
        for lst in admin_listeners_of(config):
            assert lst.name == "ADMIN" and 0 <= lst.port <= 65535
    except ConfigError as exc:
        assert str(exc)


def test_errors_count_each_code_a_response_carries_and_none_per_clean_response(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(refusals, "ERRORS", {})
    monkeypatch.setattr(refusals, "ERRED", {})
    stats = RequestStats()
    for _ in range(5):
        stats.record(header(0, 9), 0.0, 0.0, 0.0, 0.0)
    stats.record(header(3, 12), 0.0, 0.0, 0.0, 0.0)
    # one Produce with two partitions refused and one appended, one with one refused
    refusals.count_codes(0, [ErrorCode.unknown_topic_or_partition, ErrorCode.none,
                             ErrorCode.unknown_topic_or_partition])
    refusals.count_codes(0, [ErrorCode.not_enough_replicas])
    refusals.count_codes(0, [ErrorCode.none])  # no error: nothing counted, NONE stays
    # a Metadata response through common.respond's walk: a topic's code (routine, not logged)
    refusals.REFUSALS.response(header(3, 12), {"error_code": 0, "topics": [
        {"error_code": ErrorCode.unknown_topic_or_partition, "name": "x", "partitions": []}]})
    got = samples(NodeView(1, ("broker",), requests=stats))

    def errors(request: str, error: str) -> float:
        return got.get(("kafka_network_requestmetrics_errors_total",
                        frozenset({("request", request), ("error", error)})), 0.0)

    assert errors("Produce", "UNKNOWN_TOPIC_OR_PARTITION") == 2
    assert errors("Produce", "NOT_ENOUGH_REPLICAS") == 1
    assert errors("Produce", "NONE") == 3  # 5 answered, 2 of them with errors
    assert errors("Metadata", "UNKNOWN_TOPIC_OR_PARTITION") == 1
    assert errors("Metadata", "NONE") == 0


def test_pipelined_reads_bucket_as_record_does(monkeypatch: pytest.MonkeyPatch,
                                               caplog: pytest.LogCaptureFixture) -> None:
    """The server's queued requests (each one's handler starts where the previous one of its
    read ended) count what record() counts: totals that cross several buckets within a
    read, a later answer (a task) in the middle of a read, handler times past the first
    bucket, and the slow log."""
    import asyncio

    from odradek.broker import server as srv
    from odradek.broker.metrics import requests as rqm
    from tests.support.wire import frame

    # each read: its time, then (api key, answer ready at, or for api key 1 the handler's
    # return and the later answer's time)
    reads: list[tuple[float, list[tuple[int, float, float | None]]]] = [
        (10.0, [(0, 10.0002, None), (0, 10.00035, None), (0, 10.0004, None),
                (0, 10.02, None)]),
        (20.0, [(0, 20.00005, None), (1, 20.003, 20.4), (0, 20.00315, None),
                (0, 20.0032, None)]),
    ]
    ticks: list[float] = []
    for at, requests in reads:
        ticks.append(at)
        ticks += [done for _, done, _ in requests]
        ticks += [later for _, _, later in requests if later is not None]
    clock = iter(ticks).__next__
    monkeypatch.setattr(srv, "Timer", clocked(clock))
    monkeypatch.setattr(rqm, "_perf", clock)  # the later answer's time

    async def later() -> tuple[int, list[bytes]]:
        return (0, [b"x"])

    def dispatch(conn: object, frame: memoryview, h: Any) -> object:
        return later() if h[0] == 1 else (0, [b"x"])

    measured, recorded = RequestStats(slow_ms=10), RequestStats(slow_ms=10)
    versions = {0: 9, 1: 11}

    async def serve() -> None:
        server = srv.Server(dispatch, 1 << 20, stats=measured)
        conn = srv.Connection(server)
        conn.connection_made(_Transport())  # type: ignore[arg-type]
        for _, requests in reads:
            data = b"".join(frame(raw_header_v1(k, versions[k], 1, "c") + b"\x00")
                            for k, _, _ in requests)
            buf = conn.get_buffer(-1)
            buf[:len(data)] = data
            conn.buffer_updated(len(data))
            for _ in range(100):  # the later answer's task and its callbacks
                await asyncio.sleep(0)
                if not server.tasks:
                    break
            await asyncio.sleep(0)

    with caplog.at_level(logging.WARNING, "odradek.requests"):
        asyncio.run(serve())
        slow_measured = len(caplog.records)
        for at, requests in reads:
            started = at
            for k, done, answered in requests:
                recorded.record(header(k, versions[k]), at, started, done,
                                done if answered is None else answered)
                started = done
    assert measured.apis() == recorded.apis() == [(0, {9: 7}), (1, {11: 1})]
    assert samples(NodeView(1, ("broker",), requests=measured)) == samples(
        NodeView(1, ("broker",), requests=recorded))
    for key in (0, 1):
        for kind in ("queue", "local", "total"):
            assert measured.buckets(kind, key) == recorded.buckets(kind, key), (key, kind)
    # Produce's totals: 0.2, 0.35, 0.4 and 20 ms, then 0.05, 3.15 and 3.2 ms; its queue
    # times 0, 0.2, 0.35, 0.4, then 0, 3 (the later Fetch's handler) and 3.15 ms
    assert measured.buckets("total", 0)[:8] == [1, 1, 2, 0, 0, 2, 0, 1]
    assert measured.buckets("queue", 0)[:6] == [2, 1, 2, 0, 0, 2]
    # the 20 ms Produce and the 400 ms Fetch, from each side
    assert slow_measured == 2 and len(caplog.records) == 4


def fetch_codes(b: Any, wanted: dict[str, list[tuple[int, int]]]) -> list[int]:
    """A Fetch v12 of (partition, offset)s per topic through the Dispatcher: its codes."""
    from odradek.protocol.apis import ApiKey

    r = b.call(ApiKey.FETCH, 12, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{
            "partition": p, "current_leader_epoch": -1, "fetch_offset": offset,
            "last_fetched_epoch": -1, "log_start_offset": -1,
            "partition_max_bytes": 1 << 20} for p, offset in parts]}
            for topic, parts in wanted.items()],
        "forgotten_topics_data": [], "rack_id": ""})
    return [p.error_code for t in r.responses for p in t.partitions]


def fetch_errors_scraped(b: Any, fetches: int) -> Callable[[str], float]:
    """errors_total{request="Fetch", error=...} as a scrape of broker `b` gives it, after
    `fetches` Fetch requests as the server counts them."""
    stats = RequestStats()
    for _ in range(fetches):
        stats.record(header(1, 12), 0.0, 0.0, 0.0, 0.0)
    got = samples(NodeView(1, ("broker",), ctx=b.ctx, requests=stats))

    def counted(error: str) -> float:
        return got.get(("kafka_network_requestmetrics_errors_total",
                        frozenset({("request", "Fetch"), ("error", error)})), 0.0)

    return counted


def test_fetch_errors_are_counted_by_the_read_that_sets_them(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Fetch's partition codes reach errors_total through the read that set them (the
    response is not walked); a clean fetch counts nothing, NONE is the clean ones."""
    from odradek.protocol.apis import ApiKey
    from odradek.protocol.records import Record, build_batch
    from tests.unit.broker.support import Broker

    monkeypatch.setattr(refusals, "ERRORS", {})
    monkeypatch.setattr(refusals, "ERRED", {})
    b = Broker(tmp_path)
    try:
        b.create("t")
        r = b.call(ApiKey.PRODUCE, 9, {
            "transactional_id": None, "acks": 1, "timeout": 5000,
            "topic_data": [{"name": "t", "partition_data": [
                {"index": 0, "records": build_batch([Record(0, 0, None, b"v")])}]}]})
        assert r.responses[0].partition_responses[0].error_code == 0

        def fetch(*wanted: tuple[int, int]) -> list[int]:
            return fetch_codes(b, {"t": list(wanted)})

        errors = b.rm.fetch_errors
        assert fetch((0, 0)) == [0]
        assert errors.codes == {} and errors.responses == 0
        assert fetch((0, 1000)) == [ErrorCode.offset_out_of_range]
        assert fetch((5, 0), (6, 0)) == [ErrorCode.unknown_topic_or_partition] * 2
        assert fetch((0, 0), (7, 0)) == [0, ErrorCode.unknown_topic_or_partition]
        assert errors.codes == {ErrorCode.offset_out_of_range: 1,
                                ErrorCode.unknown_topic_or_partition: 3}
        assert errors.responses == 3
        assert not any(api == "FETCH" for api, _ in refusals.ERRORS)  # no second count
        counted = fetch_errors_scraped(b, fetches=4)  # the four, as the server counts them
        assert counted("OFFSET_OUT_OF_RANGE") == 1
        assert counted("UNKNOWN_TOPIC_OR_PARTITION") == 3
        assert counted("NONE") == 1
    finally:
        b.close()


def test_an_authorized_fetch_counts_its_refused_topics_and_its_read_once(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """With an authorizer: a topic the client may not read answers
    TOPIC_AUTHORIZATION_FAILED (counted by the handler), the other's partition error by
    the read; the response counts once as erred."""
    from odradek.protocol.apis import ApiKey
    from tests.unit.broker.support import Broker

    monkeypatch.setattr(refusals, "ERRORS", {})
    monkeypatch.setattr(refusals, "ERRED", {})
    b = Broker(tmp_path, **{
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true"})
    try:
        b.create("t")
        b.create("u")
        r = b.call(ApiKey.CREATE_ACLS, 3, {"creations": [{
            "resource_type": 2, "resource_name": "u", "resource_pattern_type": 3,
            "principal": "User:ANONYMOUS", "host": "*", "operation": 3,
            "permission_type": 2}]})  # DENY Read on topic u
        assert r.results[0].error_code == 0, r
        assert fetch_codes(b, {"t": [(0, 1000)], "u": [(0, 0)]}) == [
            ErrorCode.offset_out_of_range, ErrorCode.topic_authorization_failed]
        assert fetch_codes(b, {"u": [(0, 0)]}) == [ErrorCode.topic_authorization_failed]
        counted = fetch_errors_scraped(b, fetches=3)
        assert counted("OFFSET_OUT_OF_RANGE") == 1
        assert counted("TOPIC_AUTHORIZATION_FAILED") == 2
        assert counted("NONE") == 1  # three answered, two with errors
    finally:
        b.close()
