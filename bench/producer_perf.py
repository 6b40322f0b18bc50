"""A producer benchmark that prints what kafka-producer-perf-test prints, on confluent-kafka.

    python -m bench.producer_perf --bootstrap 127.0.0.1:9092 --topic perf \
        --num-records 1000000 --record-size 100 --partitions 6 --acks 1

A thin wrapper: the tool itself is `odradek.perf` (also `odradek bench produce`).
"""

from __future__ import annotations

import argparse
import sys

from odradek.perf.confluent import Stats, high_watermarks, make_payload, producer_config
from odradek.perf.results import SAMPLE_EVERY, ProducerResult, Window, percentile
from odradek.perf.runs import run_producer

__all__ = ["SAMPLE_EVERY", "ProducerResult", "Stats", "Window", "high_watermarks", "main",
           "make_payload", "percentile", "producer_config", "run"]

run = run_producer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", "--bootstrap-server", default="localhost:9092")
    parser.add_argument("--topic", default="perf")
    parser.add_argument("--num-records", type=int, default=1_000_000)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=6,
                        help="Create the topic with this many partitions if it does not exist.")
    parser.add_argument("--acks", default="1")
    parser.add_argument("--throughput", type=float, default=-1,
                        help="At most this many records/s (-1: unlimited).")
    parser.add_argument("--processes", type=int, default=1,
                        help="Producer processes sharing the records (default 1).")
    parser.add_argument("-X", dest="extra", action="append", default=[],
                        help="A librdkafka producer setting key=value (repeatable).")
    args = parser.parse_args(argv)
    from odradek.client.admin import ensure_topic

    ensure_topic(args.bootstrap, args.topic, args.partitions)
    extra = dict(kv.split("=", 1) for kv in args.extra)
    result = run_producer(args.bootstrap, args.topic, args.num_records, args.record_size,
                          args.acks, extra, throughput=args.throughput,
                          processes=args.processes)
    return 1 if result.errors else 0


if __name__ == "__main__":
    sys.exit(main())
