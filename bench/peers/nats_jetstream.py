"""NATS JetStream (Debian's nats-server) with file storage, driven by nats-py.

Durability comparable to acks=1 without fsync per record: file storage, the server's default
sync interval (it does not fsync each message). A partition is one stream with one subject
(`<stream>-<i>` on subject `<stream>.<i>`). Producers publish with JetStream acks
(publish_async, up to nats-py's pending window in flight); consumers are ordered push
consumers from the first message.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from bench.peers.base import Phase, ServerProcess, ensure_debs, free_port, wait_port
from odradek.perf.confluent import Pacer, latency_of, make_payload, stamp_payload

CLIENT = "bench.peers.nats_jetstream"
WINDOW = 1000


class NatsSystem:
    name = "nats"
    client = CLIENT
    description = ("Debian nats-server, JetStream file storage, nats-py: publish_async with "
                   "acks, ordered push consumers; a partition is a stream")

    def __init__(self) -> None:
        self.server: ServerProcess | None = None
        self.port = 0

    def start(self, workdir: Path) -> None:
        ensure_debs(["nats-server"], binary="nats-server")
        data = workdir / f"nats-{time.time_ns()}"
        data.mkdir()
        self.port = free_port()
        cmd = ["nats-server", "-a", "127.0.0.1", "-p", str(self.port), "-js",
               "-sd", str(data / "jetstream")]
        self.server = ServerProcess(cmd, data / "server.log")
        self.server.start()
        wait_port(self.port, self.server.proc, 30, data / "server.log")

    @property
    def endpoint(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def cpu_seconds(self) -> float:
        return self.server.cpu_seconds() if self.server else 0.0

    def create(self, stream: str, partitions: int) -> None:
        asyncio.run(_create(self.endpoint, stream, partitions))

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


def _names(stream: str, partitions: int) -> list[tuple[str, str]]:
    return [(f"{stream}-{i}", f"{stream}.{i}") for i in range(partitions)]


async def _create(endpoint: str, stream: str, partitions: int) -> None:
    import nats
    from nats.js.api import StorageType

    nc = await nats.connect(endpoint)
    try:
        js = nc.jetstream()
        for name, subject in _names(stream, partitions):
            await js.add_stream(name=name, subjects=[subject], storage=StorageType.FILE)
    finally:
        await nc.close()


async def _produce(endpoint: str, stream: str, partitions: int, size: int, max_records: int,
                   max_seconds: float) -> Phase:
    import nats

    nc = await nats.connect(endpoint)
    js = nc.jetstream()
    subjects = [s for _, s in _names(stream, partitions)]
    payload = make_payload(size)
    sent = 0
    batch_no = 0
    start = time.monotonic()
    deadline = start + max_seconds
    while sent < max_records and time.monotonic() < deadline:
        # A sliding window: nats-py's own semaphore bounds the acks outstanding.
        subject = subjects[batch_no % len(subjects)]
        n = min(WINDOW, max_records - sent)
        for _ in range(n):
            await js.publish_async(subject, payload)
        sent += n
        batch_no += 1
    await js.publish_async_completed()
    elapsed = time.monotonic() - start
    await nc.close()
    return Phase(sent, sent * size, elapsed)


def produce(endpoint: str, stream: str, partitions: int, size: int, max_records: int,
            max_seconds: float) -> Phase:
    return asyncio.run(_produce(endpoint, stream, partitions, size, max_records, max_seconds))


async def _subscribe_all(js: Any, stream: str, partitions: int, cb: Any) -> list[Any]:
    from nats.js.api import DeliverPolicy

    return [await js.subscribe(subject, stream=name, cb=cb, ordered_consumer=True,
                               deliver_policy=DeliverPolicy.ALL)
            for name, subject in _names(stream, partitions)]


async def _consume(endpoint: str, stream: str, partitions: int, expected: int, total: Any,
                   ready: Any, go: Any, timeout_s: float) -> Phase:
    import nats

    nc = await nats.connect(endpoint)
    js = nc.jetstream()
    state = {"count": 0, "bytes": 0, "last": 0.0}
    loop = asyncio.get_running_loop()
    if ready is not None:
        ready.set()
        await loop.run_in_executor(None, go.wait)
    start = time.monotonic()
    state["last"] = start

    async def on_msg(msg: Any) -> None:
        state["count"] += 1
        state["bytes"] += len(msg.data)
        state["last"] = time.monotonic()

    subs = await _subscribe_all(js, stream, partitions, on_msg)
    target = expected
    while state["count"] < target:
        if total is not None and total.value >= 0:
            target = min(expected, total.value)
        await asyncio.sleep(0.005)
        if time.monotonic() - state["last"] > timeout_s:
            break
    for sub in subs:
        await sub.unsubscribe()
    await nc.close()
    return Phase(state["count"], state["bytes"], state["last"] - start)


def consume(endpoint: str, stream: str, partitions: int, size: int, expected: int, total: Any,
            ready: Any, go: Any, timeout_s: float) -> Phase:
    return asyncio.run(_consume(endpoint, stream, partitions, expected, total, ready, go,
                                timeout_s))


async def _e2e_produce(endpoint: str, stream: str, partitions: int, size: int, rate: float,
                       seconds: float, warmup_s: float) -> tuple[int, float]:
    import nats

    nc = await nats.connect(endpoint)
    js = nc.jetstream()
    subjects = [s for _, s in _names(stream, partitions)]
    payload = bytearray(make_payload(max(size, 9)))
    pacer = Pacer(rate)
    measured_start = time.monotonic() + warmup_s
    end = measured_start + seconds
    sent = 0
    pending: list[Any] = []
    while (now := time.monotonic()) < end:
        warm = now < measured_start
        if rate > 0:
            # Pacer sleeps; yield to the loop instead so acks are read meanwhile.
            n = int((now - pacer.start) * rate) - sent
            if n <= 0:
                await asyncio.sleep(0.0005)
                continue
            n = min(n, WINDOW)
        else:
            n = WINDOW
        for i in range(n):
            stamp_payload(payload, warm)
            pending.append(await js.publish_async(subjects[(sent + i) % len(subjects)],
                                                  bytes(payload)))
        sent += n
        if len(pending) >= WINDOW:
            await asyncio.gather(*pending)
            pending.clear()
    await asyncio.gather(*pending)
    await nc.close()
    return sent, seconds


def e2e_produce(endpoint: str, stream: str, partitions: int, size: int, rate: float,
                seconds: float, warmup_s: float) -> tuple[int, float]:
    return asyncio.run(_e2e_produce(endpoint, stream, partitions, size, rate, seconds, warmup_s))


async def _e2e_consume(endpoint: str, stream: str, partitions: int, expected: Any,
                       timeout_s: float, ready: Any) -> tuple[int, list[float]]:
    import nats

    nc = await nats.connect(endpoint)
    js = nc.jetstream()
    latencies: list[float] = []
    state = {"count": 0, "last": time.monotonic()}

    async def on_msg(msg: Any) -> None:
        state["count"] += 1
        state["last"] = time.monotonic()
        ms = latency_of(msg.data, time.monotonic_ns())
        if ms is not None:
            latencies.append(ms)

    subs = await _subscribe_all(js, stream, partitions, on_msg)
    ready.set()
    while expected.value < 0 or state["count"] < expected.value:
        await asyncio.sleep(0.005)
        if time.monotonic() - state["last"] > timeout_s:
            break
    for sub in subs:
        await sub.unsubscribe()
    await nc.close()
    return state["count"], latencies


def e2e_consume(endpoint: str, stream: str, partitions: int, expected: Any, timeout_s: float,
                ready: Any) -> tuple[int, list[float]]:
    return asyncio.run(_e2e_consume(endpoint, stream, partitions, expected, timeout_s, ready))
