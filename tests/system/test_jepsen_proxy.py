"""Issue 15, short seeded run: the fault proxy: Produce/Fetch/EndTxn/AddPartitionsToTxn/TxnOffsetCommit delayed or black-holed, 10-30% loss as stalls and resets, connection resets.
The workloads run under the seed's plan on the shared namespaced cluster, the faults heal,
the final reads run and the checker must find nothing Kafka forbids."""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from tests.system.cluster_support import wait_until
from tests.system.jepsen.proxy import Proxy, Rules, frame_header
from tests.system.jepsen_checks import assert_clean_run


@pytest.mark.timeout(600)
@pytest.mark.parametrize("seed", [1])
def test_jepsen_proxy(seed: int) -> None:
    assert_clean_run("proxy", seed, ["w1", "w4"])


def _frame(api_key: int, corr: int, payload: bytes = b"x") -> bytes:
    body = struct.pack(">hhi", api_key, 0, corr) + payload
    return struct.pack(">i", len(body)) + body


def test_proxy_black_holes_and_delays_chosen_api_keys() -> None:
    """Through the proxy to a loopback server that records the frames it gets: a black-holed
    EndTxn (26) and everything after it on that connection never arrive and the connection is
    reset when the rule is lifted; a delayed Produce (0) arrives, in order, after the others
    on its connection; other keys pass."""
    got: list[tuple[int, int]] = []
    lock = threading.Lock()
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=read, args=(conn,), daemon=True).start()

    def read(conn: socket.socket) -> None:
        buf = b""
        while True:
            try:
                data = conn.recv(65536)
            except OSError:
                return
            if not data:
                return
            buf += data
            while len(buf) >= 4 and len(buf) >= 4 + struct.unpack(">i", buf[:4])[0]:
                size = struct.unpack(">i", buf[:4])[0]
                _, key, _, corr = frame_header(buf[:4 + size])
                with lock:
                    got.append((key, corr))
                buf = buf[4 + size:]

    threading.Thread(target=serve, daemon=True).start()
    proxy = Proxy(0)
    try:
        addr = proxy.listen({1: f"127.0.0.1:{server.getsockname()[1]}"}, "127.0.0.1")[1]
        host, port = addr.rsplit(":", 1)
        proxy.set_rules(Rules(blackhole={26}, delay_ms={0: 300}))
        a = socket.create_connection((host, int(port)))
        a.sendall(_frame(3, 1) + _frame(26, 2) + _frame(3, 3))
        b = socket.create_connection((host, int(port)))
        b.sendall(_frame(0, 10) + _frame(3, 11))
        c = socket.create_connection((host, int(port)))
        c.sendall(_frame(18, 20))
        wait_until(lambda: {(3, 1), (0, 10), (3, 11), (18, 20)} <= set(got),
                   "the frames not held back", 60)
        with lock:
            assert got.index((0, 10)) < got.index((3, 11))  # order kept behind the delay
        assert proxy.stats.blackholed == 1 and proxy.stats.delayed == 1
        proxy.clear()
        a.settimeout(30)
        with pytest.raises(ConnectionResetError):
            while a.recv(1):
                pass
        with lock:
            assert (26, 2) not in got and (3, 3) not in got
        for s in (a, b, c):
            s.close()
    finally:
        proxy.close()
        server.close()
