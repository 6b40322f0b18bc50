"""odradek read by bench/c/rdkafka_consume linked against the librdkafka confluent-kafka's wheel
bundles (2.16: bench.peers.odradek_rdkafka_c.bundled_tool), with odradek's shipped consumer
settings: the C client Tansu is read with too (bench.peers.tansu_rdkafka_c), because Debian's
librdkafka 2.0.2 cannot talk to Tansu 0.6 (its ApiVersions answer fails to parse there: "Read
underflow"). The pair `odradek-rdkafka-c-2.16` / `tansu-rdkafka-c-2.16` is the same C client,
library and settings on both brokers. Produce fills with the columnar client, as for
`odradek-rdkafka-c`.
"""

from __future__ import annotations

from typing import Any

from bench.peers.base import Phase
from bench.peers.odradek_rdkafka_c import OdradekRdkafkaCSystem, bundled_tool, run_tool
from bench.peers.odradek_rdkafka_c import produce as produce
from odradek.client.consumer_settings import SHIPPED

CLIENT = "bench.peers.odradek_rdkafka_c_bundled"


def consume_bundled(endpoint: str, stream: str, expected: int, timeout_s: float) -> Phase:
    """The bundled-librdkafka C consumer with the shipped settings (it has the short backoff)."""
    res = run_tool(endpoint, stream, expected, timeout_s, dict(SHIPPED), bundled_tool())
    return Phase(int(res["records"]), int(res["bytes"]), float(res["seconds"]))


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
        return ("the same odradek node, consumed by bench/c/rdkafka_consume linked against "
                "confluent-kafka's bundled librdkafka 2.16 with odradek's shipped settings "
                "(the same client as `tansu-rdkafka-c-2.16`); produce rows are the columnar "
                "client's")
