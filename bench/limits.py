"""The machine's physical limits, measured in the same run as the systems: loopback TCP
throughput and sequential disk write.

    python -m bench.limits [--dir DIR] [--seconds 2] [--disk-mb 1024]
"""

from __future__ import annotations

import argparse
import os
import socket
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

BLOCK = 1024 * 1024
MB = 1024 * 1024


@dataclass
class Limits:
    loopback_mb_per_sec: float
    disk_buffered_mb_per_sec: float
    disk_fsync_mb_per_sec: float

    def lines(self) -> list[str]:
        return [f"loopback TCP: {self.loopback_mb_per_sec:,.0f} MB/s (one connection, 1 MiB sends)",
                f"sequential disk write: {self.disk_buffered_mb_per_sec:,.0f} MB/s into the page "
                f"cache, {self.disk_fsync_mb_per_sec:,.0f} MB/s including the final fsync"]


def loopback_mb_per_sec(seconds: float = 2.0) -> float:
    """One TCP connection over 127.0.0.1: a sender thread and a receiver thread (both release
    the GIL in the system calls, so they run on both cores)."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    received = [0]

    def receive() -> None:
        conn, _ = server.accept()
        buf = bytearray(BLOCK)
        view = memoryview(buf)
        with conn:
            while True:
                n = conn.recv_into(view)
                if n == 0:
                    break
                received[0] += n

    thread = threading.Thread(target=receive, daemon=True)
    thread.start()
    payload = b"x" * BLOCK
    with socket.create_connection(("127.0.0.1", port)) as client:
        start = time.monotonic()
        deadline = start + seconds
        while time.monotonic() < deadline:
            client.sendall(payload)
        client.shutdown(socket.SHUT_WR)
        thread.join()
        elapsed = time.monotonic() - start
    server.close()
    return received[0] / elapsed / MB


def disk_write_mb_per_sec(directory: Path, total_mb: int = 1024) -> tuple[float, float]:
    """Sequential 1 MiB writes of `total_mb` into a new file: (MB/s until the last write
    returned, MB/s including the fsync that puts it on the device)."""
    block = os.urandom(BLOCK)
    fd, name = tempfile.mkstemp(prefix="odradek-disk-", dir=directory)
    try:
        start = time.monotonic()
        for _ in range(total_mb):
            os.write(fd, block)
        written = time.monotonic()
        os.fsync(fd)
        synced = time.monotonic()
    finally:
        os.close(fd)
        os.unlink(name)
    return total_mb / (written - start), total_mb / (synced - start)


def measure(directory: Path, seconds: float = 2.0, disk_mb: int = 1024) -> Limits:
    buffered, synced = disk_write_mb_per_sec(directory, disk_mb)
    return Limits(loopback_mb_per_sec(seconds), buffered, synced)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--disk-mb", type=int, default=1024)
    args = parser.parse_args(argv)
    for line in measure(args.dir, args.seconds, args.disk_mb).lines():
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
