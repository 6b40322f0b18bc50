"""Deterministic JSON events for the lake ETL example, produced to an odradek topic.

    python -m examples.lake_etl.generate -b localhost:9092 --topic events --count 10000

Event times spread over several days and carry assorted UTC offsets, some of them a few
minutes either side of midnight, so that the date partition (a UTC date) is not the local
date written in the string.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

from confluent_kafka import Producer

from examples._args import parser

KINDS = ("view", "click", "purchase")
OFFSETS_MIN = (0, 60, 120, -300, 330, -480)
EPOCH = datetime(2026, 3, 1, tzinfo=UTC)


def events(count: int, seed: int = 7, days: int = 5) -> Iterator[dict[str, object]]:
    """`count` events, the same for the same seed: what a tracking service would emit."""
    rng = random.Random(seed)
    for i in range(count):
        # Every 10th event lands within 10 minutes of a UTC midnight.
        if i % 10 == 0:
            at = EPOCH + timedelta(days=rng.randrange(days + 1), seconds=rng.randrange(-600, 600))
        else:
            at = EPOCH + timedelta(seconds=rng.randrange(days * 86400), milliseconds=rng.randrange(1000))
        zone = timezone(timedelta(minutes=rng.choice(OFFSETS_MIN)))
        kind = rng.choice(KINDS)
        amount = Decimal(rng.randrange(100, 100_000)) / 100 if kind == "purchase" else None
        yield {
            "event_id": f"e-{seed}-{i:07d}",
            "user_id": rng.randrange(1, 200),
            "kind": kind,
            "amount": amount,
            "ts": at.astimezone(zone).isoformat(timespec="milliseconds"),
        }


def _number(value: object) -> float:
    # A JSON number, not a string: Spark reads it into DECIMAL from its text, exactly.
    if isinstance(value, Decimal):
        return float(value)
    raise TypeError(f"not JSON serialisable: {value!r}")


def encode(event: dict[str, object]) -> bytes:
    return json.dumps(event, default=_number).encode()


def produce(bootstrap: str, topic: str, batch: list[dict[str, object]], partitions: int | None = None) -> None:
    """Keyed by user, so one user's events stay in order on one partition."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    failures: list[object] = []

    def report(err: object, _msg: object) -> None:
        if err is not None:
            failures.append(err)

    for event in batch:
        key = str(event["user_id"]).encode()
        if partitions is None:
            producer.produce(topic, value=encode(event), key=key, on_delivery=report)
        else:
            producer.produce(topic, value=encode(event), key=key,
                             partition=int(event["user_id"]) % partitions,  # type: ignore[call-overload]
                             on_delivery=report)
        producer.poll(0)
    remaining = producer.flush(60)
    if remaining or failures:
        raise RuntimeError(f"{remaining} events undelivered, errors: {failures[:3]}")


def main(argv: list[str] | None = None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--topic", default="events")
    ap.add_argument("--count", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    produce(args.bootstrap, args.topic, list(events(args.count, args.seed)))
    print(f"produced {args.count} events to {args.topic}")


if __name__ == "__main__":
    main()
