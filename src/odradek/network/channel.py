"""One asyncio connection to a peer node, and the set of them by node id: PLAINTEXT, or TLS
and SASL as the listener it reaches asks (client_security.ClientSecurity)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import time
from collections.abc import Callable
from typing import Any

from odradek.network.client_security import (
    AuthenticationFailed,
    ClientSecurity,
)
from odradek.protocol.apis import response_header_version
from odradek.protocol.headers import encode_request_header, response_body_offset
from odradek.protocol.messages import decode_response, encode_request

__all__ = ["Channel", "ChannelError", "Channels"]

log = logging.getLogger(__name__)

_LEN = struct.Struct(">i")
_CORR = struct.Struct(">i")
DEFAULT_MAX_FRAME = 100 << 20  # socket.request.max.bytes
_RENEW_MARGIN_MS = 3000


class ChannelError(ConnectionError):
    """The peer could not be reached, closed the connection, or did not answer in time."""


class Channel:
    """One connection. `request` may be called by many tasks at once: requests are written in
    call order and each caller gets the response with its correlation id."""

    def __init__(self, host: str, port: int, client_id: str,
                 max_frame: int = DEFAULT_MAX_FRAME,
                 security: ClientSecurity | None = None) -> None:
        self.host, self.port = host, port
        self.client_id = client_id
        self.max_frame = max_frame
        self.security = security  # None: PLAINTEXT
        self._auth_logged: str | None = None
        # KIP-368: a SASL session the server limits (connections.max.reauth.ms) is replaced
        # by a new connection before it ends, between requests (monotonic seconds, or None)
        self._renew_at: float | None = None
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[int, asyncio.Future[bytes]] = {}
        self._corr = 0
        self._read_task: asyncio.Task[None] | None = None
        self._connecting: asyncio.Lock = asyncio.Lock()
        self.closed = False

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def connect(self, timeout_s: float) -> None:
        async with self._connecting:
            if self.connected:
                return
            if self.closed:
                raise ChannelError(f"channel to {self.host}:{self.port} is closed")
            sec = self.security
            tls = sec.ssl_context if sec is not None else None
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(
                    self.host, self.port, ssl=tls,
                    server_hostname=self.host if tls is not None else None), timeout_s)
            except (TimeoutError, OSError) as exc:  # ssl.SSLError is an OSError
                raise ChannelError(f"cannot connect to {self.host}:{self.port}: "
                                   f"{exc or type(exc).__name__}") from None
            if sec is not None and sec.sasl:
                try:
                    await asyncio.wait_for(self._authenticate(sec, reader, writer), timeout_s)
                except (TimeoutError, OSError, asyncio.IncompleteReadError,
                        AuthenticationFailed, ValueError) as exc:
                    writer.close()
                    raise self._auth_error(sec, exc) from None
            self._reader, self._writer = reader, writer
            self._read_task = asyncio.ensure_future(self._read_loop(reader))

    async def _authenticate(self, sec: ClientSecurity, reader: asyncio.StreamReader,
                            writer: asyncio.StreamWriter) -> None:
        """SaslHandshake v1, then SaslAuthenticate v2 rounds, before any other request (the
        read loop is not running yet: each answer is read here, in order)."""
        from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
        from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

        async def exchange(entity: Any) -> Any:
            api_key, version = int(entity.__api_key__), int(entity.__version__)
            self._corr = (self._corr + 1) & 0x7FFFFFFF
            head = encode_request_header(api_key, version, self._corr, self.client_id)
            body = encode_request(entity)
            writer.write(_LEN.pack(len(head) + len(body)) + head + body)
            size = _LEN.unpack(await reader.readexactly(4))[0]
            if size < 4 or size > self.max_frame:
                raise ChannelError(f"response frame of {size} bytes is out of bounds")
            frame = await reader.readexactly(size)
            if _CORR.unpack_from(frame, 0)[0] != self._corr:
                raise ChannelError("SASL answer with another correlation id")
            offset = response_body_offset(frame, response_header_version(api_key, version))
            return decode_response(api_key, version, frame, offset)

        shake = await exchange(SaslHandshakeRequest(mechanism=sec.mechanism))
        if int(shake.error_code):
            raise AuthenticationFailed(f"SASL mechanism {sec.mechanism} is not enabled on "
                                       f"that listener (it serves "
                                       f"{', '.join(shake.mechanisms) or 'none'})")
        steps = sec.sasl_exchange()
        token = next(steps)
        while True:
            answer = await exchange(SaslAuthenticateRequest(auth_bytes=token))
            if int(answer.error_code):
                raise AuthenticationFailed(answer.error_message or "authentication failed")
            try:
                token = steps.send(bytes(answer.auth_bytes))
            except StopIteration:
                break
        lifetime = answer.session_lifetime  # a timedelta (kio), or milliseconds
        lifetime_ms = int(lifetime.total_seconds() * 1000) if hasattr(
            lifetime, "total_seconds") else int(lifetime or 0)
        # renewed at 85% of its life (Kafka's clients re-authenticate between 85% and 95%),
        # and a few seconds before its end at least, which a busy loop may need
        if lifetime_ms > 0:
            at_ms = max(lifetime_ms * 0.5, min(lifetime_ms * 0.85, lifetime_ms - _RENEW_MARGIN_MS))
            self._renew_at = time.monotonic() + at_ms / 1000
        else:
            self._renew_at = None

    def _auth_error(self, sec: ClientSecurity, exc: BaseException) -> ChannelError:
        text = (f"authentication to {self.host}:{self.port} ({sec.protocol}, "
                f"{sec.mechanism}, user {sec.username!r}) failed: "
                f"{exc or type(exc).__name__}")
        # a peer that refuses our credentials is asked again after every backoff: say it once
        # per distinct reason, not once a retry
        if text != self._auth_logged:
            self._auth_logged = text
            log.warning("%s", text)
        return ChannelError(text)

    async def call(self, api_key: int, version: int, body: bytes, timeout_s: float) -> bytes:
        """Send one request body; the response frame (correlation id and header included)."""
        if (self._renew_at is not None and not self._pending
                and time.monotonic() >= self._renew_at and self.connected):
            self._fail(ChannelError(f"SASL session to {self.host}:{self.port} renewed"))
        if not self.connected:
            await self.connect(timeout_s)
        writer = self._writer
        assert writer is not None
        self._corr = (self._corr + 1) & 0x7FFFFFFF
        corr = self._corr
        head = encode_request_header(api_key, version, corr, self.client_id)
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._pending[corr] = fut
        try:
            writer.write(_LEN.pack(len(head) + len(body)) + head + body)
            return await asyncio.wait_for(fut, timeout_s)
        except TimeoutError:
            # a late answer would be matched to nobody; the connection is in an unknown state
            self._fail(ChannelError(f"no answer from {self.host}:{self.port} in {timeout_s} s"))
            raise ChannelError(f"no answer from {self.host}:{self.port} "
                               f"within {timeout_s:.1f} s") from None
        finally:
            self._pending.pop(corr, None)

    async def request(self, entity: Any, timeout_s: float) -> Any:
        """Send a kio request entity (its class names api key and version); the decoded
        response entity."""
        api_key, version = int(entity.__api_key__), int(entity.__version__)
        frame = await self.call(api_key, version, encode_request(entity), timeout_s)
        offset = response_body_offset(frame, response_header_version(api_key, version))
        return decode_response(api_key, version, frame, offset)

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                size = _LEN.unpack(await reader.readexactly(4))[0]
                if size < 4 or size > self.max_frame:
                    raise ChannelError(f"response frame of {size} bytes from "
                                       f"{self.host}:{self.port} is out of bounds")
                frame = await reader.readexactly(size)
                fut = self._pending.get(_CORR.unpack_from(frame, 0)[0])
                if fut is not None and not fut.done():
                    fut.set_result(frame)
        except (asyncio.IncompleteReadError, OSError) as exc:
            self._fail(ChannelError(f"connection to {self.host}:{self.port} lost: "
                                    f"{exc or type(exc).__name__}"))
        except ChannelError as exc:
            self._fail(exc)
        except asyncio.CancelledError:
            self._fail(ChannelError(f"channel to {self.host}:{self.port} closed"))
            raise

    def _fail(self, exc: ChannelError) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            writer.close()
        for fut in list(self._pending.values()):
            if not fut.done():
                fut.set_exception(exc)
        self._pending.clear()

    async def close(self) -> None:
        self.closed = True
        task, self._read_task = self._read_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._fail(ChannelError(f"channel to {self.host}:{self.port} closed"))


Resolve = Callable[[int], "tuple[str, int] | None"]


class Channels:
    """One channel per peer node id. `resolve(node_id)` gives its (host, port) on the listener
    these channels use (the controller listener, or the inter-broker one); an address that
    changed gets a new channel."""

    def __init__(self, client_id: str, resolve: Resolve,
                 max_frame: int = DEFAULT_MAX_FRAME,
                 security: ClientSecurity | None = None) -> None:
        self.client_id = client_id
        self.resolve = resolve
        self.max_frame = max_frame
        self.security = security  # of the listener the peers are reached on
        self._by_node: dict[int, Channel] = {}
        self._closing: set[asyncio.Future[None]] = set()

    def channel(self, node_id: int) -> Channel:
        address = self.resolve(node_id)
        if address is None:
            raise ChannelError(f"no address known for node {node_id}")
        ch = self._by_node.get(node_id)
        if ch is None or (ch.host, ch.port) != address or ch.closed:
            if ch is not None:
                self._closing.add(asyncio.ensure_future(ch.close()))
                self._closing = {t for t in self._closing if not t.done()}
            ch = Channel(address[0], address[1], self.client_id, self.max_frame,
                         self.security)
            self._by_node[node_id] = ch
        return ch

    async def request(self, node_id: int, entity: Any, timeout_s: float) -> Any:
        return await self.channel(node_id).request(entity, timeout_s)

    async def close(self) -> None:
        channels, self._by_node = list(self._by_node.values()), {}
        for ch in channels:
            await ch.close()
