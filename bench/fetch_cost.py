"""The node's CPU per Fetch request at the tail of a log (a consumer that is caught up).

    python -m bench.fetch_cost [--requests 20000] [--partitions 6] [--parked-connections 8]
                               [--version 11] [--profile DIR]

Two shapes, both for the (empty) tail of every partition of a fresh topic:
- immediate: max_wait 0, pipelined 16 deep on one connection: parse, look up, encode, send;
- immediate unpipelined: the same, one request in flight on each of N connections (every
  request and response its own read and write);
- parked: max_wait 10 ms, min_bytes 1, one request in flight on each of N connections (as
  caught-up consumers with fetch.wait.max.ms=10): each also parks in the delayed fetch,
  times out, reads again.
The node's CPU seconds (psutil) over the requests answered is the cost per request; compare
two versions of the node with it on a busy machine (the load average is printed).
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import os
import socket
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil
from kio.static.primitive import i8, i32, i64
from tests.support import wire
from tests.support.broker import BrokerProcess

from bench.run import Profiler
from odradek.client.admin import ensure_topic

WINDOW = 16


def fetch_frames(version: int, topic: str, partitions: int, max_wait_ms: int) -> list[bytes]:
    mod: Any = importlib.import_module(f"kio.schema.fetch.v{version}.request")
    parts = tuple(mod.FetchPartition(partition=i32(p), current_leader_epoch=i32(-1),
                                     fetch_offset=i64(0), log_start_offset=i64(-1),
                                     partition_max_bytes=i32(1 << 20))
                  for p in range(partitions))
    fields: dict[str, Any] = dict(
        replica_id=i32(-1), max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=i32(1), max_bytes=i32(50 << 20), isolation_level=i8(0), session_id=i32(0),
        session_epoch=i32(-1), rack_id="", forgotten_topics_data=(),
        topics=(mod.FetchTopic(topic=topic, partitions=parts),))
    req = mod.FetchRequest(**fields)
    return [wire.frame(wire.request_payload(req, cid)) for cid in range(1, WINDOW + 1)]


def _drain(sock: socket.socket, buf: bytearray) -> int:
    """Read what is there; how many whole responses it completed."""
    chunk = sock.recv(1 << 20)
    if not chunk:
        raise RuntimeError("the node closed the connection")
    buf += chunk
    pos = done = 0
    while len(buf) - pos >= 4:
        size = struct.unpack_from(">i", buf, pos)[0]
        if len(buf) - pos - 4 < size:
            break
        pos += 4 + size
        done += 1
    del buf[:pos]
    return done


def run_connection(port: int, frames: list[bytes], count: int, window: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = bytearray()
        sent = received = 0
        while received < count:
            while sent < count and sent - received < window:
                sock.sendall(frames[sent % len(frames)])
                sent += 1
            received += _drain(sock, buf)


def measure(ps: psutil.Process, port: int, frames: list[bytes], count: int, connections: int,
            window: int, profile: Path | None) -> tuple[float, float, float]:
    """(node CPU seconds, of which system, wall seconds) for `count` requests in all."""
    run_connection(port, frames, 20, window)  # warm up
    profiler = Profiler(profile.parent if profile else None, ps.pid)
    if profile is not None:
        profiler.start(profile.name)
    before = ps.cpu_times()
    start = time.monotonic()
    per = count // connections
    threads = [threading.Thread(target=run_connection, args=(port, frames, per, window))
               for _ in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - start
    after = ps.cpu_times()
    if profile is not None:
        print(f"# node's busiest frames (py-spy)\n{profiler.stop()}")
    cpu = (after.user - before.user) + (after.system - before.system)
    return cpu, after.system - before.system, wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--parked-connections", type=int, default=8)
    parser.add_argument("--version", type=int, default=11, choices=range(4, 13))
    parser.add_argument("--bootstrap-port", type=int, default=0,
                        help="measure a node already running on this loopback port (its pid "
                             "via --pid) instead of starting one")
    parser.add_argument("--pid", type=int, default=0)
    parser.add_argument("--profile", type=Path, default=None, metavar="DIR")
    parser.add_argument("--only", default="", help="measure just this shape (e.g. parked)")
    args = parser.parse_args(argv)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="odradek-fetch-cost-") as tmp:
        node = None
        if args.bootstrap_port:
            port, pid = args.bootstrap_port, args.pid
        else:
            node = BrokerProcess(Path(tmp) / "data").start()
            port, pid = node.port, node.proc.pid  # type: ignore[union-attr]
        try:
            ps = psutil.Process(pid)
            topic = f"fetch-cost-{os.getpid()}"
            ensure_topic(f"127.0.0.1:{port}", topic, args.partitions)
            shapes = [("immediate", 0, 1, WINDOW, args.requests),
                      ("immediate unpipelined", 0, args.parked_connections, 1,
                       args.requests // 2),
                      ("parked", 10, args.parked_connections, 1,
                       min(args.requests, 300 * args.parked_connections))]
            before = ps.cpu_times()
            time.sleep(3.0)
            after = ps.cpu_times()
            idle = ((after.user - before.user) + (after.system - before.system)) / 3.0
            print(f"idle node: {idle * 1e3:.1f} ms CPU per second", flush=True)
            for name, wait_ms, conns, window, count in shapes:
                if args.only and name != args.only:
                    continue
                frames = fetch_frames(args.version, topic, args.partitions, wait_ms)
                prof = args.profile / f"fetch-{name.replace(' ', '-')}" if args.profile else None
                cpu, system, wall = measure(ps, port, frames, count, conns, window, prof)
                print(f"fetch v{args.version} {name} (max_wait {wait_ms} ms, {args.partitions} "
                      f"partitions, {conns} connections): {count} requests in {wall:.2f} s, "
                      f"{cpu / count * 1e6:.1f} us/request (sys "
                      f"{system / count * 1e6:.1f}; less idle "
                      f"{(cpu - idle * wall) / count * 1e6:.1f})", flush=True)
        finally:
            if node is not None:
                node.stop()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
