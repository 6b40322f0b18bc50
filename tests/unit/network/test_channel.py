"""network.Channel against a small asyncio peer that answers ApiVersions out of order."""

from __future__ import annotations

import asyncio
import struct

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from odradek.network import Channel, ChannelError, Channels
from odradek.protocol.headers import encode_response_header, parse_request_header
from odradek.protocol.messages import encode_api_versions_response


async def _peer(delays: list[float], close_after: int | None = None) -> asyncio.Server:
    """Answers each ApiVersions request after the next delay in `delays` (so later requests
    can be answered first); closes the connection after `close_after` requests."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen = 0
        tasks = []
        while True:
            try:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
            except asyncio.IncompleteReadError:
                break
            frame = await reader.readexactly(size)
            header = parse_request_header(frame)
            seen += 1
            if close_after is not None and seen > close_after:
                writer.close()
                return
            delay = delays[(seen - 1) % len(delays)]

            async def answer(corr: int = header.correlation_id, d: float = delay,
                             key: int = header.api_version) -> None:
                await asyncio.sleep(d)
                body = encode_api_versions_response(3, 0, {18: (0, key)})
                head = encode_response_header(corr, 0)
                writer.write(struct.pack(">i", len(head) + len(body)) + head + body)

            tasks.append(asyncio.ensure_future(answer()))
        await asyncio.gather(*tasks)

    return await asyncio.start_server(serve, "127.0.0.1", 0)


def _request() -> ApiVersionsRequest:
    return ApiVersionsRequest(client_software_name="test", client_software_version="1")


def test_pipelined_answers_reach_their_callers() -> None:
    async def run() -> None:
        server = await _peer([0.05, 0.0, 0.02])
        port = server.sockets[0].getsockname()[1]
        ch = Channel("127.0.0.1", port, "t")
        got = await asyncio.gather(*(ch.request(_request(), 5.0) for _ in range(6)))
        assert [r.error_code for r in got] == [0] * 6
        assert all(r.api_keys[0].max_version == 3 for r in got)
        await ch.close()
        server.close()

    asyncio.run(run())


def test_lost_connection_fails_pending_calls_and_reconnects() -> None:
    async def run() -> None:
        server = await _peer([0.0], close_after=1)
        port = server.sockets[0].getsockname()[1]
        ch = Channel("127.0.0.1", port, "t")
        assert (await ch.request(_request(), 5.0)).error_code == 0
        with pytest.raises(ChannelError):
            await ch.request(_request(), 5.0)
        # the next call opens a new connection, which answers once again
        assert (await ch.request(_request(), 5.0)).error_code == 0
        await ch.close()
        server.close()

    asyncio.run(run())


def test_timeout_and_unreachable_are_channel_errors() -> None:
    async def run() -> None:
        server = await _peer([30.0])
        port = server.sockets[0].getsockname()[1]
        ch = Channel("127.0.0.1", port, "t")
        with pytest.raises(ChannelError, match="no answer"):
            await ch.request(_request(), 0.2)
        await ch.close()
        server.close()
        await server.wait_closed()
        channels = Channels("t", lambda node: ("127.0.0.1", port) if node == 1 else None)
        with pytest.raises(ChannelError, match="no address known for node 2"):
            await channels.request(2, _request(), 1.0)
        with pytest.raises(ChannelError, match="cannot connect"):
            await channels.request(1, _request(), 1.0)
        await channels.close()

    asyncio.run(run())
