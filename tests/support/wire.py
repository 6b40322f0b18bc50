"""Raw Kafka wire access for tests, independent of odradek's own encoder.

Request and response bodies are encoded/decoded with kio's generated entities; record
batches are built here by hand (magic 2 with CRC32C, and legacy magic 1 message sets)
so a test can send exactly the bytes it wants, including broken ones.
"""

from __future__ import annotations

import importlib
import io
import socket
import struct
import time
import zlib
from dataclasses import dataclass
from typing import Any

import crc32c
from kio.serial import entity_reader, entity_writer


def encode_entity(entity: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


def header_for(request: Any, correlation_id: int, client_id: str | None = "odradek-tests") -> Any:
    """The request header entity the request's own schema names (v1 or v2)."""
    from kio.static.primitive import i16, i32

    header_cls = request.__header_schema__
    return header_cls(request_api_key=i16(request.__api_key__),
                      request_api_version=i16(request.__version__),
                      correlation_id=i32(correlation_id), client_id=client_id)


def request_payload(request: Any, correlation_id: int, client_id: str | None = "odradek-tests") -> bytes:
    return encode_entity(header_for(request, correlation_id, client_id)) + encode_entity(request)


def raw_header_v1(api_key: int, api_version: int, correlation_id: int,
                  client_id: str | None = "odradek-tests") -> bytes:
    """A non-flexible request header, hand-built so any key/version can be sent."""
    head = struct.pack(">hhi", api_key, api_version, correlation_id)
    if client_id is None:
        return head + struct.pack(">h", -1)
    cid = client_id.encode()
    return head + struct.pack(">h", len(cid)) + cid


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def response_class(request: Any) -> type:
    module = importlib.import_module(type(request).__module__.rsplit(".", 1)[0] + ".response")
    return getattr(module, type(request).__name__.replace("Request", "Response"))


class Disconnected(Exception):
    """The node closed the connection (EOF or reset)."""


class Conn:
    """One blocking TCP connection to a node with frame-level helpers."""

    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.settimeout(timeout)
        self._buf = b""
        self._cid = 0

    @property
    def local_port(self) -> int:
        return int(self.sock.getsockname()[1])

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Conn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _recv_some(self) -> bytes:
        try:
            chunk = self.sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError) as e:
            raise Disconnected(str(e)) from e
        if not chunk:
            raise Disconnected("EOF")
        return chunk

    def recv_frame(self) -> bytes:
        """The next response frame's payload; raises Disconnected on EOF/reset, timeout on silence."""
        while len(self._buf) < 4:
            self._buf += self._recv_some()
        (size,) = struct.unpack(">i", self._buf[:4])
        assert 0 <= size < 64 * 1024 * 1024, f"node sent a frame size of {size}"
        while len(self._buf) < 4 + size:
            self._buf += self._recv_some()
        payload, self._buf = self._buf[4:4 + size], self._buf[4 + size:]
        return payload

    def wait_closed(self, timeout: float = 10.0) -> bool:
        """True when the node closes the connection within timeout without sending anything."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                chunk = self.sock.recv(65536)
            except (ConnectionResetError, BrokenPipeError):
                return True
            except TimeoutError:
                return False
            if not chunk:
                return True
            self._buf += chunk
        return False

    def request(self, request: Any, client_id: str | None = "odradek-tests") -> Any:
        """Send a kio request entity, return the decoded kio response entity."""
        self._cid += 1
        cid = self._cid
        self.send(frame(request_payload(request, cid, client_id)))
        return self.read_response(response_class(request), cid)

    def read_response(self, cls: type, correlation_id: int) -> Any:
        payload = self.recv_frame()
        # kio readers return (entity, bytes consumed)
        header, used = entity_reader(cls.__header_schema__)(payload, 0)
        assert header.correlation_id == correlation_id, (header, correlation_id)
        body, size = entity_reader(cls)(payload, used)
        assert used + size == len(payload), (
            f"{len(payload) - used - size} trailing bytes after {cls.__name__}")
        return body


# --- record batches -----------------------------------------------------------------------

def _varint(value: int) -> bytes:
    z = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        b = z & 0x7F
        z >>= 7
        if z:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _vbytes(data: bytes | None) -> bytes:
    if data is None:
        return _varint(-1)
    return _varint(len(data)) + data


@dataclass
class Rec:
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    timestamp: int


def build_batch_v2(records: list[Rec], base_offset: int = 0) -> bytes:
    """An uncompressed magic-2 record batch with a correct CRC32C."""
    base_ts = min(r.timestamp for r in records)
    max_ts = max(r.timestamp for r in records)
    body = bytearray()
    for delta, r in enumerate(records):
        rec = bytearray(b"\x00")  # attributes
        rec += _varint(r.timestamp - base_ts) + _varint(delta)
        rec += _vbytes(r.key) + _vbytes(r.value) + _varint(len(r.headers))
        for hk, hv in r.headers:
            rec += _vbytes(hk.encode()) + _vbytes(hv)
        body += _varint(len(rec)) + rec
    after_crc = struct.pack(">hiqqqhii", 0, len(records) - 1, base_ts, max_ts, -1, -1, -1,
                            len(records)) + bytes(body)
    crc = crc32c.crc32c(after_crc)
    batch_length = 4 + 1 + 4 + len(after_crc)  # leader epoch, magic, crc, rest
    return struct.pack(">qiibI", base_offset, batch_length, -1, 2, crc) + after_crc


def flip_payload_byte(batch: bytes) -> bytes:
    """The same batch with one byte of its last record flipped: the CRC no longer matches."""
    b = bytearray(batch)
    b[-2] ^= 0xFF
    return bytes(b)


def build_message_set_v1(key: bytes | None, value: bytes | None, timestamp: int) -> bytes:
    """A legacy magic-1 message set holding one message, with a correct CRC32."""
    def lbytes(d: bytes | None) -> bytes:
        return struct.pack(">i", -1) if d is None else struct.pack(">i", len(d)) + d

    body = struct.pack(">bbq", 1, 0, timestamp) + lbytes(key) + lbytes(value)
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 0, len(message)) + message
