"""Is any bootstrap address reachable? A plain TCP connect, with the cause in plain words.

librdkafka keeps retrying an address that refuses or does not resolve and only says
`_TRANSPORT` when the request times out; the CLI asks the network itself first.
"""

from __future__ import annotations

import os
import socket
import struct

__all__ = ["Unreachable", "check_reachable", "split_address"]


class Unreachable(Exception):
    """No bootstrap address answered; the message names each address and its cause."""

    def __init__(self, message: str, bad_address: bool = False) -> None:
        super().__init__(message)
        self.bad_address = bad_address


def split_address(address: str) -> tuple[str, int]:
    """`host:port` (IPv6 as `[::1]:9092`) -> (host, port); ValueError when malformed."""
    text = address.strip()
    if "://" in text:
        text = text.split("://", 1)[1]  # a listener URL (PLAINTEXT://h:p) names h:p too
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bad bootstrap address {address.strip()!r}: use host:port, "
                         "e.g. localhost:9092")
    return host, int(port)


def _cause(exc: BaseException, timeout: float) -> str:
    if isinstance(exc, NotKafka):
        return str(exc)
    if isinstance(exc, socket.gaierror):
        return "host name not resolved"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, TimeoutError | socket.timeout):
        return f"timed out after {timeout:g}s"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return str(exc) or type(exc).__name__


class NotKafka(OSError):
    """Something listens at the address, but it does not answer as a Kafka node."""


# ApiVersions v0 (api key 18), correlation id 0x0D7AD3C, client id "odradek-cli": every
# Kafka node answers it before authentication, whatever its version.
_CORRELATION = 0x0D7AD3C
_CLIENT = b"odradek-cli"
_PROBE = struct.pack(">hhih", 18, 0, _CORRELATION, len(_CLIENT)) + _CLIENT
_PROBE = struct.pack(">i", len(_PROBE)) + _PROBE


def _probe(sock: socket.socket, timeout: float) -> None:
    sock.sendall(_PROBE)
    head = b""
    try:
        while len(head) < 8:
            chunk = sock.recv(8 - len(head))
            if not chunk:
                raise NotKafka("it closed the connection without a Kafka answer")
            head += chunk
    except TimeoutError:
        raise NotKafka(f"connected, but no Kafka answer within {timeout:g}s") from None
    size, correlation = struct.unpack(">ii", head)
    if correlation != _CORRELATION or not 0 < size < 1 << 24:
        raise NotKafka("it answered, but not as a Kafka node")


def _try(host: str, port: int, timeout: float, probe: bool) -> None:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    last: OSError | None = None
    for family, kind, proto, _, addr in infos:
        with socket.socket(family, kind, proto) as sock:
            sock.settimeout(timeout)
            try:
                sock.connect(addr)
            except OSError as exc:
                last = exc
                continue
            if probe:
                _probe(sock, timeout)
            return
    raise last or OSError(os.strerror(111))


def check_reachable(bootstrap: str, timeout: float, probe: bool = True) -> None:
    """Return once one address of the comma-separated list accepts a connection (and, with
    `probe`, answers a Kafka ApiVersions request); raise Unreachable naming every address
    with its cause otherwise. Leave `probe` off for TLS listeners, which want a handshake
    first."""
    addresses = [a.strip() for a in bootstrap.split(",") if a.strip()]
    if not addresses:
        raise Unreachable("no bootstrap address given: use -b host:port", bad_address=True)
    try:
        targets = [(a, *split_address(a)) for a in addresses]
    except ValueError as exc:
        raise Unreachable(str(exc), bad_address=True) from None
    causes = []
    for address, host, port in targets:
        try:
            _try(host, port, timeout, probe)
            return
        except OSError as exc:
            causes.append(f"{address} ({_cause(exc, timeout)})")
    if len(causes) == 1:
        address, _, cause = causes[0].partition(" (")
        raise Unreachable(f"cannot reach {address}: {cause[:-1]}")
    raise Unreachable("cannot reach any bootstrap address: " + ", ".join(causes))
