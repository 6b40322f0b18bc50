"""connections.max.idle.ms (Kafka's name; default 10 minutes): the node closes a connection that
has been idle that long, as Kafka's Selector does, and keeps one in use. A real node with a
small value, raw sockets."""

from __future__ import annotations

import select
import socket
import struct
import time
from pathlib import Path

import pytest

from tests.support.broker import BrokerProcess

MAX_IDLE_MS = 1000


def _api_versions(s: socket.socket, correlation: int) -> None:
    """One ApiVersions v0 request, and its whole response."""
    header = struct.pack(">hhih", 18, 0, correlation, 4) + b"test"
    s.sendall(struct.pack(">i", len(header)) + header)
    s.settimeout(30)
    (size,) = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))
    body = s.recv(size, socket.MSG_WAITALL)
    assert struct.unpack_from(">i", body)[0] == correlation


def _closed_by_node(s: socket.socket) -> bool:
    """Whether the node closed `s` (it sends nothing unasked: readable means closed)."""
    readable, _, _ = select.select([s], [], [], 0)
    if not readable:
        return False
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


def test_idle_connections_are_closed_and_busy_ones_kept(tmp_path: Path) -> None:
    node = BrokerProcess(tmp_path / "data",
                         settings={"connections.max.idle.ms": str(MAX_IDLE_MS)}).start()
    try:
        # every activity the node sees on the idle ones comes after this
        started = time.monotonic()
        after_request = socket.create_connection(("127.0.0.1", node.port))
        _api_versions(after_request, 1)
        silent = socket.create_connection(("127.0.0.1", node.port))  # never sends anything
        busy = socket.create_connection(("127.0.0.1", node.port))
        _api_versions(busy, 1)
        # the busy connection sends a request every 100 ms until the node has closed both
        # idle ones: it lives through more than the idle limit in use
        correlation = 2
        deadline = time.monotonic() + 60
        closed: dict[str, float] = {}
        while len(closed) < 2:
            if time.monotonic() >= deadline:
                pytest.fail(f"the node closed only {sorted(closed)}")
            _api_versions(busy, correlation)
            correlation += 1
            for name, s in (("after_request", after_request), ("silent", silent)):
                if name not in closed and _closed_by_node(s):
                    closed[name] = time.monotonic()
            time.sleep(0.1)
        # never before its limit (the sweep may be late, by at most half the limit, never early)
        assert min(closed.values()) - started >= MAX_IDLE_MS / 1000
        _api_versions(busy, correlation)  # the one in use is still served
        # new connections are served as before
        fresh = socket.create_connection(("127.0.0.1", node.port))
        _api_versions(fresh, 1)
        for s in (after_request, silent, busy, fresh):
            s.close()
    finally:
        node.stop()
