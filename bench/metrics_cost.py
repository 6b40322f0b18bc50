"""What the metrics add to one request, in nanoseconds, measured in-process.

    python -m bench.metrics_cost [--calls 300000] [--repeat 7]

bench.node_cost's A/B (metrics on vs off) measures the node's CPU per request with psutil,
whose 10 ms ticks and a loaded shared machine blur a difference of about a microsecond.
This measures the added work itself, with timeit's best of --repeat: the server's receipt
stamp (one perf_counter per read), measured_dispatch around a handler that answers at once
(the counts, three histogram bisects, the sums), and a partition's produce counters; the
same calls without them are subtracted. Divide by bench.node_cost's us/request for the
share of the node's CPU per request.
"""

from __future__ import annotations

import argparse
import sys
import time
import timeit
import uuid
from typing import Any

from odradek.broker.metrics.requests import RequestStats, measured_dispatch
from odradek.protocol.headers import parse_request_header

ANSWER = (0, [b"x"])


def handler(conn: Any, frame: memoryview, header: Any) -> Any:
    return ANSWER


class _Conn:
    __slots__ = ("last_done", "received")

    def __init__(self) -> None:
        self.received = self.last_done = 0.0


def _header() -> Any:
    # a Produce v7 header with a client id, as librdkafka sends it
    cid = b"rdkafka"
    raw = (0).to_bytes(2, "big") + (7).to_bytes(2, "big") + (1).to_bytes(4, "big")
    return parse_request_header(raw + len(cid).to_bytes(2, "big") + cid)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    header = _header()
    frame = memoryview(b"")
    conn = _Conn()
    measured = measured_dispatch(handler, RequestStats(slow_ms=10_000))
    perf = time.perf_counter

    def bare() -> None:
        handler(conn, frame, header)

    def with_metrics() -> None:
        # the server's stamp per read (one request per read here: the worst case)
        conn.received = conn.last_done = perf()
        measured(conn, frame, header)

    class Part:  # the counters replication.partition.Partition carries (slots, as there)
        __slots__ = ("bytes_in", "messages_in", "produce_requests", "topic", "uuid")

        def __init__(self) -> None:
            self.topic, self.uuid = "t", uuid.uuid4()
            self.produce_requests = self.messages_in = self.bytes_in = 0

    part = Part()

    def counters() -> None:
        part.produce_requests += 1
        part.messages_in += 10
        part.bytes_in += 1000

    def nothing() -> None:
        pass

    def best(fn: Any) -> float:
        return min(timeit.repeat(fn, number=args.calls, repeat=args.repeat)) / args.calls * 1e9

    base, full = best(bare), best(with_metrics)
    empty, counted = best(nothing), best(counters)
    print(f"dispatch without metrics: {base:.0f} ns/request; with: {full:.0f} ns/request; "
          f"added {full - base:.0f} ns")
    print(f"partition produce counters: added {counted - empty:.0f} ns/request")
    print(f"total added: {full - base + counted - empty:.0f} ns/request")
    return 0


if __name__ == "__main__":
    sys.exit(main())
