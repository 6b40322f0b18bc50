"""What following a topic creation costs the node's loop, against the partitions it hosts.

    python -m bench.topic_create_cost [--partitions 0 5000 20000] [--rounds 5]

In process, no sockets: a ReplicaManager (real LogManager in a temporary directory) hosting
`--partitions` partitions of topics of 500 (one replica, led here; their logs are created
untimed), then a CreateTopics of one new topic of one partition applied as the node applies
it: a MetadataDelta of its records, then `ReplicaManager.sync` of the new image. Timed: the
sync, minus the log creation in its worker thread ("loop"), and the planning alone ("plan").
"full" forces the full replan every sync made before the planner compared images (issue 22:
the cost grew with the partitions already hosted); "delta" is the sync as it runs now.
Median of `--rounds`, with the machine's load beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from odradek.metadata.image import MetadataImage
from odradek.metadata.records import PartitionRecord, TopicRecord
from odradek.replication.manager import ReplicaManager
from odradek.storage.config import LogConfig
from odradek.storage.log_manager import LogManager

PER_TOPIC = 500


def topic_records(name: str, partitions: int) -> list[Any]:
    tid = uuid.uuid4()
    return [TopicRecord(name, tid)] + [
        PartitionRecord(p, tid, [1], [1], [], [], 1, 0, 0, 0) for p in range(partitions)]


async def one(rm: ReplicaManager, image: MetadataImage, name: str, full: bool
              ) -> tuple[MetadataImage, float, float, float]:
    new = image.apply(topic_records(name, 1))
    opened = 0.0
    open_logs = rm._open_logs

    def timed_open(*args: Any) -> Any:
        nonlocal opened
        t = time.perf_counter()
        try:
            return open_logs(*args)
        finally:
            opened += time.perf_counter() - t

    rm._open_logs = timed_open  # type: ignore[method-assign]
    if full:
        rm._planner.forget()
    t = time.perf_counter()
    rm._plan(new)
    plan_s = time.perf_counter() - t
    if full:
        rm._planner.forget()
    t = time.perf_counter()
    await rm.sync(new)
    total = time.perf_counter() - t
    del rm._open_logs
    return new, total, total - opened, plan_s


async def measure(partitions: int, rounds: int, root: Path) -> dict[str, float]:
    config = LogConfig()
    rm = ReplicaManager(LogManager(root, config), 1, root, lambda _t: config)
    image = MetadataImage(cluster_id="bench")
    rm.load(image)
    for i in range(partitions // PER_TOPIC):
        image = image.apply(topic_records(f"wide-{i}", PER_TOPIC))
    await rm.sync(image)  # untimed: the hosted partitions' logs
    out: dict[str, float] = {}
    for mode in ("full", "delta"):
        loop_s, plan_s = [], []
        for r in range(rounds):
            image, _total, loop, plan = await one(rm, image, f"new-{mode}-{r}", mode == "full")
            loop_s.append(loop)
            plan_s.append(plan)
        out[f"{mode} loop ms"] = statistics.median(loop_s) * 1000
        out[f"{mode} plan ms"] = statistics.median(plan_s) * 1000
    await rm.stop()
    rm.log_manager.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--partitions", type=int, nargs="+", default=[0, 5000])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    print("| hosted partitions | full: loop ms | full: plan ms | delta: loop ms "
          "| delta: plan ms | load |")
    print("|---|---|---|---|---|---|")
    for n in args.partitions:
        with tempfile.TemporaryDirectory(prefix="topic-create-cost-") as d:
            r = asyncio.run(measure(n, args.rounds, Path(d)))
        print(f"| {n} | {r['full loop ms']:.1f} | {r['full plan ms']:.1f} "
              f"| {r['delta loop ms']:.1f} | {r['delta plan ms']:.1f} "
              f"| {os.getloadavg()[0]:.1f} |", flush=True)


if __name__ == "__main__":
    main()
