"""One Kafka request from a tool, for the APIs confluent-kafka's admin client lacks
(DescribeQuorum, DescribeCluster with fenced brokers, ElectLeaders, reassignments), and
`cluster_state`: the brokers and the metadata quorum as `odradek cluster describe` shows them
(the system tests read it too).

Blocking, one connection per call: the bootstrap addresses are tried in turn. The request
goes to any broker; the broker forwards what only the active controller answers. With a
`security` (network.ClientSecurity: TLS, SASL PLAIN/SCRAM, the CLI's --command-config) the
call goes through a network.Channel, the connection the nodes use among themselves.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from typing import Any

from odradek.broker.entities import build
from odradek.network import Channel, ChannelError
from odradek.protocol.apis import response_header_version
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import encode_request_header, response_body_offset
from odradek.protocol.messages import decode_response, encode_request, request_class

CLIENT_ID = "odradek-cli"
METADATA_TOPIC = "__cluster_metadata"
DESCRIBE_CLUSTER = 60
DESCRIBE_QUORUM = 55
MAX_FRAME = 100 << 20


class CallFailed(Exception):
    """No bootstrap address answered (the message says why)."""


def _servers(bootstrap: str) -> list[tuple[str, int]]:
    out = []
    for item in bootstrap.split(","):
        host, _, port = item.strip().rpartition(":")
        if host and port.isdigit():
            out.append((host.strip("[]"), int(port)))
    return out


def _exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("the node closed the connection")
        buf += chunk
    return bytes(buf)


async def _secured(host: str, port: int, entity: Any, security: Any, timeout_s: float) -> Any:
    ch = Channel(host, port, CLIENT_ID, MAX_FRAME, security)
    try:
        return await ch.request(entity, timeout_s)
    finally:
        await ch.close()


def request(bootstrap: str, entity: Any, timeout_s: float = 30.0, security: Any = None) -> Any:
    """Send a kio request entity over TLS/SASL as `security` says; the decoded response."""
    errors = []
    for host, port in _servers(bootstrap):
        try:
            return asyncio.run(_secured(host, port, entity, security, timeout_s))
        except ChannelError as exc:
            errors.append(f"{host}:{port}: {exc}")
    raise CallFailed("; ".join(errors) or f"no address in {bootstrap!r}")


def call(bootstrap: str, api_key: int, version: int, values: dict[str, Any],
         timeout_s: float = 30.0, security: Any = None) -> Any:
    """Send a request built from plain values; the decoded response entity."""
    entity = build(request_class(api_key, version), values)
    if security is not None:
        return request(bootstrap, entity, timeout_s, security)
    body = encode_request(entity)
    head = encode_request_header(api_key, version, 1, CLIENT_ID)
    errors = []
    for host, port in _servers(bootstrap):
        try:
            with socket.create_connection((host, port), timeout=timeout_s) as sock:
                sock.sendall(struct.pack(">i", len(head) + len(body)) + head + body)
                size = struct.unpack(">i", _exact(sock, 4))[0]
                if not 4 <= size <= MAX_FRAME:
                    raise ConnectionError(f"response frame of {size} bytes")
                frame = memoryview(_exact(sock, size))
            hv = response_header_version(api_key, version)
            return decode_response(api_key, version, frame, response_body_offset(frame, hv))
        except OSError as exc:
            errors.append(f"{host}:{port}: {exc.strerror or exc}")
    raise CallFailed("; ".join(errors) or f"no address in {bootstrap!r}")


def cluster_state(bootstrap: str, timeout: float = 10.0, security: Any = None) -> dict[str, Any]:
    """Brokers (DescribeCluster v2, fenced ones included) and the quorum (DescribeQuorum)."""
    dc = call(bootstrap, DESCRIBE_CLUSTER, 2, {"include_cluster_authorized_operations": False,
                                               "endpoint_type": 1,
                                               "include_fenced_brokers": True}, timeout,
              security)
    if int(dc.error_code) != 0:
        raise RuntimeError(f"DescribeCluster: {ErrorCode(int(dc.error_code)).name.upper()}")
    brokers = [{"id": int(b.broker_id), "host": b.host, "port": int(b.port), "rack": b.rack,
                "fenced": bool(b.is_fenced)} for b in dc.brokers]
    state: dict[str, Any] = {"cluster_id": dc.cluster_id, "controller_id": int(dc.controller_id),
                             "brokers": sorted(brokers, key=lambda b: b["id"])}
    dq = call(bootstrap, DESCRIBE_QUORUM, 2, {"topics": [{
        "topic_name": METADATA_TOPIC, "partitions": [{"partition_index": 0}]}]}, timeout,
        security)
    if int(dq.error_code) != 0 or not dq.topics or not dq.topics[0].partitions:
        state["quorum"] = {"error": ErrorCode(int(dq.error_code)).name.upper()}
        return state
    p = dq.topics[0].partitions[0]
    if int(p.error_code) != 0:
        state["quorum"] = {"error": ErrorCode(int(p.error_code)).name.upper()}
        return state
    now = int(time.time() * 1000)
    hw = int(p.high_watermark)

    def replica(r: Any, status: str) -> dict[str, Any]:
        leo = int(r.log_end_offset)
        return {"node_id": int(r.replica_id), "log_end_offset": leo,
                "lag": max(0, hw - leo) if leo >= 0 else None,
                "last_fetch_ms": int(r.last_fetch_timestamp),
                "last_caught_up_ms": int(r.last_caught_up_timestamp), "status": status,
                "caught_up_ago_ms": (now - int(r.last_caught_up_timestamp)
                                     if int(r.last_caught_up_timestamp) >= 0 else None)}

    leader = int(p.leader_id)
    voters = [replica(r, "Leader" if int(r.replica_id) == leader else "Follower")
              for r in p.current_voters]
    observers = [replica(r, "Observer") for r in p.observers]
    followers = [v for v in voters if v["status"] == "Follower"]
    state["quorum"] = {
        "leader_id": leader, "leader_epoch": int(p.leader_epoch), "high_watermark": hw,
        "max_follower_lag": max((v["lag"] or 0 for v in followers), default=0),
        "max_follower_lag_time_ms": max((v["caught_up_ago_ms"] or 0 for v in followers),
                                        default=0),
        "voters": voters, "observers": observers}
    return state
