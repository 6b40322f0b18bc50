"""odradek itself, driven by confluent-kafka (librdkafka batches in C), acks=1."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import psutil
from tests.support.broker import BrokerProcess

from bench.peers.base import Phase
from odradek.perf import confluent, runs

CLIENT = "bench.peers.odradek_node"


class OdradekSystem:
    name = "odradek"
    client = CLIENT
    def __init__(self, settings: dict[str, str] | None = None, producer_processes: int = 1,
                 consumer_processes: int = 1) -> None:
        self.settings = settings or {}
        # produce-only and consume-only phases: this many client processes, each its own
        # confluent-kafka client (one Python process tops out near one core); "together"
        # and end-to-end phases use one producer and one consumer process
        self.producer_processes = producer_processes
        self.consumer_processes = consumer_processes
        self.node: BrokerProcess | None = None
        self._ps: psutil.Process | None = None

    def start(self, workdir: Path) -> None:
        self.node = BrokerProcess(Path(tempfile.mkdtemp(dir=workdir)) / "data",
                                  settings=self.settings)
        self.node.start()
        self._ps = psutil.Process(self.node.proc.pid)  # type: ignore[union-attr]

    @property
    def description(self) -> str:
        return ("odradek node, confluent-kafka client, acks=1, linger.ms=5; produce-only phases "
                f"with {self.producer_processes} producer process(es), consume-only phases with "
                f"{self.consumer_processes} consumer process(es) splitting the partitions; "
                "together and end to end: one producer and one consumer process")

    @property
    def endpoint(self) -> str:
        assert self.node is not None
        return self.node.bootstrap

    def pid(self) -> int:
        assert self.node is not None and self.node.proc is not None
        return self.node.proc.pid

    def cpu_seconds(self) -> float:
        if self._ps is None:
            return 0.0
        t = self._ps.cpu_times()
        return t.user + t.system

    def create(self, stream: str, partitions: int) -> None:
        from odradek.client.admin import ensure_topic

        ensure_topic(self.endpoint, stream, partitions)

    def stop(self) -> None:
        if self.node is not None:
            self.node.stop()


def produce(endpoint: str, stream: str, partitions: int, size: int, max_records: int,
            max_seconds: float, processes: int = 1) -> Phase:
    res = runs.run_producer(endpoint, stream, max_records, size, "1", out=None,
                            max_seconds=max_seconds, processes=processes)
    return Phase(res.records, res.records * size, res.seconds)


def consume(endpoint: str, stream: str, partitions: int, size: int, expected: int, total: Any,
            ready: Any, go: Any, timeout_s: float, processes: int = 1) -> Phase:
    if processes > 1 and total is None and ready is None:
        res = runs.run_consumer(endpoint, stream, expected, timeout_s, out=None,
                                processes=processes)
        return Phase(res.records, res.bytes, res.seconds)
    count, nbytes, start, end = confluent.consume_records(endpoint, stream, None, expected, timeout_s,
                                                     None, ready, go, total)
    return Phase(count, nbytes, end - start)


def e2e_produce(endpoint: str, stream: str, partitions: int, size: int, rate: float,
                seconds: float, warmup_s: float) -> tuple[int, float]:
    return confluent.e2e_produce(endpoint, stream, rate, seconds, size, "1", None, warmup_s)


def e2e_consume(endpoint: str, stream: str, partitions: int, expected: Any, timeout_s: float,
                ready: Any) -> tuple[int, list[float]]:
    return confluent.e2e_consume(endpoint, stream, expected, timeout_s, None, ready)
