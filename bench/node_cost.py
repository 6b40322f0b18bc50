"""The node's CPU per request, from a raw-socket client that sends fixed requests.

    python -m bench.node_cost [--requests 20000] [--records-per-batch 1,1000] [--fetch-bytes 1000,20000]

A confluent-kafka client shapes its requests by timing (linger, how fast it runs), so the
node's CPU per GB it reports moves with the machine's load. Here every request is the same:
Produce v7 (acks=1) of one batch of N records of 100 B, or Fetch v11 of a fixed byte range,
pipelined 16 deep from one connection whose client does nothing but count responses. The node's
CPU seconds (psutil) per request and per GB are then a property of the node alone, good for
comparing two versions of the node on a busy machine.
"""

from __future__ import annotations

import argparse
import datetime
import os
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

import psutil
from kio.schema.fetch.v11 import request as f11
from kio.static.primitive import i8, i32, i64
from tests.support import requests as rq
from tests.support import wire
from tests.support.broker import BrokerProcess

from bench.run import Profiler
from bench.topics import ensure_topic

WINDOW = 16
GB = 1e9


def _cpu(ps: psutil.Process) -> float:
    t = ps.cpu_times()
    return t.user + t.system


def pipelined(port: int, frames: list[bytes], count: int) -> None:
    """Send `count` requests (cycling through `frames`) WINDOW deep; wait for every response."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = bytearray()
        sent = received = 0
        while received < count:
            while sent < count and sent - received < WINDOW:
                sock.sendall(frames[sent % len(frames)])
                sent += 1
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise RuntimeError("the node closed the connection")
            buf += chunk
            pos = 0
            while len(buf) - pos >= 4:
                size = struct.unpack_from(">i", buf, pos)[0]
                if len(buf) - pos - 4 < size:
                    break
                pos += 4 + size
                received += 1
            del buf[:pos]


def produce_frames(topic: str, records: int, size: int) -> list[bytes]:
    now = int(time.time() * 1000)
    batch = wire.build_batch_v2([wire.Rec(None, b"x" * size, [], now)] * records)
    return [wire.frame(wire.request_payload(rq.produce(7, topic, 0, batch), cid))
            for cid in range(1, WINDOW + 1)]


def fetch_frames(topic: str, max_bytes: int) -> list[bytes]:
    req = f11.FetchRequest(
        replica_id=i32(-1), max_wait=datetime.timedelta(0), min_bytes=i32(1),
        max_bytes=i32(max_bytes), isolation_level=i8(0), session_id=i32(0),
        session_epoch=i32(-1), rack_id="", forgotten_topics_data=(),
        topics=(f11.FetchTopic(topic=topic, partitions=(f11.FetchPartition(
            partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(0),
            log_start_offset=i64(-1), partition_max_bytes=i32(max_bytes)),)),))
    return [wire.frame(wire.request_payload(req, cid)) for cid in range(1, WINDOW + 1)]


def measure(ps: psutil.Process, port: int, frames: list[bytes], count: int,
            profile: Path | None = None) -> float:
    pipelined(port, frames, min(count, 200))  # warm up: imports, caches
    profiler = Profiler(profile.parent if profile else None, ps.pid)
    if profile is not None:
        profiler.start(profile.name)
    before = _cpu(ps)
    pipelined(port, frames, count)
    cpu = _cpu(ps) - before
    if profile is not None:
        print(f"# node's busiest frames (py-spy, GIL holders)\n{profiler.stop()}")
    return cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--records-per-batch", default="1,1000")
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--fetch-bytes", default="1000,20000,1000000",
                        help="partition_max_bytes of the fetches (the response carries whole "
                             "batches up to about that much).")
    parser.add_argument("--profile", type=Path, default=None, metavar="DIR",
                        help="py-spy the node during each measurement into DIR.")
    args = parser.parse_args(argv)

    def where(name: str) -> Path | None:
        return args.profile / name if args.profile else None
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="odradek-cost-") as tmp:
        node = BrokerProcess(Path(tmp) / "data")
        node.start()
        try:
            ps = psutil.Process(node.proc.pid)  # type: ignore[union-attr]
            ensure_topic(node.bootstrap, "cost", 1)
            for n in (int(x) for x in args.records_per_batch.split(",")):
                frames = produce_frames("cost", n, args.record_size)
                count = max(200, args.requests // max(1, n // 100))
                cpu = measure(ps, node.port, frames, count, where(f"produce-{n}"))
                nbytes = count * n * args.record_size
                print(f"produce v7, {n} x {args.record_size} B per request: {count} requests, "
                      f"{cpu / count * 1e6:.1f} us/request, {cpu / (nbytes / GB):.2f} CPU s/GB",
                      flush=True)
            for max_bytes in (int(x) for x in args.fetch_bytes.split(",")):
                frames = fetch_frames("cost", max_bytes)
                count = max(200, args.requests // max(1, max_bytes // 10000))
                cpu = measure(ps, node.port, frames, count, where(f"fetch-{max_bytes}"))
                print(f"fetch v11, partition_max_bytes {max_bytes}: {count} requests, "
                      f"{cpu / count * 1e6:.1f} us/request", flush=True)
        finally:
            node.stop()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
