"""odradek's native client connection: one blocking socket to one broker, Kafka framing.

The fetcher, the columnar producer and the metadata lookup all talk through `Connection`.
The fetcher's path also speaks TLS and SASL PLAIN/SCRAM (secure_socket.py,
`fetch_supports`); the columnar producer sends with sendmsg, which a TLS socket has not, so
it stays PLAINTEXT (`supports`). Callers with other settings use confluent-kafka instead.
"""

from __future__ import annotations

import mmap
import socket
import struct
from collections.abc import Mapping
from typing import Any

__all__ = ["Connection", "error_name", "fetch_supports", "security_of", "servers", "supports"]

_LEN = struct.Struct(">i")
_CORR = struct.Struct(">i")
# Receive buffers from this size on are anonymous maps (see Connection._exact).
_MMAP_AT = 1 << 20
# Settings a plain socket honours as confluent-kafka would (or that do not matter to it).
_PLAIN = {"plaintext", ""}


def error_name(code: int) -> str:
    """A Kafka error code's name for messages (UNKNOWN_TOPIC_OR_PARTITION, ...)."""
    from odradek.protocol.errors import ErrorCode

    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"error code {code}"


def supports(client: Mapping[str, str]) -> bool:
    """True when the client settings need nothing beyond a plaintext socket."""
    proto = client.get("security.protocol", "plaintext").strip().lower()
    return proto in _PLAIN and not any(k.startswith(("sasl.", "ssl.")) for k in client)


def security_of(client: Mapping[str, str]) -> Any:
    """The ClientSecurity of the settings (None: plaintext); ValueError when they ask for
    what this client cannot do (check `fetch_supports` first)."""
    from odradek.client.secure_socket import NOT_HANDLED, ClientSecurity

    security = ClientSecurity.from_settings(client)
    if security is NOT_HANDLED:
        raise ValueError("these security settings need confluent-kafka")
    return security


def fetch_supports(client: Mapping[str, str]) -> bool:
    """True when the fetcher's connection honours every security setting given."""
    from odradek.client.secure_socket import NOT_HANDLED, ClientSecurity

    return ClientSecurity.from_settings(client) is not NOT_HANDLED


def servers(bootstrap: str) -> list[tuple[str, int]]:
    """The (host, port) pairs of a bootstrap.servers string (listener names dropped)."""
    out = []
    for item in bootstrap.split(","):
        item = item.strip()
        if "://" in item:
            item = item.split("://", 1)[1]
        host, _, port = item.rpartition(":")
        if host and port.isdigit():
            out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError(f"no host:port in bootstrap.servers {bootstrap!r}")
    return out


class Connection:
    """One broker connection: `send` a request body, `receive` its response frame."""

    def __init__(self, host: str, port: int, client_id: str, timeout_s: float, max_frame: int,
                 security: Any = None) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.client_id = client_id
        self.max_frame = max_frame
        self.corr = 0
        self.buf: bytearray | mmap.mmap = bytearray(0)
        if security is not None:  # a ClientSecurity: TLS first, then SASL over it
            try:
                self.sock = security.wrap(self.sock, host)
                security.authenticate(self)
            except BaseException:
                self.sock.close()
                raise

    def send(self, api_key: int, version: int, body: bytes) -> int:
        from odradek.protocol.headers import encode_request_header

        self.corr += 1
        head = encode_request_header(api_key, version, self.corr, self.client_id)
        self.sock.sendall(_LEN.pack(len(head) + len(body)) + head + body)
        return self.corr

    def receive(self, corr: int) -> memoryview:
        """The next response frame, read-only; it lives in this connection's buffer, so it
        is valid only until the next `receive` (decode it first: kio copies what it keeps)."""
        size = _LEN.unpack(self._exact(4))[0]
        if size < 4 or size > self.max_frame:
            raise ConnectionError(f"response frame of {size} bytes is out of bounds "
                                  f"(at most {self.max_frame})")
        frame = self._exact(size).toreadonly()
        got = _CORR.unpack_from(frame, 0)[0]
        if got != corr:
            raise ConnectionError(f"response correlation id {got}, expected {corr}")
        return frame

    def _exact(self, n: int) -> memoryview:
        # One buffer per connection, grown (with room to spare: response sizes wander) to
        # the biggest frame seen: a fresh one per response cost a zero-filled allocation of
        # up to 32 MiB, and copying it into `bytes` for kio another pass (measured: 12% of
        # the columnar consumer's CPU). Anonymous mmap: its pages are zeroed by the kernel
        # as they are first written, not filled once more up front.
        if len(self.buf) < n:
            self.buf = mmap.mmap(-1, n + (n >> 3)) if n >= _MMAP_AT else bytearray(n)
        view = memoryview(self.buf)[:n]
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:], n - got)
            if k == 0:
                raise ConnectionError("the broker closed the connection")
            got += k
        return view

    def close(self) -> None:
        self.sock.close()
