"""The Kafka listener: one asyncio.Protocol per connection.

Bytes are received straight into buffers the FrameReceiver hands out (a
large request into one buffer of its own size, no concatenation), each
frame's header is parsed and its handler called. Handlers of one connection may run
concurrently (pipelining) but responses leave in request order: each request
takes a slot in a queue and the queue is written from its head as slots fill.

Responses that complete within one pass of the event loop leave together:
their parts are collected and written with one writelines at the end of the
pass (one send for many small responses).

A response is a list of parts: bytes, memoryviews and FileRegions. FileRegions
go out with os.sendfile straight from the segment file when the socket buffer
is ours alone (the transport's buffer is empty); when the socket is full the
stock loop waits for writability and carries on with sendfile, other loops
(uvloop cannot lend its socket to add_writer) fall back to pread + write.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import socket
import struct
import time
from asyncio.selector_events import BaseSelectorEventLoop
from collections.abc import Callable
from typing import Any

from odradek.broker.acceptor import Acceptor, ConnectionLimits, RateLimitedLog
from odradek.broker.connection_session import SessionMixin
from odradek.broker.listener_security import PLAINTEXT_LISTENER, ListenerSecurity
from odradek.broker.metrics.requests import RequestStats, Timer
from odradek.broker.refusals import api_name
from odradek.broker.sasl_exchange import SASL_APIS, CloseAfter, SaslExchange
from odradek.broker.transport_signals import Disconnect
from odradek.protocol.errors import FrameTooLarge, ProtocolError
from odradek.protocol.fetch import FileRegion
from odradek.protocol.framing import FrameReceiver
from odradek.protocol.headers import encode_response_header, parse_request_header
from odradek.security.principal import Session

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
# requests one connection may have in flight before we stop reading from it
MAX_IN_FLIGHT = 100
# a connection with no read for this long gives its receive buffers back (FrameReceiver.release)
IDLE_RELEASE_S = 5.0
# the idle sweep runs this often at most (a small connections.max.idle.ms runs it more often)
MIN_SWEEP_S = 0.05
# connections the kernel queues before accept (and, on a cluster node, before it serves)
LISTEN_BACKLOG = 1024


# (connection, frame, header) -> (header version, body parts), None (acks=0), or an awaitable
Dispatch = Callable[["Connection", memoryview, Any], Any]


class _Slot:
    __slots__ = ("correlation_id", "done", "header_version", "parts")

    def __init__(self, correlation_id: int) -> None:
        self.correlation_id = correlation_id
        self.header_version = 0
        self.parts: list[Any] | None = None
        self.done = False


class Connection(SessionMixin, asyncio.BufferedProtocol):
    def __init__(self, server: Server, ip: str = "",
                 listener: ListenerSecurity = PLAINTEXT_LISTENER,
                 dispatch: Dispatch | None = None) -> None:
        self.server = server
        # the listener's own dispatcher (its name decides the endpoints Metadata answers)
        self.dispatch = server.dispatch if dispatch is None else dispatch
        self.listener = listener
        self.session = Session(client_address=ip, listener_name=listener.name,
                               security_protocol=listener.protocol,
                               authenticated=listener.sasl is None)
        self.sasl: SaslExchange | None = None  # on SASL listeners
        self.ip = ip  # counted against max.connections.per.ip until connection_lost
        self.active = False  # a read since the last idle sweep
        # the sweep that last saw this connection active (or its start): no read since
        self.quiet_since = time.monotonic()
        self.receiver = FrameReceiver(server.max_request_bytes)
        self._out: list[Any] = []  # response parts waiting for the end of this loop pass
        self._out_scheduled = False
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.closed = False
        self._slots: collections.deque[_Slot] = collections.deque()
        self._sending = False  # a FileRegion response is being written
        self._write_paused = False
        self._drain_waiter: asyncio.Future[None] | None = None
        self._reading_paused = False
        self.muted_until = 0.0  # issue 16: a quota-throttled channel reads nothing till then
        self._unmute_handle: asyncio.TimerHandle | None = None
        self._held: collections.deque[memoryview] = collections.deque()
        self._sock_fd = -1
        self._writable: asyncio.Future[None] | None = None
        # when requests are measured (broker.metrics, `stats` set): the connection's timing
        # (the last read's time, where the next request's handler starts), in C, one call
        # per read and one per request (metrics/requests.py, issue 18)
        self.stats: RequestStats | None = server.stats
        self.timer: Timer | None = None if server.stats is None else Timer(server.stats.table)

    # --- asyncio.Protocol --------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but quack alike
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except (OSError, AttributeError):
                pass
            # never sendfile past TLS: those bytes must go through the transport
            if transport.get_extra_info("sslcontext") is None:
                try:
                    self._sock_fd = sock.fileno()
                except (OSError, AttributeError):
                    self._sock_fd = -1
        transport.set_write_buffer_limits(high=0, low=0)
        self.server.connections.add(self)
        if self.listener is not PLAINTEXT_LISTENER:
            self._start_session(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self._drop_writer()
        if not self.closed and self.receiver.buffered:
            log.warning("connection from %s closed mid-frame: %d bytes of a truncated request "
                        "dropped", self.peer, self.receiver.buffered)
        self._out.clear()
        self.closed = True
        self.server.connections.discard(self)
        self.server.release(self.ip)
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_result(None)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_result(None)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.receiver.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.active = True
        if self.closed:
            return
        try:
            frames = self.receiver.buffer_updated(nbytes)
        except FrameTooLarge as exc:
            self.abort(f"request of {exc.size} bytes exceeds socket.request.max.bytes "
                       f"({exc.max_size})")
            return
        except ProtocolError as exc:
            self.abort(f"bad frame: {exc}")
            return
        timer = self.timer
        if timer is not None:
            timer.mark_read()
        for i, frame in enumerate(frames):
            if self.closed:
                return
            if self._unmute_handle is not None:  # muted: what was read waits for the unmute
                self._held.extend(frames[i:])
                return
            self._dispatch(frame)

    # --- requests ------------------------------------------------------------

    def _dispatch(self, frame: memoryview) -> None:
        sasl = self.sasl
        if sasl is not None and sasl.raw:
            self._sasl_raw(frame)
            return
        try:
            header = parse_request_header(frame)
        except ProtocolError as exc:
            self.abort(f"malformed request header: {exc}")
            return
        slot = _Slot(header.correlation_id)
        try:
            if sasl is not None and (not self.session.authenticated
                                     or header.api_key in SASL_APIS or sasl.expired()):
                result = self._sasl_request(header, frame)
            else:
                result = self.dispatch(self, frame, header)
        except CloseAfter as exc:
            self._answer_and_close(slot, exc)
            return
        except Disconnect as exc:
            self._failed(header, exc)
            self.abort(str(exc))
            return
        except ProtocolError as exc:
            self._failed(header, exc)
            self.abort(f"malformed {api_name(header.api_key, header.api_version)} request: {exc}")
            return
        except Exception as exc:
            self._failed(header, exc)
            api = api_name(header.api_key, header.api_version)
            log.exception("handler for %s from %s failed; closing the connection", api, self.peer)
            self.abort(None)
            return
        timer = self.timer
        if result is not None and type(result) is not tuple:  # a coroutine: answer later
            self._slots.append(slot)
            task = asyncio.ensure_future(result)
            self.server.tasks.add(task)
            task.add_done_callback(lambda t, s=slot: self._completed(t, s))
            if timer is not None:
                self.stats.later(task, header, *timer.handled())  # type: ignore[union-attr]
        else:
            if timer is not None:
                # the whole recording in one C call (metrics/_record.c): clock read, version
                # count, sums, the queue/local/total buckets, the slow log's check
                timer.record(header)
            if result is None:
                return  # no response (acks=0)
            slot.header_version, slot.parts = result
            slot.done = True
            if not self._slots and not self._sending:
                self._write_slot(slot)
                return
            self._slots.append(slot)
        if len(self._slots) >= MAX_IN_FLIGHT and not self._reading_paused:
            # a client that pipelines faster than we answer waits in its socket, not our memory
            self._reading_paused = True
            self.transport.pause_reading()  # type: ignore[union-attr]

    def _failed(self, header: Any, exc: BaseException) -> None:
        if self.stats is not None and self.timer is not None:
            self.stats.failed(header, self.timer.received, str(exc) or type(exc).__name__)

    def _completed(self, task: asyncio.Future[Any], slot: _Slot) -> None:
        self.server.tasks.discard(task)
        if task.cancelled():
            self.abort(None)
            return
        exc = task.exception()
        if exc is not None:
            if isinstance(exc, Disconnect | ProtocolError):
                self.abort(str(exc))
            else:
                log.error("handler failed for %s; closing the connection", self.peer,
                          exc_info=exc)
                self.abort(None)
            return
        result = task.result()
        slot.done = True
        if result is None:
            slot.parts = None
        else:
            slot.header_version, slot.parts = result
        self._flush()

    # --- responses -------------------------------------------------------------

    def _flush(self) -> None:
        while self._slots and self._slots[0].done and not self._sending and not self.closed:
            slot = self._slots.popleft()
            if slot.parts is not None:
                self._write_slot(slot)
        if (self._reading_paused and len(self._slots) < MAX_IN_FLIGHT // 2 and not self.closed
                and not self.server.draining):
            self._reading_paused = False
            if self._unmute_handle is None:
                self.transport.resume_reading()  # type: ignore[union-attr]

    # --- quota throttling (issue 16) ---------------------------------------------

    def mute(self, throttle_ms: int) -> None:
        """Read nothing from this client for `throttle_ms` (Kafka's throttled channel: the
        answer carrying throttle_time_ms goes out at once, the next request waits)."""
        if throttle_ms <= 0 or self.closed or self.transport is None:
            return
        loop = asyncio.get_running_loop()
        until = loop.time() + throttle_ms / 1000.0
        if until <= self.muted_until:
            return
        self.muted_until = until
        if self._unmute_handle is not None:
            self._unmute_handle.cancel()
        else:
            self.transport.pause_reading()
        self._unmute_handle = loop.call_at(until, self._unmute)

    def _unmute(self) -> None:
        self._unmute_handle = None
        # requests read before the mute went on, one at a time (one may mute again)
        while self._held and not self.closed:
            self._dispatch(self._held.popleft())
            if self._unmute_handle is not None:
                return
        if not self.closed and not self._reading_paused and not self.server.draining:
            self.transport.resume_reading()  # type: ignore[union-attr]

    def _write_slot(self, slot: _Slot) -> None:
        if self.closed:
            return
        header = encode_response_header(slot.correlation_id, slot.header_version)
        parts = slot.parts or []
        size = len(header)
        has_region = False
        for part in parts:
            if isinstance(part, FileRegion):
                size += part.size
                has_region = True
            else:
                size += len(part)
        if not has_region:
            self._out += (_SIZE.pack(size), header, *parts)
            if not self._out_scheduled:
                self._out_scheduled = True
                asyncio.get_running_loop().call_soon(self.flush_output)
            return
        self.flush_output()  # what was answered before goes out before this response
        self._sending = True
        task = asyncio.ensure_future(self._send_with_regions([_SIZE.pack(size), header, *parts]))
        self.server.tasks.add(task)
        task.add_done_callback(self._regions_sent)

    def flush_output(self) -> None:
        """Write the collected response parts with one writelines."""
        self._out_scheduled = False
        if self._out and not self.closed:
            self.active = True  # a write is activity too (Kafka's idle expiry counts both)
            out, self._out = self._out, []
            if self.listener.ssl_context is not None:
                # the SSL transport makes one TLS record per part: one join, one record
                self.transport.write(b"".join(out))  # type: ignore[union-attr]
                return
            self.transport.writelines(out)  # type: ignore[union-attr]

    def _regions_sent(self, task: asyncio.Future[None]) -> None:
        self.server.tasks.discard(task)
        self._sending = False
        self.active = True
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            log.warning("sending a response to %s failed: %s", self.peer, exc)
            self.abort(None)
            return
        self._flush()

    async def _send_with_regions(self, parts: list[Any]) -> None:
        transport = self.transport
        assert transport is not None
        pending: list[Any] = []
        for part in parts:
            if not isinstance(part, FileRegion):
                pending.append(part)
                continue
            if pending:
                transport.writelines(pending)
                pending = []
            if part.size > 0:
                await self._send_region(part)
            if self.closed:
                return
        if pending:
            transport.writelines(pending)

    async def _wait_drained(self) -> None:
        # the write-buffer limits are (0, 0): pause_writing fires whenever anything is
        # buffered and resume_writing exactly when the buffer is empty again
        transport = self.transport
        assert transport is not None
        while transport.get_write_buffer_size() > 0 and not self.closed:
            self._drain_waiter = asyncio.get_running_loop().create_future()
            await self._drain_waiter
        self._drain_waiter = None

    async def _send_region(self, region: FileRegion) -> None:
        transport = self.transport
        assert transport is not None
        offset, remaining = region.position, region.size
        await self._wait_drained()
        if self.server.zero_copy and self._sock_fd >= 0:
            loop = asyncio.get_running_loop()
            while remaining > 0 and not self.closed:
                try:
                    sent = os.sendfile(self._sock_fd, region.fd, offset, remaining)
                except BlockingIOError:
                    sent = -1
                if sent == 0:
                    raise OSError("segment file shorter than the region to send")
                if sent > 0:
                    offset += sent
                    remaining -= sent
                    continue
                if not self.server.can_add_writer:
                    break
                writable = self._writable = loop.create_future()
                # Why the loop's private _add_writer: the public add_writer (and so
                # loop.sock_sendfile, which calls it when the socket is full) raises for an fd
                # a transport owns. The public transport-level loop.sendfile(transport, file,
                # offset, count) works, but per region it pauses and resumes reading (two
                # epoll_ctl; pipelined requests wait meanwhile), fstats and lseeks the segment
                # fd and awaits two futures: measured with bench.node_cost (Fetch v11 of 1 MB,
                # 5,000 per run, 3 runs each interleaved, bench/RESULTS-h13data.md) the node
                # spent 0.33 CPU s per GB consumed with it against 0.27 with this. The
                # transport's own buffer is empty and stays so while we send (nothing else is
                # written until this response is out), so the selector slot is ours; it is
                # released in _drop_writer, also from connection_lost before the fd closes.
                loop._add_writer(self._sock_fd, _set_done, writable)  # type: ignore[attr-defined]
                try:
                    await writable
                finally:
                    self._drop_writer()
        # copy fallback (no raw socket, or a loop that owns its socket's writability)
        while remaining > 0 and not self.closed:
            chunk = os.pread(region.fd, min(remaining, 1 << 20), offset)
            if not chunk:
                raise OSError("segment file shorter than the region to send")
            transport.write(chunk)
            offset += len(chunk)
            remaining -= len(chunk)
            if self._write_paused:
                await self._wait_drained()

    # --- closing ---------------------------------------------------------------

    def _drop_writer(self) -> None:
        """Unregister our writability callback (before the transport closes the fd)."""
        writable = self._writable
        if writable is None:
            return
        self._writable = None
        try:
            asyncio.get_running_loop()._remove_writer(self._sock_fd)  # type: ignore[attr-defined]
        except Exception:  # the fd is already gone: nothing to unregister
            pass
        _set_done(writable)

    def close_idle(self, max_idle_ms: int) -> None:
        """Close a connection that read nothing for connections.max.idle.ms, unless it has
        requests in flight or a response going out (it is not idle then)."""
        if self.closed or self._slots or self._sending or self._out:
            return
        log.debug("closing connection from %s: idle for more than connections.max.idle.ms "
                  "(%d ms)", self.peer, max_idle_ms)
        self.closed = True
        self._drop_writer()
        if self.transport is not None:
            self.transport.close()

    def abort(self, reason: str | None) -> None:
        if reason:
            log.warning("closing connection from %s: %s", self.peer, reason)
        self._out.clear()
        if not self.closed:
            self.closed = True
            self._drop_writer()
            if self.transport is not None:
                self.transport.abort()


def _set_done(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class Server:
    """Listens on the node's listeners and owns the connections."""

    def __init__(self, dispatch: Dispatch, max_request_bytes: int, *, zero_copy: bool = True,
                 limits: ConnectionLimits | None = None,
                 stats: RequestStats | None = None) -> None:
        self.dispatch = dispatch
        self.max_request_bytes = max_request_bytes
        self.zero_copy = zero_copy
        self.limits = limits or ConnectionLimits()
        self.connections: set[Connection] = set()
        self.tasks: set[asyncio.Future[Any]] = set()
        self._acceptors: list[Acceptor] = []
        self.can_add_writer = True
        self.draining = False
        # admitted connections (those still being set up included), in all and per address
        self.open_count = 0
        self._per_ip: dict[str, int] = {}
        self.refused = RateLimitedLog()
        # failed TLS handshakes and SASL authentications: a client retrying in a loop must
        # not fill the log
        self.auth_failures = RateLimitedLog()
        self._sweep: asyncio.TimerHandle | None = None
        self._make_transport: Callable[..., Any] | None = None
        # metrics (broker.metrics): requests are timed into `stats` when it is set
        self.stats = stats
        self.created = 0  # connections admitted since start

    async def start(self, host: str, port: int, sock: socket.socket | None = None,
                    listener: ListenerSecurity = PLAINTEXT_LISTENER,
                    dispatch: Dispatch | None = None) -> None:
        loop = asyncio.get_running_loop()
        # uvloop refuses add_writer on a socket a transport owns: use the copy fallback there
        self.can_add_writer = (type(loop).__module__.startswith("asyncio")
                               and hasattr(loop, "_add_writer"))
        self._make_transport = (getattr(loop, "_make_socket_transport", None)
                                if isinstance(loop, BaseSelectorEventLoop)
                                else None)
        if sock is None:
            sock = socket.create_server((host, port), reuse_port=False)
        acceptor = Acceptor(sock, self.admit,
                            lambda s, ip, addr: self._serve(s, ip, addr, listener, dispatch))
        acceptor.start(backlog=LISTEN_BACKLOG)
        self._acceptors.append(acceptor)
        log.info("listening on %s", sock.getsockname())
        if self._sweep is None:
            self._sweep = asyncio.get_running_loop().call_later(self._sweep_interval(),
                                                            self._sweep_idle)

    @property
    def accept_failures(self) -> int:
        return sum(a.accept_errors.total for a in self._acceptors)

    def admit(self, ip: str) -> bool:
        """Count a new connection from `ip`, or refuse it (max.connections,
        max.connections.per.ip): the acceptor then closes it at once."""
        limits = self.limits
        per_ip = self._per_ip.get(ip, 0)
        if self.open_count >= limits.max_connections:
            self.refused.note(logging.WARNING, lambda n: (
                f"refused {n} connection(s) (the last from {ip}): the node has the configured "
                f"maximum of {limits.max_connections} connections (max.connections)"))
            return False
        if per_ip >= limits.per_ip(ip):
            self.refused.note(logging.WARNING, lambda n: (
                f"refused {n} connection(s) (the last from {ip}): {ip} has the configured "
                f"maximum of {limits.per_ip(ip)} connections (max.connections.per.ip)"))
            return False
        self.open_count += 1
        self.created += 1
        self._per_ip[ip] = per_ip + 1
        return True

    def release(self, ip: str) -> None:
        """An admitted connection is gone."""
        left = self._per_ip.get(ip)
        if left is None:
            return
        self.open_count -= 1
        if left <= 1:
            del self._per_ip[ip]
        else:
            self._per_ip[ip] = left - 1

    def _serve(self, sock: socket.socket, ip: str, addr: Any,
               listener: ListenerSecurity = PLAINTEXT_LISTENER,
               dispatch: Dispatch | None = None) -> None:
        protocol = Connection(self, ip, listener, dispatch)
        ssl_context = listener.ssl_context
        if self._make_transport is not None and ssl_context is None:
            # Why the selector loop's private _make_socket_transport: it is what the loop's
            # own accept path ends in, minus a task and two coroutines per connection
            # (connect_accepted_socket awaits _create_connection_transport, which awaits
            # connection_made); the peer address is the one accept() gave, no getpeername
            self._make_transport(sock, protocol, extra={"peername": addr})
            return
        loop = asyncio.get_running_loop()
        # TLS goes through the loop's SSL transport: its handshake failures (a plaintext
        # client, no certificate under ssl.client.auth=required) end in `made` below
        task = loop.create_task(loop.connect_accepted_socket(lambda: protocol, sock,
                                                             ssl=ssl_context))

        def made(t: asyncio.Task[Any]) -> None:
            if not t.cancelled() and t.exception() is None:
                return
            if protocol.transport is None:  # connection_lost will never come: uncount it here
                self.release(ip)
                sock.close()
            if not t.cancelled():
                exc = t.exception()
                self.auth_failures.note(logging.WARNING, lambda n: (
                    f"setting up a connection from {ip} failed: {exc} ({n} failure(s) since "
                    "the last such line)"))

        task.add_done_callback(made)

    def _sweep_interval(self) -> float:
        max_idle_ms = self.limits.max_idle_ms
        if max_idle_ms < 0:
            return IDLE_RELEASE_S
        return max(MIN_SWEEP_S, min(IDLE_RELEASE_S, max_idle_ms / 2000))

    def _sweep_idle(self) -> None:
        """Connections that read nothing since the last sweep: after IDLE_RELEASE_S they give
        their receive buffers back; after connections.max.idle.ms they are closed, as Kafka's
        Selector closes idle connections. Activity is a read (requests in flight or a
        response being sent count too: such a connection is never closed for idling). A
        connection is closed at most one sweep after its limit, never before."""
        now = time.monotonic()
        max_idle_ms = self.limits.max_idle_ms
        max_idle_s = max_idle_ms / 1000 if max_idle_ms >= 0 else None
        idle: list[Connection] = []
        for conn in self.connections:
            if conn.active:
                conn.active = False
                conn.quiet_since = now
                continue
            quiet = now - conn.quiet_since
            if quiet >= IDLE_RELEASE_S:
                conn.receiver.release()
            if max_idle_s is not None and quiet >= max_idle_s:
                idle.append(conn)
        for conn in idle:
            conn.close_idle(max_idle_ms)
        self._sweep = asyncio.get_running_loop().call_later(self._sweep_interval(),
                                                            self._sweep_idle)

    def stop_accepting(self) -> None:
        for acceptor in self._acceptors:
            acceptor.close()
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None

    async def drain(self, timeout: float = 10.0,
                    complete_delayed: Callable[[], object] | None = None) -> None:
        """Let in-flight requests finish and their responses go out, then close connections.
        `complete_delayed` is called once no new request can come in (the ReplicaManager's
        purgatories)."""
        for conn in list(self.connections):
            if conn.transport is not None and not conn.closed:
                conn.transport.pause_reading()  # no new requests from now on
        self.draining = True
        # long polls parked on the log answer now with what they have, as Kafka's
        # purgatory does at shutdown, instead of holding the drain for their max wait
        if complete_delayed is not None:
            complete_delayed()
        deadline = asyncio.get_running_loop().time() + timeout
        # handlers that finish start send tasks: wait until no task is left
        while self.tasks:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                log.warning("%d requests still in flight at shutdown", len(self.tasks))
                break
            await asyncio.wait(list(self.tasks), timeout=left)
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.flush_output()
                conn.closed = True
                conn.transport.close()

