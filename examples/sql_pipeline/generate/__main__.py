"""Produce page views (JSON) for the sql_pipeline example and print what its flows must write.

    python -m examples.sql_pipeline.generate -b HOST:PORT --topic page-views --count 400

Every 13th view is a bot and every 17th has a broken load time (-1): the pipeline drops both.
The expected output is printed for the default `--var slow_ms=800`: the number of slow views,
and the last record per region on the stats topic.
"""

from __future__ import annotations

import json

from examples._args import parser
from examples.sql_pipeline import _generator as gen


def expected_lines(events: list[dict[str, object]]) -> list[str]:
    """The stats records as `odradek consume -f '%k %v\\n'` prints them, by region."""
    stats = gen.expected_stats(events)
    return [f"{region} " + json.dumps({"region": region, "views": views, "total_ms": total},
                                      separators=(",", ":"))
            for region, (views, total) in sorted(stats.items())]


def main(argv: list[str] | None = None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--topic", default="page-views", help="the topic to produce to")
    ap.add_argument("--count", type=int, default=400, help="how many page views")
    ap.add_argument("--seed", type=int, default=7, help="another seed, other views")
    args = ap.parse_args(argv)
    events = gen.events(args.count, args.seed)
    gen.produce(args.bootstrap, args.topic, events)
    slow = sum(gen.expected_slow(events).values())
    print(f"produced {len(events)} page views to {args.topic}")
    print(f"expected: {slow} slow views (ms > {gen.SLOW_MS}); the latest stats record per region:")
    for line in expected_lines(events):
        print(f"  {line}")


if __name__ == "__main__":
    main()
