"""Issue 18, without processes: the request stats' histograms, the collector's families
from them, the log formats, and the admin HTTP's parameter parsing (fuzzed)."""

from __future__ import annotations

import json
import logging
import sys

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
from odradek.broker.metrics.requests import BUCKETS_MS, RequestStats, request_name
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


def test_the_servers_own_timing_counts_as_record_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's inline fast path (Connection._dispatch: one clock read per request and
    one per read, first buckets implied) gives the same families as record() for the same
    times, every request counted once."""
    import asyncio

    from odradek.broker import server as srv
    from tests.support.wire import frame

    # reads: three produce requests at t=1.0 (answered at 1.00004, 1.003 and 3.5: queue time
    # for the second and third), one at 3.6 (answered at 7.6), then two ApiVersions of
    # versions no node serves (answered with UNSUPPORTED_VERSION, so counted) at 8.0
    reads = [(1.0, [(0, 9)] * 3, [1.00004, 1.003, 3.5]), (3.6, [(0, 9)], [7.6]),
             (8.0, [(18, 500), (18, -1)], [8.00001, 8.00002])]
    clock = iter([t for at, _, dones in reads for t in (at, *dones)]).__next__
    monkeypatch.setattr(srv, "_perf", clock)

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
