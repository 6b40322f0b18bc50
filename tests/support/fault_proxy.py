"""A TCP proxy on loopback that cuts connections mid-request, for idempotence tests.

Clients connect to the proxy (the node advertises the proxy's address), the proxy relays
bytes to the node and back. Each connection gets a random byte budget per direction;
when one runs out the proxy closes both sides, often right after a request reached the
node and before its response came back: the client then retries a batch that was
written, which is exactly what idempotence has to absorb.
"""

from __future__ import annotations

import contextlib
import random
import socket
import threading
from types import TracebackType


class FaultProxy:
    def __init__(self, upstream_port: int, *, seed: int = 0,
                 request_budget: tuple[int, int] = (1_000, 30_000),
                 response_budget: tuple[int, int] = (100, 3_000)) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self._rng = random.Random(seed)
        self._rng_lock = threading.Lock()
        self.request_budget = request_budget
        self.response_budget = response_budget
        self.cutting = threading.Event()
        self.cutting.set()
        self.cuts = 0
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = int(self._listener.getsockname()[1])
        self._stopped = threading.Event()
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def stop(self) -> None:
        self._stopped.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            for s in list(self._conns):
                self._close(s)

    def _budget(self, bounds: tuple[int, int]) -> int:
        with self._rng_lock:
            return self._rng.randint(*bounds)

    @staticmethod
    def _close(s: socket.socket) -> None:
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            s.close()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
                upstream.settimeout(None)
            except OSError:
                self._close(client)
                continue
            with self._lock:
                self._conns.update((client, upstream))
            pair = (client, upstream)
            for src, dst, bounds in ((client, upstream, self.request_budget),
                                     (upstream, client, self.response_budget)):
                threading.Thread(target=self._pump, args=(src, dst, self._budget(bounds), pair),
                                 daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, budget: int,
              pair: tuple[socket.socket, socket.socket]) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if self.cutting.is_set() and len(data) >= budget:
                    # relay part of it, then cut: a request (or response) torn mid-way
                    if budget > 0:
                        dst.sendall(data[:budget])
                    with self._lock:
                        self.cuts += 1
                    break
                budget -= len(data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in pair:
                self._close(s)
            with self._lock:
                self._conns.difference_update(pair)
