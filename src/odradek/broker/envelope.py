"""Envelope (api 58, KIP-590): a forwarded admin request keeps its client's principal.

A broker forwards admin requests (CreateTopics, CreateAcls, ...) to the active controller
over its own authenticated connection. Without an envelope the controller would judge them
as the broker's principal, which holds ClusterAction and is usually a super user: any client
could then do anything. So with an authorizer the broker wraps the request, whole (header and
body), with the client's principal (Kafka's DefaultPrincipalData, version-prefixed) and
address; the controller checks ClusterAction on the broker's own principal for the envelope,
then runs the inner request as the client's, and wraps its answer.

Without an authorizer no principal is ever looked at, and requests go as they are.
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Callable
from typing import Any

from odradek.broker.authz import SessionHeader, cluster_allowed, session_of
from odradek.broker.handlers.common import decode, respond
from odradek.metadata.acls import AclOperation
from odradek.protocol.apis import ApiKey, ApiVersionRange
from odradek.protocol.errors import ErrorCode, ProtocolError
from odradek.protocol.headers import encode_response_header, parse_request_header
from odradek.protocol.primitives import Reader, encode_uvarint
from odradek.security.principal import KafkaPrincipal, Session

__all__ = ["VERSIONS", "decode_principal", "encode_principal", "serve_envelope"]

VERSIONS = (ApiVersionRange(ApiKey.ENVELOPE, 0, 0),)
_PRINCIPAL_VERSION = 0  # DefaultPrincipalData's highest version
_I16 = struct.Struct(">h")
_MAX_NAME = 1 << 16


def _compact(text: str) -> bytes:
    data = text.encode()
    return encode_uvarint(len(data) + 1) + data


def encode_principal(principal: KafkaPrincipal, token_authenticated: bool = False) -> bytes:
    """Kafka's DefaultKafkaPrincipalBuilder.serialize: a version (int16), then
    DefaultPrincipalData (flexible: compact strings type and name, a boolean, no tags)."""
    return (_I16.pack(_PRINCIPAL_VERSION) + _compact(principal.principal_type)
            + _compact(principal.name) + (b"\x01" if token_authenticated else b"\x00")
            + encode_uvarint(0))


def decode_principal(data: bytes | memoryview) -> KafkaPrincipal:
    """The inverse; ProtocolError when the bytes are not one (fuzzed in the unit tests)."""
    try:
        r = Reader(memoryview(data))
        version = r.int16()
        if version != _PRINCIPAL_VERSION:
            raise ProtocolError(f"DefaultPrincipalData version {version} is not known")
        kind, name = r.compact_string(), r.compact_string()
        r.boolean()
        for _ in range(r.uvarint()):  # tagged fields: none defined, skipped
            r.uvarint()
            r.skip(r.uvarint())
        if r.remaining():
            raise ProtocolError("bytes after DefaultPrincipalData")
    except (ValueError, IndexError, struct.error) as exc:
        raise ProtocolError(f"malformed principal: {exc}") from None
    if not kind or not name or len(name) > _MAX_NAME:
        raise ProtocolError("malformed principal: an empty type or name")
    return KafkaPrincipal(kind, name)


def client_address(data: bytes | memoryview) -> str:
    try:
        return str(ipaddress.ip_address(bytes(data)))
    except ValueError:
        raise ProtocolError(f"client_host_address of {len(data)} bytes is no IP "
                            "address") from None


def address_bytes(ip: str) -> bytes:
    try:
        return ipaddress.ip_address(ip).packed
    except ValueError:
        return b"\x7f\x00\x00\x01"  # a peer without an IP (a test double): loopback


Dispatch = Callable[[Any, memoryview, Any], Any]


async def serve_envelope(ctx: Any, header: Any, frame: memoryview, conn: Any,
                         dispatch: Dispatch) -> Any:
    """The controller's side: ClusterAction for the sender, then the inner request run as
    its client (through `dispatch`, the listener's routing, so its own checks apply)."""
    req = decode(header, frame)

    def answer(code: ErrorCode, data: bytes | None = None) -> Any:
        return respond(header, {"response_data": data, "error_code": code})

    # with no authorizer here cluster_allowed allows all (no principal is ever looked at)
    if not cluster_allowed(ctx, header, AclOperation.CLUSTER_ACTION):
        return answer(ErrorCode.cluster_authorization_failed)
    sender = session_of(header) or Session()
    inner_frame = memoryview(bytes(req.request_data))
    try:
        inner = parse_request_header(inner_frame)
        if inner.api_key == ApiKey.ENVELOPE:
            raise ProtocolError("an envelope inside an envelope")
        principal = decode_principal(req.request_principal or b"")
        address = client_address(req.client_host_address)
    except ProtocolError:
        return answer(ErrorCode.invalid_request)
    out = SessionHeader(*inner)
    out.session = Session(principal=principal, client_address=address,
                          listener_name=sender.listener_name,
                          security_protocol=sender.security_protocol)
    out.conn = conn
    out.throttle_ms = 0
    result = dispatch(conn, inner_frame, out)
    if result is not None and type(result) is not tuple:
        result = await result
    if result is None:  # no answer (never for the forwarded admin APIs)
        return answer(ErrorCode.invalid_request)
    hv, parts = result
    data = encode_response_header(inner.correlation_id, hv) + b"".join(bytes(p) for p in parts)
    return answer(ErrorCode.none, data)
