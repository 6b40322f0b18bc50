"""The node's lag evaluation of a consumer group (Burrow's rules, kept by the node from the
history of commits; docs/lag.md), asked for by a DescribeGroups v5 with a client id the node
knows: its answer carries the evaluation in a tagged field other clients skip. Used by
`odradek group describe` and the console.
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

LAG_CLIENT_ID = "odradek-group-cli"
LAG_TRAILER = b"ODRADEK-LAG"


async def _secured_frame(host: str, port: int, body: bytes, security: Any,
                         timeout: float) -> bytes:
    from odradek.network import Channel

    ch = Channel(host, port, LAG_CLIENT_ID, 64 * 1024 * 1024, security)
    try:
        return bytes(await ch.call(15, 5, body, timeout))
    finally:
        await ch.close()


def node_lag(bootstrap: str, group: str, timeout: float,
             client_settings: dict[str, str] | None = None) -> dict[str, Any] | None:
    """The node's lag evaluation of a group (None when the node does not give one, or the
    client settings ask for a security the native connection does not speak)."""
    import asyncio

    from kio.schema.describe_groups.v5.request import DescribeGroupsRequest

    from odradek.client.config import resolve_bootstrap
    from odradek.client.connection import fetch_supports, security_of
    from odradek.protocol.messages import encode_request

    settings = client_settings or {}
    if not fetch_supports(settings):
        return None
    security = security_of(settings)
    host, _, port = resolve_bootstrap(bootstrap).split(",")[0].rpartition(":")
    body = encode_request(DescribeGroupsRequest(groups=(group,),
                                                include_authorized_operations=False))
    client = LAG_CLIENT_ID.encode()
    # request header v2: api key 15, version 5, correlation id, client id, no tags
    header = struct.pack(">hhih", 15, 5, 1, len(client)) + client + b"\x00"
    try:
        if security is not None:
            frame = asyncio.run(_secured_frame(host.strip("[]") or "localhost", int(port),
                                               body, security, timeout))
        else:
            with socket.create_connection((host.strip("[]") or "localhost", int(port)),
                                          timeout=timeout) as sock:
                sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
                size = struct.unpack(">i", _recv(sock, 4))[0]
                frame = _recv(sock, size)
    except (OSError, ValueError, struct.error):
        return None
    if not frame.endswith(LAG_TRAILER):
        return None
    n = struct.unpack(">i", frame[-len(LAG_TRAILER) - 4:-len(LAG_TRAILER)])[0]
    payload = frame[-len(LAG_TRAILER) - 4 - n:-len(LAG_TRAILER) - 4]
    try:
        return json.loads(payload).get(group)  # type: ignore[no-any-return]
    except (ValueError, AttributeError):
        return None


def _recv(sock: socket.socket, n: int) -> bytes:
    if n < 0 or n > 64 * 1024 * 1024:
        raise ValueError(f"bad frame size {n}")
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ValueError("connection closed")
        buf += chunk
    return bytes(buf)
