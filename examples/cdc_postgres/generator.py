"""Deterministic change events for the `customers` table, produced to an odradek topic.

    python -m examples.cdc_postgres.generate -b localhost:9092 --topic customers.cdc --count 5000

Rows are created, updated many times, deleted (often followed by a tombstone) and created
again under the same id, so a batch holds several changes for one key and the order of
changes matters.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass

from confluent_kafka import Producer

from examples._args import parser

TIERS = ("free", "pro", "enterprise")
TS_BASE = 1_767_225_600_000


@dataclass(frozen=True)
class Change:
    key: bytes
    value: bytes | None  # None: a tombstone
    pk: int


def changes(count: int, seed: int = 3, keys: int = 60) -> Iterator[Change]:
    rng = random.Random(seed)
    live: dict[int, dict[str, object]] = {}
    tombstone_due: int | None = None
    for i in range(count):
        ts = TS_BASE + 1000 * i
        if tombstone_due is not None:
            pk, tombstone_due = tombstone_due, None
            yield Change(_key(pk), None, pk)
            continue
        pk = rng.randrange(1, keys + 1)
        old = live.get(pk)
        if old is None:
            row = {"id": pk, "name": f"customer {pk}", "email": _email(rng, pk),
                   "tier": rng.choice(TIERS), "balance_cents": rng.randrange(0, 10_000)}
            live[pk] = row
            envelope = {"op": "c" if i % 7 else "r", "before": None, "after": row, "ts_ms": ts}
        elif rng.random() < 0.2:
            del live[pk]
            envelope = {"op": "d", "before": old, "after": None, "ts_ms": ts}
            if rng.random() < 0.5:
                tombstone_due = pk
        else:
            row = dict(old)
            field = rng.choice(("email", "tier", "balance_cents", "name"))
            if field == "email":
                row["email"] = _email(rng, pk)
            elif field == "tier":
                row["tier"] = rng.choice(TIERS)
            elif field == "balance_cents":
                row["balance_cents"] = int(row["balance_cents"]) + rng.randrange(-500, 1_000)  # type: ignore[call-overload]
            else:
                row["name"] = f"customer {pk} v{i}"
            live[pk] = row
            envelope = {"op": "u", "before": old, "after": row, "ts_ms": ts}
        yield Change(_key(pk), json.dumps(envelope).encode(), pk)


def _key(pk: int) -> bytes:
    return json.dumps({"id": pk}).encode()


def _email(rng: random.Random, pk: int) -> str | None:
    # Some customers have no email: NULLs must survive the trip into PostgreSQL.
    return None if rng.random() < 0.15 else f"c{pk}.{rng.randrange(1000)}@example.com"


def produce(bootstrap: str, topic: str, batch: list[Change], partitions: int | None = None) -> None:
    """In order, one key always on one partition (an explicit one when `partitions` is given)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    failures: list[object] = []

    def report(err: object, _msg: object) -> None:
        if err is not None:
            failures.append(err)

    for change in batch:
        if partitions is None:
            producer.produce(topic, value=change.value, key=change.key, on_delivery=report)
        else:
            producer.produce(topic, value=change.value, key=change.key,
                             partition=change.pk % partitions, on_delivery=report)
        producer.poll(0)
    remaining = producer.flush(60)
    if remaining or failures:
        raise RuntimeError(f"{remaining} changes undelivered, errors: {failures[:3]}")


def main(argv: list[str] | None = None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--topic", default="customers.cdc")
    ap.add_argument("--count", type=int, default=5_000)
    ap.add_argument("--seed", type=int, default=3)
    args = ap.parse_args(argv)
    produce(args.bootstrap, args.topic, list(changes(args.count, args.seed)))
    print(f"produced {args.count} change events to {args.topic}")


if __name__ == "__main__":
    main()
