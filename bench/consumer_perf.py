"""A consumer benchmark that prints what kafka-consumer-perf-test prints, on confluent-kafka.

    python -m bench.consumer_perf --bootstrap 127.0.0.1:9092 --topic perf --num-records 1000000

A thin wrapper: the tool itself is `odradek.perf` (also `odradek bench consume`). It
reads every partition from the beginning with assign() (no group, so rebalance time is 0) in
consume(num_messages=...) batches and counts key + value bytes like the Java tool.
"""

from __future__ import annotations

import argparse
import sys

from odradek.perf.confluent import consume_records, consumer_config
from odradek.perf.results import CLIENTS, CONFLUENT, CONSUMER_HEADER, ConsumerResult
from odradek.perf.runs import run_consumer

HEADER = CONSUMER_HEADER
__all__ = ["HEADER", "ConsumerResult", "consume_records", "consumer_config", "main", "run"]

run = run_consumer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", "--bootstrap-server", default="localhost:9092")
    parser.add_argument("--topic", default="perf")
    parser.add_argument("--num-records", "--messages", type=int, default=1_000_000)
    parser.add_argument("--timeout", type=float, default=10.0,
                        help="Stop after this many seconds without a record.")
    parser.add_argument("-X", dest="extra", action="append", default=[],
                        help="A librdkafka consumer setting key=value (repeatable).")
    parser.add_argument("--processes", type=int, default=1,
                        help="Consumer processes splitting the partitions (default 1).")
    parser.add_argument("--batch", type=int, default=10000,
                        help="Records per consume(num_messages=...) call.")
    parser.add_argument("--client", choices=CLIENTS, default=CONFLUENT,
                        help="confluent-kafka (default) or columnar (odradek's own Fetch "
                             "client decoding into numpy columns).")
    args = parser.parse_args(argv)
    extra = dict(kv.split("=", 1) for kv in args.extra)
    result = run_consumer(args.bootstrap, args.topic, args.num_records, args.timeout, extra,
                          processes=args.processes, batch=args.batch, client=args.client)
    return 0 if result.records >= args.num_records else 1


if __name__ == "__main__":
    sys.exit(main())
