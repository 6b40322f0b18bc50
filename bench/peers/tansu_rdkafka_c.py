"""Tansu read by the same librdkafka C consumer as `odradek-rdkafka-c-2.16` (bench/c/rdkafka_consume
linked against confluent-kafka's bundled librdkafka 2.16, odradek's shipped settings), so the C
consumer's rows have a Kafka-protocol peer in the same run, as the confluent-kafka rows have
(`odradek` against `tansu`). Not Debian's librdkafka 2.0.2 (`odradek-rdkafka-c`'s): it cannot
talk to Tansu 0.6 at all (ApiVersions: "Read underflow", then "1/1 brokers are down").

Produce fills the topic the way `odradek-rdkafka-c` does, with odradek's columnar client (the
same record batches on both brokers), and counts what Tansu holds from the true log end
(bench.peers.tansu: its high watermark is its last batch's base offset + 1, which the
columnar producer's own count would take at its word). Its produce rows are there only because
every phase produces first. No together or end-to-end phases.
"""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path
from typing import Any

from bench.peers import odradek_rdkafka_c, odradek_rdkafka_c_bundled
from bench.peers.base import Phase
from bench.peers.tansu import TansuSystem, log_end
from odradek.perf import runs

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
        return ("the same Tansu 0.6 (memory storage only), consumed by bench/c/rdkafka_consume "
                "linked against confluent-kafka's bundled librdkafka 2.16, with exactly the client "
                "and settings of `odradek-rdkafka-c-2.16`; produce rows are odradek's "
                "columnar client's (the same batches as odradek's), counted from "
                "Tansu's true log end")


def produce(endpoint: str, stream: str, partitions: int, size: int, max_records: int,
            max_seconds: float, processes: int = 1) -> Phase:
    before = log_end(endpoint, stream)
    # the columnar producer counts from the high watermarks, wrong on Tansu: keep its message
    # out and count from the log end
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        res = runs.run_producer_columnar(endpoint, stream, max_records, size, "1", out=None,
                                         max_seconds=max_seconds, processes=processes)
    acked = sum(log_end(endpoint, stream).values()) - sum(before.values())
    if acked < res.records:
        print(f"tansu: {res.records - acked} of {res.records} records not in the log",
              file=sys.stderr)
    return Phase(acked, acked * size, res.seconds)


def e2e_produce(*_: Any) -> tuple[int, float]:
    raise ValueError("tansu-rdkafka-c has no end-to-end phases")


e2e_consume = e2e_produce
