"""A userspace TCP proxy between clients and nodes that reads Kafka request frames.

This kernel has no `tc netem`, so loss, delay and resets are made here. One listener per node
in the root namespace (on the bridge's address, which the node advertises to clients); each
client connection gets its own upstream connection. Client-to-node bytes are cut into Kafka
frames (int32 size, then api_key int16, api_version int16, correlation_id int32) so a rule can
name API keys; node-to-client bytes are copied as they come.

Rules (set from any thread, read by the proxy's event loop thread):
- delay: a request of a chosen API key is held `delay_ms` before it is sent on; the requests
  behind it on that connection wait too (TCP keeps order, so would the network).
- blackhole: a request of a chosen API key is never delivered, nor anything after it on that
  connection; when the rule is lifted those connections are reset (the client saw a request
  vanish: its outcome is unknown, as after a lost packet and a timeout).
- loss: each frame or chunk, with probability `rate`, is stalled 0.2-1.5 s (a retransmit) or,
  one time in four, the connection is reset (RST, SO_LINGER 0).
- reset: every connection is reset now.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Proxy", "Rules"]

_HEADER = struct.Struct(">ihhi")  # size, api_key, api_version, correlation_id


@dataclass
class Rules:
    delay_ms: dict[int, int] = field(default_factory=dict)  # api key -> ms
    blackhole: set[int] = field(default_factory=set)
    loss_rate: float = 0.0


@dataclass
class Stats:
    connections: int = 0
    frames: int = 0
    delayed: int = 0
    blackholed: int = 0
    stalls: int = 0
    resets: int = 0

    def snapshot(self) -> dict[str, int]:
        return dict(self.__dict__)


class _Conn:
    def __init__(self, proxy: Proxy, client: asyncio.StreamWriter,
                 upstream: asyncio.StreamWriter) -> None:
        self.proxy = proxy
        self.client = client
        self.upstream = upstream
        self.holed = False  # a request was black-holed: nothing more goes upstream

    def reset(self) -> None:
        for w in (self.client, self.upstream):
            sock = w.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            w.transport.abort()


class Proxy:
    def __init__(self, seed: int = 0) -> None:
        self.rules = Rules()
        self.stats = Stats()
        self.rng = random.Random(seed)
        self.conns: set[_Conn] = set()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="fault-proxy",
                                       daemon=True)
        self.thread.start()
        self.servers: list[asyncio.Server] = []

    def _call(self, coro: Coroutine[Any, Any, Any], timeout: float = 30.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    # ---------------------------------------------------------------- setup

    def listen(self, upstreams: dict[int, str], host: str) -> dict[int, str]:
        """A listener on `host` per upstream (node id -> host:port); node id -> its address."""
        out = {}
        for node_id, target in sorted(upstreams.items()):
            up_host, up_port = target.rsplit(":", 1)
            server = self._call(self._serve(host, up_host, int(up_port)))
            self.servers.append(server)
            out[node_id] = f"{host}:{server.sockets[0].getsockname()[1]}"
        return out

    async def _serve(self, host: str, up_host: str, up_port: int) -> asyncio.Server:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await self._handle(reader, writer, up_host, up_port)
        return await asyncio.start_server(handle, host, 0)

    # ---------------------------------------------------------------- rules

    def set_rules(self, rules: Rules) -> None:
        self.rules = rules

    def clear(self) -> None:
        """No rule; connections stuck behind a black hole are reset."""
        self.rules = Rules()

        async def unhole() -> None:
            for conn in list(self.conns):
                if conn.holed:
                    self.stats.resets += 1
                    conn.reset()
        self._call(unhole())

    def reset_all(self) -> int:
        async def reset() -> int:
            n = 0
            for conn in list(self.conns):
                conn.reset()
                n += 1
            self.stats.resets += n
            return n
        return int(self._call(reset()))

    def close(self) -> None:
        async def shut() -> None:
            for server in self.servers:
                server.close()
            for conn in list(self.conns):
                conn.reset()
            me = asyncio.current_task()
            tasks = [t for t in asyncio.all_tasks() if t is not me]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            self._call(shut(), 10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    # ---------------------------------------------------------------- the pumps

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      up_host: str, up_port: int) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(up_host, up_port)
        except OSError:
            writer.transport.abort()
            return
        conn = _Conn(self, writer, up_writer)
        self.conns.add(conn)
        self.stats.connections += 1
        try:
            await asyncio.gather(self._requests(conn, reader), self._responses(conn, up_reader),
                                 return_exceptions=True)
        finally:
            self.conns.discard(conn)
            conn.reset()

    async def _lossy(self, conn: _Conn) -> bool:
        """Loss for one frame or chunk: False when the connection was reset."""
        rate = self.rules.loss_rate
        if rate <= 0 or self.rng.random() >= rate:
            return True
        if self.rng.random() < 0.25:
            self.stats.resets += 1
            conn.reset()
            return False
        self.stats.stalls += 1
        await asyncio.sleep(self.rng.uniform(0.2, 1.5))
        return True

    async def _requests(self, conn: _Conn, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                head = await reader.readexactly(4)
                (size,) = struct.unpack(">i", head)
                body = await reader.readexactly(size)
                self.stats.frames += 1
                if conn.holed:
                    continue
                api_key = struct.unpack_from(">h", body)[0] if size >= 2 else -1
                rules = self.rules
                if api_key in rules.blackhole:
                    self.stats.blackholed += 1
                    conn.holed = True
                    continue
                delay = rules.delay_ms.get(api_key)
                if delay:
                    self.stats.delayed += 1
                    await asyncio.sleep(delay / 1000)
                if not await self._lossy(conn):
                    return
                conn.upstream.write(head + body)
                await conn.upstream.drain()
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            conn.reset()

    async def _responses(self, conn: _Conn, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                chunk = await reader.read(65536)
                if not chunk:
                    break
                if not await self._lossy(conn):
                    return
                conn.client.write(chunk)
                await conn.client.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            conn.reset()


def frame_header(frame: bytes) -> tuple[int, int, int, int]:
    """(size, api_key, api_version, correlation_id) of a request frame (tests use it)."""
    return _HEADER.unpack_from(frame)
