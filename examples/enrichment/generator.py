"""Deterministic data for the enrichment example: user profiles on a compacted topic (keyed by
user id; updates and tombstones) and a stream of user actions that refer to them.

    python -m examples.enrichment.generate -b localhost:9092 --users users --events actions

`profiles(...)` gives a change log: a first profile per user, then tier upgrades, then a few
deletions (tombstones). `actions(...)` refers to known users and, now and then, unknown ones.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from examples._args import parser

TIERS = ("free", "plus", "pro")
COUNTRIES = ("de", "fr", "us", "br", "jp", "in")
ACTIONS = ("login", "search", "view", "buy")
START = datetime(2026, 3, 3, 8, 0, tzinfo=UTC)

Change = tuple[str, dict[str, str] | None]  # (user id, profile or None for a deletion)


def create_table_topic(bootstrap: str, topic: str, partitions: int = 2) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    spec = NewTopic(topic, partitions, 1, config={"cleanup.policy": "compact"})
    for fut in admin.create_topics([spec]).values():
        fut.result(30)
    return topic


def profiles(users: int = 30, updates: int = 20, deletes: int = 3, seed: int = 21) -> list[Change]:
    rng = random.Random(seed)
    ids = [f"u{u:04d}" for u in range(users)]
    out: list[Change] = []
    for uid in ids:
        out.append((uid, {"user_id": uid, "name": f"name-{uid}", "tier": "free",
                          "country": rng.choice(COUNTRIES)}))
    for _ in range(updates):
        uid = rng.choice(ids)
        out.append((uid, {"user_id": uid, "name": f"name-{uid}", "tier": rng.choice(TIERS),
                          "country": rng.choice(COUNTRIES)}))
    for uid in rng.sample(ids, deletes):
        out.append((uid, None))
    return out


def actions(count: int, users: int = 30, seed: int = 22, start: int = 0) -> list[dict[str, object]]:
    rng = random.Random(seed)
    out: list[dict[str, object]] = []
    for i in range(start, start + count):
        uid = f"u{rng.randrange(users + 3):04d}"  # the last three ids never have a profile
        at = START + timedelta(seconds=i * 7)
        out.append({"event_id": f"a-{seed}-{i:06d}", "user_id": uid, "action": rng.choice(ACTIONS),
                    "ts": at.isoformat().replace("+00:00", "Z")})
    return out


def latest(changes: Iterable[Change]) -> dict[str, dict[str, str]]:
    """What a compacted topic holds for these changes: the last profile per live key."""
    table: dict[str, dict[str, str]] = {}
    for uid, profile in changes:
        if profile is None:
            table.pop(uid, None)
        else:
            table[uid] = profile
    return table


def publish_profiles(bootstrap: str, topic: str, changes: Iterable[Change]) -> None:
    _publish(bootstrap, topic, ((uid.encode(), None if p is None else json.dumps(p).encode())
                                for uid, p in changes))


def publish_actions(bootstrap: str, topic: str, events: Iterable[dict[str, object]]) -> None:
    _publish(bootstrap, topic, ((str(e["user_id"]).encode(), json.dumps(e).encode()) for e in events))


def _publish(bootstrap: str, topic: str, records: Iterable[tuple[bytes, bytes | None]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    for key, value in records:
        producer.produce(topic, value=value, key=key)
        producer.poll(0)
    if producer.flush(30):
        raise RuntimeError(f"not every record reached {topic}")


def main(argv: list[str] | None = None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--users", default="users")
    ap.add_argument("--events", default="actions")
    ap.add_argument("--count", type=int, default=200)
    args = ap.parse_args(argv)
    try:
        create_table_topic(args.bootstrap, args.users)
    except Exception as exc:  # already there: keep going, the topic takes more changes
        print(f"note: {exc}")
    publish_profiles(args.bootstrap, args.users, profiles())
    publish_actions(args.bootstrap, args.events, actions(args.count))
    print(f"produced profiles to {args.users} and {args.count} actions to {args.events}")


if __name__ == "__main__":
    main()
