"""`odradek transaction list|describe ID`: what the transaction coordinator knows, like
kafka-transactions.sh. confluent-kafka's admin client has no transaction apis, so these
are plain ListTransactions / DescribeTransactions requests (kio entities) over a socket."""

from __future__ import annotations

import io
import socket
import struct
from pathlib import Path
from typing import Any

import typer

from odradek.cli.common import (
    BootstrapOption,
    ClientConfigOption,
    CommandConfigOption,
    TimeoutOption,
    fail,
    native_security,
    reach,
)
from odradek.cli.table import FormatOption, check_format, emit

app = typer.Typer(help="List and describe transactions.", no_args_is_help=True)

MAX_RESPONSE = 100 * 1024 * 1024


def _encode(entity: Any) -> bytes:
    from kio.serial import entity_writer

    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(min(n - len(out), 1 << 20))
        if not chunk:
            raise ConnectionError("the node closed the connection")
        out += chunk
    return bytes(out)


async def _secured(host: str, port: int, request: Any, security: Any, timeout: float) -> bytes:
    from odradek.network import Channel

    ch = Channel(host, port, "odradek-transaction-cli", MAX_RESPONSE, security)
    try:
        frame = await ch.call(int(request.__api_key__), int(request.__version__),
                              _encode(request), timeout)
        return bytes(frame)
    finally:
        await ch.close()


def call(bootstrap: str, request: Any, response_cls: type | None, timeout: float,
         security: Any = None) -> Any:
    """One request to the first bootstrap server (over TLS/SASL as `security` says); the
    decoded response entity (the raw response bytes when `response_cls` is None)."""
    import asyncio

    from kio.serial import entity_reader
    from kio.static.primitive import i16, i32

    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    if security is not None:
        data = asyncio.run(_secured(host.strip("[]") or "localhost", int(port), request,
                                    security, timeout))
        if response_cls is None:
            return data
        _, used = entity_reader(response_cls.__header_schema__)(data, 0)
        body, _ = entity_reader(response_cls)(data, used)
        return body
    header_cls = request.__header_schema__
    header = header_cls(request_api_key=i16(request.__api_key__),
                        request_api_version=i16(request.__version__),
                        correlation_id=i32(1), client_id="odradek-transaction-cli")
    payload = _encode(header) + _encode(request)
    with socket.create_connection((host.strip("[]") or "localhost", int(port)), timeout) as s:
        s.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", _recv_exact(s, 4))
        if not 0 < size <= MAX_RESPONSE:
            raise ConnectionError(f"bad response size {size}")
        data = _recv_exact(s, size)
    if response_cls is None:
        return data
    _, used = entity_reader(response_cls.__header_schema__)(data, 0)
    body, _ = entity_reader(response_cls)(data, used)
    return body


@app.command("list")
def list_(
    state: list[str] = typer.Option([], "--state", metavar="STATE",
                                    help="Only transactions in this state, e.g. Ongoing "
                                         "(repeatable)."),
    fmt: str = FormatOption,
    bootstrap: str = BootstrapOption,
    timeout: float = TimeoutOption,
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
) -> None:
    """Transactional ids with their producer id and state."""
    from kio.schema.list_transactions.v1 import request as lt1
    from kio.schema.list_transactions.v1 import response as lt1r
    from kio.static.primitive import i64

    check_format(fmt)
    security = native_security(client_config, command_config)
    reach(bootstrap, {"security.protocol": security.protocol} if security else None)
    try:
        r = call(bootstrap, lt1.ListTransactionsRequest(
            state_filters=tuple(state), producer_id_filters=(), duration_filter=i64(-1)),
            lt1r.ListTransactionsResponse, timeout, security)
    except (OSError, ValueError) as exc:
        fail(f"cannot list transactions at {bootstrap}: {exc}")
    if int(r.error_code):
        fail(f"ListTransactions failed: {r.error_code.name.upper()}")
    rows = sorted([t.transactional_id, int(t.producer_id), t.transaction_state]
                  for t in r.transaction_states)
    emit(["TRANSACTIONAL-ID", "PRODUCER-ID", "STATE"], rows, fmt)


@app.command()
def describe(
    transactional_id: str = typer.Argument(..., help="The transactional id."),
    fmt: str = FormatOption,
    bootstrap: str = BootstrapOption,
    timeout: float = TimeoutOption,
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
) -> None:
    """State, producer id/epoch, timeout and partitions of one transactional id."""
    from kio.schema.describe_transactions.v0 import request as dt0

    from odradek.protocol.errors import ErrorCode, ProtocolError

    check_format(fmt)
    security = native_security(client_config, command_config)
    reach(bootstrap, {"security.protocol": security.protocol} if security else None)
    try:
        raw = call(bootstrap, dt0.DescribeTransactionsRequest(transactional_ids=(transactional_id,)),
                   None, timeout, security)
        states = parse_describe_transactions(raw)
    except (OSError, ValueError, ProtocolError) as exc:
        fail(f"cannot describe transaction {transactional_id!r} at {bootstrap}: {exc}")
    if not states:
        fail(f"no answer for transaction {transactional_id!r}")
    t = states[0]
    if t["error_code"]:
        fail(f"transaction {transactional_id!r}: {ErrorCode(t['error_code']).name.upper()}")
    partitions = ",".join(f"{topic}-{p}" for topic, ps in t["topics"] for p in ps)
    emit(["TRANSACTIONAL-ID", "PRODUCER-ID", "PRODUCER-EPOCH", "STATE", "TIMEOUT-MS",
          "START-MS", "PARTITIONS"],
         [[t["transactional_id"], t["producer_id"], t["producer_epoch"], t["state"],
           t["timeout_ms"], t["start_ms"], partitions or None]], fmt)


def parse_describe_transactions(data: bytes) -> list[dict[str, Any]]:
    """DescribeTransactions v0 response (header v1): read by hand, since kio refuses the
    start time -1 Kafka sends for a transaction that never started."""
    from odradek.protocol.primitives import Reader

    r = Reader(data)
    r.int32()  # correlation id
    r.tagged_fields()
    r.int32()  # throttle time
    out = []
    for _ in range(max(r.compact_array_len() or 0, 0)):
        t: dict[str, Any] = {"error_code": r.int16(), "transactional_id": r.compact_string(),
                             "state": r.compact_string(), "timeout_ms": r.int32(),
                             "start_ms": r.int64(), "producer_id": r.int64(),
                             "producer_epoch": r.int16()}
        topics = []
        for _ in range(max(r.compact_array_len() or 0, 0)):
            topic = r.compact_string()
            parts = [r.int32() for _ in range(max(r.compact_array_len() or 0, 0))]
            r.tagged_fields()
            topics.append((topic, parts))
        r.tagged_fields()
        t["topics"] = topics
        out.append(t)
    return out
