"""Request headers v0-v2 and response headers v0-v1."""

from __future__ import annotations

import struct
from typing import NamedTuple

from odradek.protocol.apis import request_header_version
from odradek.protocol.errors import ProtocolError
from odradek.protocol.primitives import Reader, decode_uvarint_within

__all__ = [
    "HeaderError",
    "RequestHeader",
    "encode_request_header",
    "encode_response_header",
    "parse_request_header",
    "response_body_offset",
]

_FIXED = struct.Struct(">hhi")
_CORR = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_new_tuple = tuple.__new__


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int
    header_version: int = 1


class HeaderError(ProtocolError):
    """A header we could not read past the fixed part.

    Carries what was read (None where the frame was too short) so the broker
    can still log it or answer the correlation id.
    """

    def __init__(self, message: str, api_key: int | None = None, api_version: int | None = None,
                 correlation_id: int | None = None) -> None:
        super().__init__(message)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


def parse_request_header(frame: memoryview | bytes) -> RequestHeader:
    """Read the header of any request, also of api keys/versions we do not serve.

    The header version comes from Kafka's tables for every known api; unknown
    api keys are read as header v2 (every api added since Kafka 2.4 is
    flexible from v0), which reads the same client id either way.
    """
    if len(frame) < 8:
        raise HeaderError(f"request header truncated ({len(frame)} bytes)")
    api_key, api_version, correlation_id = _FIXED.unpack_from(frame, 0)
    try:
        hv = request_header_version(api_key, api_version)
        if hv == 0:
            return _new_tuple(RequestHeader, (api_key, api_version, correlation_id, None, 8, 0))
        fast = _client_id_fast(frame, hv)
        if fast is not None:
            # tuple.__new__ straight: RequestHeader's own __new__ is a Python frame per request
            return _new_tuple(RequestHeader, (api_key, api_version, correlation_id, fast[0],
                                              fast[1], hv))
        r = Reader(frame, 8)
        client_id = r.nullable_string()
        if hv >= 2:
            r.skip_tagged_fields()
        return RequestHeader(api_key, api_version, correlation_id, client_id, r.pos, hv)
    except ProtocolError as exc:
        raise HeaderError(str(exc), api_key, api_version, correlation_id) from None


def _client_id_fast(frame: memoryview | bytes, hv: int) -> tuple[str | None, int] | None:
    """The usual header (a short ASCII-or-UTF-8 client id, no tagged fields) read with one
    unpack: it is a tenth of the node's time on small produce requests through Reader.
    None when anything is unusual: the Reader then reads it, with its errors."""
    if len(frame) < 10:
        return None
    (n,) = _INT16.unpack_from(frame, 8)
    if n == -1:
        client_id, end = None, 10
    elif n < 0 or 10 + n > len(frame):
        return None
    else:
        try:
            client_id, end = str(frame[10:10 + n], "utf-8"), 10 + n
        except UnicodeDecodeError:
            return None
    if hv >= 2:
        # an empty tagged-field section is one zero byte; anything else goes the long way
        if end >= len(frame) or frame[end] != 0:
            return None
        end += 1
    return client_id, end


def encode_response_header(correlation_id: int, header_version: int) -> bytes:
    if header_version == 0:
        return _CORR.pack(correlation_id)
    return _CORR.pack(correlation_id) + b"\x00"


def encode_request_header(api_key: int, api_version: int, correlation_id: int,
                          client_id: str | None) -> bytes:
    """For tests and tools that speak to a broker."""
    hv = request_header_version(api_key, api_version)
    out = bytearray(_FIXED.pack(api_key, api_version, correlation_id))
    if hv >= 1:
        if client_id is None:
            out += b"\xff\xff"
        else:
            data = client_id.encode()
            out += struct.pack(">h", len(data)) + data
    if hv >= 2:
        out += b"\x00"
    return bytes(out)


def response_body_offset(frame: memoryview | bytes, header_version: int) -> int:
    """Where a response body starts in its frame: after the correlation id, and after v1's
    tagged fields (skipped: no response header tag is defined that we read)."""
    pos = 4
    if header_version >= 1:
        count, pos = decode_uvarint_within(frame, pos, len(frame))
        for _ in range(count):
            _tag, pos = decode_uvarint_within(frame, pos, len(frame))
            size, pos = decode_uvarint_within(frame, pos, len(frame))
            pos += size
    return pos
