"""Issue 18: the node's log. One line per event, as text or as JSON (`log.format=json`),
levels per package, and requests that fail or take longer than `request.slow.log.ms`
logged with their client id, API, version and time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.broker import BrokerProcess
from tests.support.metrics import wait_for
from tests.support.requests import api_versions_v3
from tests.support.wire import Conn, frame, raw_header_v1

pytestmark = pytest.mark.timeout(180)


def events(node: BrokerProcess) -> list[dict]:  # type: ignore[type-arg]
    """Every line of the node's log as a JSON object (a line that is not one fails)."""
    out = []
    for line in node.log_path.read_text().splitlines():
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pytest.fail(f"a log line that is not one JSON object: {line!r}")
    return out


def test_json_log_with_slow_and_failed_requests(tmp_path: Path) -> None:
    node = BrokerProcess(tmp_path / "data", settings={
        "log.format": "json", "request.slow.log.ms": "0"}).start()
    try:
        with Conn(node.port) as conn:
            assert conn.request(api_versions_v3(), client_id="slow-client").error_code == 0
        # a version this node does not serve (Fetch v3): the connection is closed, the
        # request logged
        with Conn(node.port) as conn:
            conn.send(frame(raw_header_v1(1, 3, 7, client_id="bad-client")))
            assert conn.wait_closed()

        def logged() -> tuple[dict, dict] | None:  # type: ignore[type-arg]
            evs = events(node)
            slow = [e for e in evs if e["logger"] == "odradek.requests"
                    and "slow request" in e["message"] and "slow-client" in e["message"]]
            failed = [e for e in evs if e["logger"] == "odradek.requests"
                      and "failed request" in e["message"] and "bad-client" in e["message"]]
            return (slow[0], failed[0]) if slow and failed else None

        slow, failed = wait_for(logged, "the slow and the failed request in the log")
    finally:
        node.stop()
    assert slow["level"] == "WARNING"
    assert "API_VERSIONS v3" in slow["message"] and " ms" in slow["message"]
    assert "FETCH v3" in failed["message"]
    evs = events(node)
    assert all({"time", "level", "logger", "message"} <= set(e) for e in evs)
    assert any(e["message"].startswith("node 1 started") for e in evs)


def test_text_log_is_one_line_per_event_and_levels_are_per_package(tmp_path: Path) -> None:
    # every request is slow at 0 ms, but the requests logger is set to ERROR: not one line
    node = BrokerProcess(tmp_path / "data", settings={
        "request.slow.log.ms": "0", "log.level.odradek.requests": "ERROR"}).start()
    try:
        with Conn(node.port) as conn:
            for _ in range(5):
                assert conn.request(api_versions_v3(), client_id="quiet").error_code == 0
        wait_for(lambda: "node 1 started" in node.log(), "the start line")
    finally:
        node.stop()
    lines = node.log_path.read_text().splitlines()
    assert not [line for line in lines if "odradek.requests" in line]
    # text: each line starts with a timestamp and a level (no continuation lines)
    for line in lines:
        if line.strip():
            date, _, rest = line.partition(" ")
            assert date[:2] == "20" and rest.split(" ")[1] in {
                "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}, line
