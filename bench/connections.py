"""Connections (issue 22): RSS per idle connection, produce throughput while they are open, and
the accept path's connect/disconnect rate.

    python -m bench.connections [--counts 1000,5000] [--src DIR] [--seconds 5]

Starts a fresh `odradek serve` (from --src, default this checkout, so an older checkout can be
measured the same way), opens N connections that each send one ApiVersions request and read
its answer (so every connection has received something), and reports the node's RSS growth per
connection right away and again after the node's idle sweep (IDLE_RELEASE_S, 5 s: twice that
is waited), then the acks=1 produce rate of 1 KB records with confluent-kafka while they are
open. The connect/disconnect rate (one client, connect, ApiVersions, close, in a loop) and the
node's CPU time per such cycle show the cost of the accept path.
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _api_versions(s: socket.socket, correlation: int) -> None:
    header = struct.pack(">hhih", 18, 0, correlation, 5) + b"bench"
    s.sendall(struct.pack(">i", len(header)) + header)


def _read_answer(s: socket.socket) -> None:
    (size,) = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))
    s.recv(size, socket.MSG_WAITALL)


def _start(src: Path, data: Path, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONUNBUFFERED": "1"}
    log = open(data.parent / "node.log", "ab")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(
        [sys.executable, "-m", "odradek.cli.main", "serve", "--data-dir", str(data),
         "--set", f"listeners=PLAINTEXT://127.0.0.1:{port}", "--set", "schema.registry.listeners=",
         "--set", "console.listeners=",
         "--set", f"admin.listeners=http://127.0.0.1:{_free_port()}"],
        stdout=log, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("node did not start")


def _produce_rate(bootstrap: str, seconds: float) -> float:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5})
    value = b"x" * 1000
    for _ in range(100):
        p.produce("bench-conns", value)
    p.flush(30)
    n = 0
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        try:
            p.produce("bench-conns", value)
            n += 1
        except BufferError:
            p.poll(0.01)
        if n % 1000 == 0:
            p.poll(0)
    p.flush(60)
    return n / (time.monotonic() - start)


def _cpu(node: psutil.Process) -> float:
    t = node.cpu_times()
    return float(t.user + t.system)


def _connect_rate(port: int, seconds: float, node: psutil.Process) -> tuple[float, float]:
    """Connects per second (wall clock: noisy on a shared machine) and the node's CPU
    microseconds per connect/ApiVersions/close (what the accept path costs)."""
    n = 0
    cpu = _cpu(node)
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        s = socket.create_connection(("127.0.0.1", port))
        _api_versions(s, n)
        _read_answer(s)
        s.close()
        n += 1
    return n / (time.monotonic() - start), (_cpu(node) - cpu) / n * 1e6


def run(src: Path, counts: list[int], seconds: float) -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    print(f"src={src}")
    with tempfile.TemporaryDirectory() as tmp:
        port = _free_port()
        proc = _start(src, Path(tmp) / "data", port)
        bootstrap = f"127.0.0.1:{port}"
        try:
            admin = AdminClient({"bootstrap.servers": bootstrap})
            admin.create_topics([NewTopic("bench-conns", 1, 1)])["bench-conns"].result(30)
            node = psutil.Process(proc.pid)
            rate, cpu_us = _connect_rate(port, seconds, node)
            print(f"connect+ApiVersions+close: {rate:.0f}/s, node CPU {cpu_us:.0f} us each")
            base_tput = _produce_rate(bootstrap, seconds)
            print(f"produce, no idle connections: {base_tput:.0f} rec/s of 1 KB")
            for count in counts:
                base = node.memory_info().rss
                socks = []
                for i in range(count):
                    s = socket.create_connection(("127.0.0.1", port))
                    _api_versions(s, i)
                    socks.append(s)
                for s in socks:
                    _read_answer(s)
                time.sleep(0.5)
                now = (node.memory_info().rss - base) / count
                time.sleep(11)
                later = (node.memory_info().rss - base) / count
                tput = _produce_rate(bootstrap, seconds)
                print(f"{count} idle connections: RSS +{now / 1024:.1f} KiB/conn at once, "
                      f"+{later / 1024:.1f} KiB/conn after 11 s idle; node RSS "
                      f"{node.memory_info().rss / 2**20:.0f} MiB; produce {tput:.0f} rec/s")
                for s in socks:
                    s.close()
                time.sleep(1)
        finally:
            proc.terminate()
            proc.wait(30)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--counts", default="1000,5000")
    ap.add_argument("--src", default=str(Path(__file__).resolve().parent.parent / "src"))
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args()
    run(Path(args.src), [int(c) for c in args.counts.split(",") if c.strip()], args.seconds)


if __name__ == "__main__":
    main()
