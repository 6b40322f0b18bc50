"""odradek driven by its own columnar client instead of confluent-kafka.

The producer builds magic-2 record batches straight from numpy columns
(odradek.client.producer_columnar) and the consumer decodes fetched batches into numpy
columns (odradek.perf.columnar_consumer): neither makes a Python object per record, so the
figures show what the node takes when the client is not the bound. Same node, same
settings, acks=1. No "together" phase: the columnar perf consumer reads up to the high
watermark it sees at the start. End to end uses odradek.perf.e2e_columnar (records stamped
with their scheduled send time, one long-poll fetch per partition).
"""

from __future__ import annotations

from typing import Any

from bench.peers.base import Phase
from bench.peers.odradek_node import OdradekSystem
from odradek.perf import results, runs

CLIENT = "bench.peers.odradek_columnar"


class OdradekColumnarSystem(OdradekSystem):
    name = "odradek-columnar"
    client = CLIENT
    # no "together" phase (see the module docstring)
    together = False
    latency = True

    @property
    def description(self) -> str:
        return ("the same odradek node, driven by odradek's own columnar client (record "
                "batches built from and decoded into numpy columns, no Python object per "
                f"record), acks=1; produce-only phases with {self.producer_processes} and "
                f"consume-only phases with {self.consumer_processes} client process(es)")


def produce(endpoint: str, stream: str, partitions: int, size: int, max_records: int,
            max_seconds: float, processes: int = 1) -> Phase:
    from odradek.perf.runs import run_producer_columnar

    res = run_producer_columnar(endpoint, stream, max_records, size, "1", out=None,
                                max_seconds=max_seconds, processes=processes)
    return Phase(res.records, res.records * size, res.seconds)


def consume(endpoint: str, stream: str, partitions: int, size: int, expected: int, total: Any,
            ready: Any, go: Any, timeout_s: float, processes: int = 1) -> Phase:
    if total is not None or ready is not None:
        raise ValueError("the columnar consumer has no follow mode (together phases)")
    res = runs.run_consumer(endpoint, stream, expected, timeout_s, out=None,
                            processes=processes, client=results.COLUMNAR)
    return Phase(res.records, res.bytes, res.seconds)


def e2e_produce(endpoint: str, stream: str, partitions: int, size: int, rate: float,
                seconds: float, warmup_s: float) -> tuple[int, float]:
    from odradek.perf.e2e_columnar import e2e_produce_columnar

    return e2e_produce_columnar(endpoint, stream, rate, seconds, size, "1", None, warmup_s)


def e2e_consume(endpoint: str, stream: str, partitions: int, expected: Any, timeout_s: float,
                ready: Any) -> tuple[int, list[float]]:
    from odradek.perf.e2e_columnar import e2e_consume_columnar

    return e2e_consume_columnar(endpoint, stream, expected, timeout_s, ready)
