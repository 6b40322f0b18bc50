"""Tansu driven by the same librdkafka C clients as `odradek-rdkafka-c-2.16`: bench/c/rdkafka_produce
and bench/c/rdkafka_consume linked against confluent-kafka's bundled librdkafka 2.16, with the
same settings (bench.peers.rdkafka_c_produce's for produce, odradek's shipped ones for
consume), so the C rows have a Kafka-protocol peer in the same run, as the confluent-kafka rows
have (`odradek` against `tansu`). Not Debian's librdkafka 2.0.2 (`odradek-rdkafka-c`'s): it
cannot talk to Tansu 0.6 at all (ApiVersions: "Read underflow", then "1/1 brokers are down").

Produce counts the records whose delivery report has no error, as on odradek, and checks that
count against Tansu's true log end (bench.peers.tansu.log_end: its high watermark is its last
batch's base offset + 1); the smaller of the two is the row's count. No together or end-to-end
phases.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from bench.peers import odradek_rdkafka_c, odradek_rdkafka_c_bundled
from bench.peers.base import Phase
from bench.peers.rdkafka_c_produce import produce_bundled
from bench.peers.tansu import TansuSystem, log_end

CLIENT = "bench.peers.tansu_rdkafka_c"
consume = odradek_rdkafka_c_bundled.consume


class TansuRdkafkaCSystem(TansuSystem):
    name = "tansu-rdkafka-c-2.16"
    client = CLIENT
    together = False
    latency = False

    def start(self, workdir: Path) -> None:
        if not odradek_rdkafka_c.TOOL.exists():
            raise RuntimeError(f"{odradek_rdkafka_c.TOOL} is missing: run `make bench-tools`")
        super().start(workdir)

    @property
    def description(self) -> str:
        return ("the same Tansu 0.6 (memory storage only: no disk, unlike odradek's durable "
                "log), driven by exactly the clients, library and settings of "
                "`odradek-rdkafka-c-2.16`: produced by bench/c/rdkafka_produce (counted from "
                "its delivery reports and checked against Tansu's true log end), consumed by "
                "bench/c/rdkafka_consume")


def produce(endpoint: str, stream: str, partitions: int, size: int, max_records: int,
            max_seconds: float, processes: int = 1) -> Phase:
    if processes > 1:
        raise ValueError("the C producer runs as one process")
    before = log_end(endpoint, stream)
    res = produce_bundled(endpoint, stream, size, max_records, max_seconds)
    in_log = sum(log_end(endpoint, stream).values()) - sum(before.values())
    if in_log < res.records:
        print(f"tansu: {res.records - in_log} of {res.records} acknowledged records not in the "
              "log", file=sys.stderr)
    acked = min(in_log, res.records)
    return Phase(acked, acked * size, res.seconds)


def e2e_produce(*_: Any) -> tuple[int, float]:
    raise ValueError("tansu-rdkafka-c has no end-to-end phases")


e2e_consume = e2e_produce
