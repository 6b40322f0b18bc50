"""Deterministic page views for the clickstream example, produced to an odradek topic.

    python -m examples.clickstream.generate -b localhost:9092 --topic page-views

Each user lives in one region and browses in sessions: a few views 2-20 s apart, then a pause of
1-5 minutes. Views are produced in event-time order, keyed by user. The last view comes an
hour after the others so that the watermark closes every earlier window.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from confluent_kafka import Producer

from examples._args import parser

REGIONS = ("eu", "us", "apac", "latam")
PAGES = ("/", "/search", "/item", "/cart", "/checkout")
START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def iso(ts: datetime) -> str:
    return ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"


def page_views(users: int = 20, sessions: int = 4, seed: int = 11) -> list[dict[str, str]]:
    rng = random.Random(seed)
    views: list[tuple[datetime, dict[str, str]]] = []
    for u in range(users):
        user = f"user-{u:03d}"
        region = REGIONS[u % len(REGIONS)]
        at = START + timedelta(milliseconds=rng.randrange(120_000))
        for _ in range(sessions):
            for _ in range(rng.randint(1, 6)):
                views.append((at, {"user": user, "region": region, "page": rng.choice(PAGES), "ts": iso(at)}))
                at += timedelta(milliseconds=rng.randrange(2_000, 20_000))
            at += timedelta(milliseconds=rng.randrange(60_000, 300_000))
    views.sort(key=lambda v: (v[0], v[1]["user"]))
    last = views[-1][0] + timedelta(hours=1, milliseconds=rng.randrange(1, 59_999))
    views.append((last, {"user": "user-closing", "region": "eu", "page": "/", "ts": iso(last)}))
    return [v for _, v in views]


def publish(bootstrap: str, topic: str, records: Iterable[tuple[bytes | None, bytes | None]]) -> int:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    n = 0
    for key, value in records:
        producer.produce(topic, value=value, key=key)
        n += 1
        producer.poll(0)
    if producer.flush(30):
        raise RuntimeError(f"not every record reached {topic}")
    return n


def produce(bootstrap: str, topic: str, users: int = 20, sessions: int = 4, seed: int = 11) -> list[dict[str, str]]:
    views = page_views(users, sessions, seed)
    publish(bootstrap, topic, ((v["user"].encode(), json.dumps(v).encode()) for v in views))
    return views


def main(argv: list[str] | None = None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--topic", default="page-views")
    ap.add_argument("--users", type=int, default=20)
    ap.add_argument("--sessions", type=int, default=4)
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args(argv)
    views = produce(args.bootstrap, args.topic, args.users, args.sessions, args.seed)
    print(f"produced {len(views)} page views to {args.topic}")


if __name__ == "__main__":
    main()
