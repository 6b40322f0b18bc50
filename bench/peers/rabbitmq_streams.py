"""RabbitMQ Streams (Debian's rabbitmq-server with the rabbitmq_stream plugin), driven by
rstream.

Durability comparable to acks=1 without fsync per record: stream segments are written to the
page cache (RabbitMQ Streams do not fsync each message), the producer counts a record only
once the broker confirmed it. A partition is one stream (`<stream>-<i>`). The stream
protocol listens on 127.0.0.1:5552; the node gets its own name, ports, data, log and plugin
files under the run's temp dir, and HOME there for its Erlang cookie.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.peers.base import Phase, ServerProcess, ensure_debs, free_port, tail, wait_port
from odradek.perf.confluent import latency_of, make_payload, stamp_payload

CLIENT = "bench.peers.rabbitmq_streams"
STREAM_PORT = 5552
RABBIT_BIN = Path("/usr/lib/rabbitmq/bin")
BATCH = 1000
MAX_IN_FLIGHT = 50_000
USER = PASSWORD = "guest"


class RabbitSystem:
    name = "rabbitmq"
    client = CLIENT
    description = ("Debian rabbitmq-server with rabbitmq_stream, rstream: send_batch of 1000 "
                   "raw messages with publish confirms, subscribe from the first offset; a "
                   "partition is a stream")

    def __init__(self) -> None:
        self.server: ServerProcess | None = None
        self.env: dict[str, str] = {}
        self.epmd_was_running = False

    def start(self, workdir: Path) -> None:
        ensure_debs(["rabbitmq-server"], binary=str(RABBIT_BIN / "rabbitmq-server"))
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", STREAM_PORT),
                                                                     0.5):
            raise RuntimeError(f"port {STREAM_PORT} is taken: another RabbitMQ stream listener?")
        base = workdir / f"rabbitmq-{time.time_ns()}"
        base.mkdir()
        amqp_port = free_port()
        conf = base / "rabbitmq.conf"
        conf.write_text(
            f"listeners.tcp.1 = 127.0.0.1:{amqp_port}\n"
            f"stream.listeners.tcp.1 = 127.0.0.1:{STREAM_PORT}\n"
            "stream.advertised_host = 127.0.0.1\n"
            f"stream.advertised_port = {STREAM_PORT}\n"
            "log.console = false\n"
            "log.file.level = warning\n")
        self.env = {
            "HOME": str(base),
            "RABBITMQ_NODENAME": f"odradek-bench-{os.getpid()}@localhost",
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(amqp_port),
            "RABBITMQ_DIST_PORT": str(free_port()),
            "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
            "RABBITMQ_LOG_BASE": str(base / "log"),
            "RABBITMQ_CONFIG_FILE": str(conf),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"),
            "RABBITMQ_PID_FILE": str(base / "rabbitmq.pid"),
        }
        env = {**os.environ, **self.env}
        self.epmd_was_running = _epmd_running()
        subprocess.run([str(RABBIT_BIN / "rabbitmq-plugins"), "--offline", "enable",
                        "rabbitmq_stream"], env=env, check=True, capture_output=True,
                       cwd=base, timeout=120)
        log = base / "server.log"
        self.server = ServerProcess([str(RABBIT_BIN / "rabbitmq-server")], log, env=self.env,
                                    cwd=base)
        self.server.start()
        try:
            wait_port(STREAM_PORT, self.server.proc, 120, log)
        except Exception:
            raise RuntimeError(f"rabbitmq did not start:\n{tail(log)}\n"
                               f"{_logs(base / 'log')}") from None

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{STREAM_PORT}"

    def cpu_seconds(self) -> float:
        return self.server.cpu_seconds() if self.server else 0.0

    def create(self, stream: str, partitions: int) -> None:
        asyncio.run(_create(stream, partitions))

    def stop(self) -> None:
        if self.server is None:
            return
        env = {**os.environ, **self.env}
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            subprocess.run([str(RABBIT_BIN / "rabbitmqctl"), "stop"], env=env,
                           capture_output=True, timeout=60)
        self.server.stop()
        # epmd is started by Erlang on first use and outlives the node: stop it when this
        # run started it (it refuses while another Erlang node is registered).
        if not self.epmd_was_running and shutil.which("epmd"):
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                subprocess.run(["epmd", "-kill"], capture_output=True, timeout=10)


def _epmd_running() -> bool:
    if not shutil.which("epmd"):
        return False
    return subprocess.run(["epmd", "-names"], capture_output=True,
                          timeout=10).returncode == 0


def _logs(folder: Path) -> str:
    return "\n".join(tail(p) for p in sorted(folder.glob("*.log"))) if folder.exists() else ""


def _names(stream: str, partitions: int) -> list[str]:
    return [f"{stream}-{i}" for i in range(partitions)]


async def _create(stream: str, partitions: int) -> None:
    from rstream import Producer

    async with Producer("127.0.0.1", STREAM_PORT, username=USER, password=PASSWORD) as producer:
        for name in _names(stream, partitions):
            await producer.create_stream(name, exists_ok=True)


async def _produce(stream: str, partitions: int, size: int, max_records: int,
                   max_seconds: float) -> Phase:
    from rstream import Producer, RawMessage

    names = _names(stream, partitions)
    payload = make_payload(size)
    confirmed = [0]

    async def on_confirm(status: Any) -> None:
        if status.is_confirmed:
            confirmed[0] += 1

    sent = 0
    async with Producer("127.0.0.1", STREAM_PORT, username=USER, password=PASSWORD) as producer:
        start = time.monotonic()
        deadline = start + max_seconds
        batch_no = 0
        while sent < max_records and time.monotonic() < deadline:
            n = min(BATCH, max_records - sent)
            await producer.send_batch(names[batch_no % len(names)],
                                      [RawMessage(payload) for _ in range(n)],
                                      on_publish_confirm=on_confirm)
            sent += n
            batch_no += 1
            while sent - confirmed[0] > MAX_IN_FLIGHT:
                await asyncio.sleep(0.001)
        wait_until = time.monotonic() + 60
        while confirmed[0] < sent and time.monotonic() < wait_until:
            await asyncio.sleep(0.001)
        elapsed = time.monotonic() - start
    return Phase(confirmed[0], confirmed[0] * size, elapsed)


def produce(endpoint: str, stream: str, partitions: int, size: int, max_records: int,
            max_seconds: float) -> Phase:
    return asyncio.run(_produce(stream, partitions, size, max_records, max_seconds))


async def _subscribe(consumer: Any, stream: str, partitions: int, cb: Any) -> None:
    from rstream import ConsumerOffsetSpecification, OffsetType

    for name in _names(stream, partitions):
        await consumer.subscribe(name, cb, decoder=_raw,
                                 offset_specification=ConsumerOffsetSpecification(
                                     OffsetType.FIRST, None),
                                 initial_credit=10)


def _raw(body: bytes) -> bytes:
    return body


async def _consume(stream: str, partitions: int, expected: int, total: Any, ready: Any, go: Any,
                   timeout_s: float) -> Phase:
    from rstream import Consumer

    state = {"count": 0, "bytes": 0, "last": 0.0}

    async def on_msg(msg: bytes, _ctx: Any) -> None:
        state["count"] += 1
        state["bytes"] += len(msg)
        state["last"] = time.monotonic()

    consumer = Consumer("127.0.0.1", STREAM_PORT, username=USER, password=PASSWORD)
    await consumer.start()
    if ready is not None:
        ready.set()
        await asyncio.get_running_loop().run_in_executor(None, go.wait)
    start = time.monotonic()
    state["last"] = start
    await _subscribe(consumer, stream, partitions, on_msg)
    target = expected
    while state["count"] < target:
        if total is not None and total.value >= 0:
            target = min(expected, total.value)
        await asyncio.sleep(0.005)
        if time.monotonic() - state["last"] > timeout_s:
            break
    await consumer.close()
    return Phase(state["count"], state["bytes"], state["last"] - start)


def consume(endpoint: str, stream: str, partitions: int, size: int, expected: int, total: Any,
            ready: Any, go: Any, timeout_s: float) -> Phase:
    return asyncio.run(_consume(stream, partitions, expected, total, ready, go, timeout_s))


async def _e2e_produce(stream: str, partitions: int, size: int, rate: float, seconds: float,
                       warmup_s: float) -> tuple[int, float]:
    from rstream import Producer, RawMessage

    names = _names(stream, partitions)
    payload = bytearray(make_payload(max(size, 9)))
    sent = 0
    async with Producer("127.0.0.1", STREAM_PORT, username=USER, password=PASSWORD,
                        default_batch_publishing_delay=0.001) as producer:
        begin = time.monotonic()
        measured_start = begin + warmup_s
        end = measured_start + seconds
        while (now := time.monotonic()) < end:
            warm = now < measured_start
            n = int((now - begin) * rate) - sent if rate > 0 else BATCH
            if n <= 0:
                await asyncio.sleep(0.0005)
                continue
            n = min(n, BATCH)
            batch = []
            for _ in range(n):
                stamp_payload(payload, warm)
                batch.append(RawMessage(bytes(payload)))
            await producer.send_batch(names[(sent // BATCH) % len(names)], batch)
            sent += n
            await asyncio.sleep(0)
    return sent, seconds


def e2e_produce(endpoint: str, stream: str, partitions: int, size: int, rate: float,
                seconds: float, warmup_s: float) -> tuple[int, float]:
    return asyncio.run(_e2e_produce(stream, partitions, size, rate, seconds, warmup_s))


async def _e2e_consume(stream: str, partitions: int, expected: Any, timeout_s: float,
                       ready: Any) -> tuple[int, list[float]]:
    from rstream import Consumer

    latencies: list[float] = []
    state = {"count": 0, "last": time.monotonic()}

    async def on_msg(msg: bytes, _ctx: Any) -> None:
        state["count"] += 1
        state["last"] = time.monotonic()
        ms = latency_of(msg, time.monotonic_ns())
        if ms is not None:
            latencies.append(ms)

    consumer = Consumer("127.0.0.1", STREAM_PORT, username=USER, password=PASSWORD)
    await consumer.start()
    await _subscribe(consumer, stream, partitions, on_msg)
    ready.set()
    while expected.value < 0 or state["count"] < expected.value:
        await asyncio.sleep(0.005)
        if time.monotonic() - state["last"] > timeout_s:
            break
    await consumer.close()
    return state["count"], latencies


def e2e_consume(endpoint: str, stream: str, partitions: int, expected: Any, timeout_s: float,
                ready: Any) -> tuple[int, list[float]]:
    return asyncio.run(_e2e_consume(stream, partitions, expected, timeout_s, ready))
