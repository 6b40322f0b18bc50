"""odradek driven by librdkafka C clients of our own, bench/c/rdkafka_produce and
bench/c/rdkafka_consume (`make bench-tools` builds both against Debian's librdkafka-dev).

No Python between librdkafka and the count, so the rows show what the node does for a native
client: produce with the C producer's settings (bench.peers.rdkafka_c_produce: acks=1,
linger.ms=5, 1 MiB batches), consume with odradek's shipped fetch settings
(odradek.client.consumer_settings, passed as -X). No together or end-to-end phases. Debian's
librdkafka is 2.0.2: it has no `fetch.queue.backoff.ms` (2.3), so there the queue-full backoff
is librdkafka's fixed second and only the larger queue helps (C_SETTINGS).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from bench.peers.base import Phase
from bench.peers.c_tools import CONSUME_TOOL as TOOL
from bench.peers.c_tools import PRODUCE_TOOL
from bench.peers.c_tools import bundled_tool as bundled_tool
from bench.peers.odradek_node import OdradekSystem
from bench.peers.rdkafka_c_produce import produce_debian
from odradek.client.consumer_settings import SHIPPED

CLIENT = "bench.peers.odradek_rdkafka_c"
# Debian's librdkafka (2.0.2) ignores fetch.queue.backoff.ms and pauses a fixed second on a full
# queue: the biggest queue is its only fix (bench.consumer_settings, part c: 0.4M records/s
# with the shipped settings alone, 1.3-2.3M with these).
C_SETTINGS: dict[str, object] = {**SHIPPED, "queued.max.messages.kbytes": 2_097_151,
                                 "queued.min.messages": 10_000_000}
BUNDLED = TOOL.with_name("rdkafka_consume_bundled")


class OdradekRdkafkaCSystem(OdradekSystem):
    name = "odradek-rdkafka-c"
    client = CLIENT
    together = False
    latency = False

    def start(self, workdir: Path) -> None:
        for tool in (TOOL, PRODUCE_TOOL):
            if not tool.exists():
                raise RuntimeError(f"{tool} is missing: run `make bench-tools`")
        super().start(workdir)

    @property
    def description(self) -> str:
        return ("the same odradek node, driven by librdkafka's C API on Debian's librdkafka "
                "2.0.2: produced by bench/c/rdkafka_produce (acks=1, linger.ms=5, 1 MiB "
                "batches, one process) and consumed by bench/c/rdkafka_consume "
                "(rd_kafka_consumer_poll per record, odradek's shipped fetch settings with "
                "the 2 GB queue 2.0.2 needs)")


def produce(endpoint: str, stream: str, partitions: int, size: int, max_records: int,
            max_seconds: float, processes: int = 1) -> Phase:
    if processes > 1:
        raise ValueError("the C producer runs as one process")
    return produce_debian(endpoint, stream, size, max_records, max_seconds)


def run_tool(endpoint: str, stream: str, expected: int, timeout_s: float,
             settings: dict[str, object] | None = None, tool: Path = TOOL) -> dict[str, Any]:
    xs = [a for k, v in (SHIPPED if settings is None else settings).items()
          for a in ("-X", f"{k}={v}")]
    out = subprocess.run([str(tool), "-b", endpoint, "-t", stream, "-n", str(expected),
                          "-T", str(timeout_s), *xs], capture_output=True, text=True,
                         timeout=timeout_s + 600)
    if not out.stdout.strip():
        raise RuntimeError(f"rdkafka_consume failed ({out.returncode}): {out.stderr}")
    return dict(json.loads(out.stdout.splitlines()[-1]))


def consume(endpoint: str, stream: str, partitions: int, size: int, expected: int, total: Any,
            ready: Any, go: Any, timeout_s: float, processes: int = 1) -> Phase:
    if total is not None or ready is not None:
        raise ValueError("the C consumer has no follow mode (together phases)")
    res = run_tool(endpoint, stream, expected, timeout_s, C_SETTINGS)
    return Phase(int(res["records"]), int(res["bytes"]), float(res["seconds"]))
