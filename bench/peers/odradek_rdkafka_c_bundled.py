"""odradek driven by the C clients of bench/c linked against the librdkafka confluent-kafka's
wheel bundles (2.16: bench.peers.odradek_rdkafka_c.bundled_tool): bench/c/rdkafka_produce with
the C producer's settings (bench.peers.rdkafka_c_produce) and bench/c/rdkafka_consume with
odradek's shipped consumer settings. Tansu is driven by the same two programs, library and
settings (bench.peers.tansu_rdkafka_c), because Debian's librdkafka 2.0.2 cannot talk to Tansu
0.6 (its ApiVersions answer fails to parse there: "Read underflow"). So the pair
`odradek-rdkafka-c-2.16` / `tansu-rdkafka-c-2.16` compares the brokers and nothing else, on
produce and consume alike.
"""

from __future__ import annotations

from typing import Any

from bench.peers.base import Phase
from bench.peers.odradek_rdkafka_c import OdradekRdkafkaCSystem, bundled_tool, run_tool
from bench.peers.rdkafka_c_produce import produce_bundled
from odradek.client.consumer_settings import SHIPPED

CLIENT = "bench.peers.odradek_rdkafka_c_bundled"


def consume_bundled(endpoint: str, stream: str, expected: int, timeout_s: float) -> Phase:
    """The bundled-librdkafka C consumer with the shipped settings (it has the short backoff)."""
    res = run_tool(endpoint, stream, expected, timeout_s, dict(SHIPPED), bundled_tool())
    return Phase(int(res["records"]), int(res["bytes"]), float(res["seconds"]))


def produce(endpoint: str, stream: str, partitions: int, size: int, max_records: int,
            max_seconds: float, processes: int = 1) -> Phase:
    if processes > 1:
        raise ValueError("the C producer runs as one process")
    return produce_bundled(endpoint, stream, size, max_records, max_seconds)


def consume(endpoint: str, stream: str, partitions: int, size: int, expected: int, total: Any,
            ready: Any, go: Any, timeout_s: float, processes: int = 1) -> Phase:
    if total is not None or ready is not None:
        raise ValueError("the C consumer has no follow mode (together phases)")
    return consume_bundled(endpoint, stream, expected, timeout_s)


class OdradekRdkafkaCBundledSystem(OdradekRdkafkaCSystem):
    name = "odradek-rdkafka-c-2.16"
    client = CLIENT

    @property
    def description(self) -> str:
        return ("the same odradek node, driven by the C clients linked against "
                "confluent-kafka's bundled librdkafka 2.16: produced by bench/c/rdkafka_produce "
                "(acks=1, linger.ms=5, 1 MiB batches, one process), consumed by "
                "bench/c/rdkafka_consume with odradek's shipped settings; exactly the clients, "
                "library and settings of `tansu-rdkafka-c-2.16`")
