"""What a Metadata answer of every topic costs the node's loop, against partition count.

    python -m bench.metadata_cost [--partitions 20000] [--version 12] [--rounds 5]
    PYTHONPATH=OTHER/src python -m bench.metadata_cost   # another build (before the cache)

In process, no sockets: an image of topics of 500 partitions (one replica, led), then the
Metadata handler's answer for every topic, built and encoded as the node does it:
"uncached" is the first answer after the image changed (every topic entry built and
encoded), "cached" a later answer from an unchanged image (the topics' encoded entries
reused, issue: tests/system/test_partitions_20k.py spent most of its produce phase answering
librdkafka's Metadata requests). Median of `--rounds`, with the machine's load beside it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from odradek.broker.handlers import metadata
from odradek.metadata.image import MetadataImage, PartitionImage, TopicImage
from odradek.protocol.apis import ApiKey

PER_TOPIC = 500


def image(partitions: int) -> MetadataImage:
    topics = {}
    for i in range(max(1, partitions // PER_TOPIC)):
        parts = {p: PartitionImage(p, (1,), (1,), 1, 0, 0) for p in range(PER_TOPIC)}
        t = TopicImage(f"wide-{i}", uuid.uuid4(), parts)
        topics[t.topic_id] = t
    return MetadataImage(cluster_id="bench", topics_by_id=topics,
                         topics_by_name={t.name: t for t in topics.values()})


class Config:
    def get_bool(self, _key: str) -> bool:
        return False


def answer(ctx: Any, header: Any) -> int:
    topics = sorted(ctx.image.topics_by_name.values(), key=lambda t: t.name)
    # --src of a build before the cache: its handler takes the topics' plain entries
    found = getattr(metadata, "_Found", metadata.topic_entry)
    entries = [found(t, ctx.image.brokers) for t in topics]
    _version, chunks = metadata._answer(ctx, header, SimpleNamespace(), entries)
    return sum(len(c) for c in chunks)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=20_000)
    ap.add_argument("--version", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    ctx = SimpleNamespace(image=image(args.partitions), authorizer=None, config=Config(),
                          cluster_id="bench", controller_id=1, listener_name=None,
                          advertised=(), link=None)
    header = SimpleNamespace(api_key=ApiKey.METADATA, api_version=args.version, throttle_ms=0,
                             client_id="bench")
    cold, warm = [], []
    size = 0
    for _ in range(args.rounds):
        # a changed image: new topic objects, as a metadata change makes them
        ctx.image = replace(ctx.image, topics_by_name={
            n: replace(t) for n, t in ctx.image.topics_by_name.items()})
        t0 = time.perf_counter()
        size = answer(ctx, header)
        t1 = time.perf_counter()
        answer(ctx, header)
        t2 = time.perf_counter()
        cold.append(t1 - t0)
        warm.append(t2 - t1)
    print(f"{args.partitions} partitions, Metadata v{args.version}, {size} bytes: "
          f"uncached {statistics.median(cold) * 1000:.0f} ms, "
          f"cached {statistics.median(warm) * 1000:.1f} ms "
          f"(load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
