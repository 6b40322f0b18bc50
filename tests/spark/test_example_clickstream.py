"""The clickstream example: exact tumbling, hopping and session window counts against a
plain-Python computation over the generated views."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from pathlib import Path

from examples.clickstream import generator, pipeline
from pyspark.sql import SparkSession

from tests.spark.records import read_records
from tests.spark.support import create_topic, topic_name
from tests.support.broker import BrokerProcess

MINUTE = 60_000
Window = tuple[str, str, str | None, int, int, int]


def _ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


def expected_windows(views: list[dict[str, str]], watermark_ms: int, gap_ms: int) -> Counter[Window]:
    """Windows whose end the final watermark has passed, computed from first principles."""
    counts: Counter[tuple[str, str, str | None, int, int]] = Counter()
    by_user: dict[tuple[str, str], list[int]] = {}
    for v in views:
        t = _ms(v["ts"])
        start = t - t % MINUTE
        counts[("tumbling", v["region"], None, start, start + MINUTE)] += 1
        for s in (start - MINUTE, start):  # the two 2-minute windows, sliding by 1, holding t
            counts[("hopping", v["region"], None, s, s + 2 * MINUTE)] += 1
        by_user.setdefault((v["region"], v["user"]), []).append(t)
    for (region, user), times in by_user.items():
        times.sort()
        first, end, n = times[0], times[0] + gap_ms, 1
        for t in times[1:]:
            if t < end:
                end, n = max(end, t + gap_ms), n + 1
            else:
                counts[("session", region, user, first, end)] += n
                first, end, n = t, t + gap_ms, 1
        counts[("session", region, user, first, end)] += n
    ends = {k[4] for k in counts}
    assert watermark_ms not in ends, "a window ends exactly at the watermark: ambiguous data"
    return Counter({(*k, n): 1 for k, n in counts.items() if k[4] <= watermark_ms})


def test_clickstream_windows(spark: SparkSession, spark_broker: BrokerProcess, tmp_path: Path) -> None:
    b = spark_broker.bootstrap
    src = create_topic(b, topic_name("clicks"), 3)
    dst = create_topic(b, topic_name("clicks-windows"), 2)
    views = generator.produce(b, src, users=16, sessions=4, seed=5)
    query = pipeline.build(spark, b, src, dst, str(tmp_path / "cp"), trigger={"availableNow": True},
                           source_options={"maxOffsetsPerTrigger": str(len(views) // 2 + 1)})
    try:
        query.awaitTermination(300)
        assert query.exception() is None, query.exception()
    finally:
        query.stop()

    got: Counter[Window] = Counter()
    for r in read_records(b, dst, 2):
        w = json.loads(r.value)
        assert r.key == w["region"].encode()
        got[(w["kind"], w["region"], w.get("user"), w["window_start"], w["window_end"], w["views"])] += 1
    watermark = max(_ms(v["ts"]) for v in views) - 2 * MINUTE
    want = expected_windows(views, watermark, 30_000)
    assert {k[0] for k in want} == {"tumbling", "hopping", "session"}
    assert got == want
