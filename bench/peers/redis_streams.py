"""Redis Streams (Debian's redis-server): redis-py for the workloads, and Redis' own C tool
redis-benchmark as the best case its server can do.

Durability comparable to acks=1 without fsync per record: appendonly yes with
appendfsync everysec, no RDB snapshots. A partition is one stream key (`<stream>-<i>`);
records go as XADD <key> * v <payload>, pipelined 1000 to a round trip.
"""

from __future__ import annotations

import csv
import io
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.peers.base import Phase, ServerProcess, ensure_debs, free_port, wait_port
from odradek.perf.confluent import Pacer, latency_of, make_payload, stamp_payload

CLIENT = "bench.peers.redis_streams"
PIPELINE = 1000
READ_COUNT = 10000


class RedisSystem:
    name = "redis"
    client = CLIENT
    description = ("Debian redis-server, appendonly everysec, redis-py: XADD pipelined 1000 "
                   "per round trip, XREAD COUNT 10000; a partition is a stream key")

    def __init__(self) -> None:
        self.server: ServerProcess | None = None
        self.port = 0

    def start(self, workdir: Path) -> None:
        ensure_debs(["redis-server", "redis-tools"], binary="redis-server")
        data = workdir / f"redis-{time.time_ns()}"
        data.mkdir()
        self.port = free_port()
        cmd = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
               "--dir", str(data), "--appendonly", "yes", "--appendfsync", "everysec",
               "--save", "", "--daemonize", "no", "--protected-mode", "no",
               "--maxmemory", "0"]
        self.server = ServerProcess(cmd, data / "server.log")
        self.server.start()
        wait_port(self.port, self.server.proc, 30, data / "server.log")

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cpu_seconds(self) -> float:
        return self.server.cpu_seconds() if self.server else 0.0

    def create(self, stream: str, partitions: int) -> None:
        # XADD creates a stream key on first use.
        pass

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()

    def native_benchmark(self, size: int, records: int) -> list[tuple[str, Phase]]:
        """redis-benchmark: XADD pipelined 64 deep over 4 connections, then XRANGE of 100
        records per request (it rereads the stream's head: Redis' best case for reads)."""
        key = f"rb-{size}-{time.time_ns()}"
        payload = make_payload(size).decode()
        produce = self._redis_benchmark(records, ["XADD", key, "*", "v", payload])
        reads = max(records // 100, 1000)
        consume = self._redis_benchmark(reads, ["XRANGE", key, "-", "+", "COUNT", "100"])
        return [("produce", Phase(records, records * size, records / produce)),
                ("consume", Phase(reads * 100, reads * 100 * size, reads / consume))]

    def _redis_benchmark(self, n: int, command: list[str]) -> float:
        """Requests per second that redis-benchmark reports for one command."""
        out = subprocess.run(["redis-benchmark", "-h", "127.0.0.1", "-p", str(self.port),
                              "-n", str(n), "-c", "4", "-P", "64", "--csv", *command],
                             capture_output=True, text=True, check=True, timeout=600).stdout
        rows = [r for r in csv.reader(io.StringIO(out)) if r and r[0] != "test"]
        return float(rows[-1][1])


def _connect(endpoint: str) -> Any:
    import redis

    host, port = endpoint.rsplit(":", 1)
    return redis.Redis(host=host, port=int(port), decode_responses=False)


def _keys(stream: str, partitions: int) -> list[str]:
    return [f"{stream}-{i}" for i in range(partitions)]


def produce(endpoint: str, stream: str, partitions: int, size: int, max_records: int,
            max_seconds: float) -> Phase:
    r = _connect(endpoint)
    keys = _keys(stream, partitions)
    payload = make_payload(size)
    sent = 0
    batch_no = 0
    start = time.monotonic()
    deadline = start + max_seconds
    while sent < max_records and time.monotonic() < deadline:
        n = min(PIPELINE, max_records - sent)
        pipe = r.pipeline(transaction=False)
        key = keys[batch_no % len(keys)]
        for _ in range(n):
            pipe.execute_command("XADD", key, "*", "v", payload)
        pipe.execute()
        sent += n
        batch_no += 1
    return Phase(sent, sent * size, time.monotonic() - start)


def consume(endpoint: str, stream: str, partitions: int, size: int, expected: int, total: Any,
            ready: Any, go: Any, timeout_s: float) -> Phase:
    r = _connect(endpoint)
    last = {k: b"0-0" for k in _keys(stream, partitions)}
    r.ping()
    if ready is not None:
        ready.set()
        go.wait()
    count = nbytes = 0
    start = time.monotonic()
    seen = start
    target = expected
    while count < target:
        if total is not None and total.value >= 0:
            target = min(expected, total.value)
        got = r.xread(last, count=READ_COUNT, block=100)
        if not got:
            if time.monotonic() - seen > timeout_s:
                break
            continue
        for key, entries in got:
            for _id, fields in entries:
                nbytes += len(fields[b"v"])
            count += len(entries)
            last[key.decode()] = entries[-1][0]
        seen = time.monotonic()
    return Phase(count, nbytes, seen - start)


def e2e_produce(endpoint: str, stream: str, partitions: int, size: int, rate: float,
                seconds: float, warmup_s: float) -> tuple[int, float]:
    r = _connect(endpoint)
    keys = _keys(stream, partitions)
    payload = bytearray(make_payload(max(size, 9)))
    pacer = Pacer(rate)
    measured_start = time.monotonic() + warmup_s
    end = measured_start + seconds
    sent = 0
    while (now := time.monotonic()) < end:
        warm = now < measured_start
        n = pacer.due(sent, PIPELINE)
        pipe = r.pipeline(transaction=False)
        for i in range(n):
            stamp_payload(payload, warm)
            pipe.execute_command("XADD", keys[(sent + i) % len(keys)], "*", "v", bytes(payload))
        pipe.execute()
        sent += n
    return sent, seconds


def e2e_consume(endpoint: str, stream: str, partitions: int, expected: Any, timeout_s: float,
                ready: Any) -> tuple[int, list[float]]:
    r = _connect(endpoint)
    last = {k: b"0-0" for k in _keys(stream, partitions)}
    r.ping()
    ready.set()
    latencies: list[float] = []
    count = 0
    seen = time.monotonic()
    while expected.value < 0 or count < expected.value:
        got = r.xread(last, count=READ_COUNT, block=100)
        now = time.monotonic_ns()
        if not got:
            if time.monotonic() - seen > timeout_s:
                break
            continue
        for key, entries in got:
            for _id, fields in entries:
                ms = latency_of(fields[b"v"], now)
                if ms is not None:
                    latencies.append(ms)
            count += len(entries)
            last[key.decode()] = entries[-1][0]
        seen = time.monotonic()
    return count, latencies
