"""The admin HTTP's uvicorn loop (issue 18): it wakes once a second for its Date header
instead of uvicorn's ten times, and still answers with a Date header and stops when asked."""

from __future__ import annotations

import asyncio
import socket

import pytest

from odradek.broker.admin_http import AdminHttp
from odradek.broker.node_view import NodeView


async def _get(port: int, path: str) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 60)
    writer.close()
    return data


def test_serves_with_a_date_header_and_stops_on_request() -> None:
    async def run() -> None:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        http = AdminHttp(NodeView(1, ("broker",)), [sock])
        await http.start()
        task = http.task
        assert task is not None
        answer = await _get(port, "/health/live")
        head = answer.split(b"\r\n\r\n", 1)[0].lower()
        assert head.startswith(b"http/1.1 200"), answer
        assert b"\r\ndate: " in head, answer
        await http.stop()
        if not task.done():
            pytest.fail("the admin HTTP's task still runs after stop()")
        assert task.exception() is None

    asyncio.run(run())
