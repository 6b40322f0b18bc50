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


def node_lag(bootstrap: str, group: str, timeout: float) -> dict[str, Any] | None:
    """The node's lag evaluation of a group (None when the node does not give one)."""
    from kio.schema.describe_groups.v5.request import DescribeGroupsRequest

    from odradek.client.config import resolve_bootstrap
    from odradek.protocol.messages import encode_request

    host, _, port = resolve_bootstrap(bootstrap).split(",")[0].rpartition(":")
    body = encode_request(DescribeGroupsRequest(groups=(group,),
                                                include_authorized_operations=False))
    client = LAG_CLIENT_ID.encode()
    # request header v2: api key 15, version 5, correlation id, client id, no tags
    header = struct.pack(">hhih", 15, 5, 1, len(client)) + client + b"\x00"
    try:
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
