"""Deterministic page views for the sql_pipeline example, and what the pipeline must output."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable

from confluent_kafka import Producer

REGIONS = ("eu-west", "eu-north", "us-east", "us-west", "ap-south")
SLOW_MS = 800


def events(count: int, seed: int = 7) -> list[dict[str, object]]:
    """View i: a fixed user, region, page and load time; every 13th is a bot, every 17th broken."""
    out: list[dict[str, object]] = []
    for i in range(count):
        ms = (i * 131 + seed) % 1000
        out.append({"user": (i * seed) % 37, "region": REGIONS[(i * 7 + seed) % len(REGIONS)],
                    "page": f"/p{i % 11}", "ms": -1 if i % 17 == 5 else ms, "bot": i % 13 == 0})
    return out


def produce(bootstrap: str, topic: str, rows: Iterable[dict[str, object]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for row in rows:
        producer.produce(topic, json.dumps(row).encode(), str(row["user"]).encode())
    if producer.flush(30):
        raise RuntimeError("page views not delivered")


def kept(rows: Iterable[dict[str, object]]) -> list[dict[str, object]]:
    return [r for r in rows if not r["bot"] and int(r["ms"]) >= 0]  # type: ignore[call-overload]


def expected_slow(rows: Iterable[dict[str, object]], slow_ms: int = SLOW_MS) -> Counter[tuple[str, str, int, int]]:
    """(key, page, user, ms) of every slow view: the slow_views flow's output."""
    return Counter((str(r["user"]), str(r["page"]), int(r["user"]), int(r["ms"]))  # type: ignore[call-overload]
                   for r in kept(rows) if int(r["ms"]) > slow_ms)  # type: ignore[call-overload]


def expected_stats(rows: Iterable[dict[str, object]]) -> dict[str, tuple[int, int]]:
    """region -> (views, total ms): the latest record per key of the region_stats flow."""
    out: dict[str, tuple[int, int]] = {}
    for r in kept(rows):
        views, total = out.get(str(r["region"]), (0, 0))
        out[str(r["region"])] = (views + 1, total + int(r["ms"]))  # type: ignore[call-overload]
    return out
