"""The enrichment example: actions joined to the latest profile per key of a compacted topic,
and a profile change seen by the next micro-batch of the running query (foreachBatch re-reads the table)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from examples.enrichment import generator, pipeline
from pyspark.sql import SparkSession

from tests.spark.records import read_records
from tests.spark.support import create_topic, topic_name
from tests.support.broker import BrokerProcess


def _expected(actions: list[dict[str, object]], table: dict[str, dict[str, str]]) -> dict[str, dict]:
    out = {}
    for a in actions:
        p = table.get(str(a["user_id"]), {})
        ts = int(datetime.fromisoformat(str(a["ts"]).replace("Z", "+00:00")).timestamp() * 1000)
        row = {"event_id": a["event_id"], "user_id": a["user_id"], "action": a["action"], "ts": ts,
               "name": p.get("name"), "tier": p.get("tier"), "country": p.get("country")}
        out[str(a["event_id"])] = {k: v for k, v in row.items() if v is not None}
    return out


def test_enrichment_against_compacted_topic(spark: SparkSession, spark_broker: BrokerProcess,
                                            tmp_path: Path) -> None:
    b = spark_broker.bootstrap
    users = generator.create_table_topic(b, topic_name("users"), 2)
    src = create_topic(b, topic_name("actions"), 2)
    dst = create_topic(b, topic_name("enriched"), 1)
    first_changes = generator.profiles(users=30, updates=20, deletes=3, seed=21)
    generator.publish_profiles(b, users, first_changes)
    first = generator.actions(120, users=30, seed=22)
    generator.publish_actions(b, src, first)
    query = pipeline.build(spark, b, src, users, dst, str(tmp_path / "cp"))
    try:
        query.processAllAvailable()
        # Every user changes tier and a few more are deleted; new actions must see that.
        table1 = generator.latest(first_changes)
        more_changes: list[generator.Change] = [
            (uid, {**p, "tier": "changed-" + p["tier"]}) for uid, p in sorted(table1.items())]
        more_changes += [(uid, None) for uid in sorted(table1)[:4]]
        generator.publish_profiles(b, users, more_changes)
        second = generator.actions(80, users=30, seed=22, start=120)
        generator.publish_actions(b, src, second)
        query.processAllAvailable()
        assert query.exception() is None
    finally:
        query.stop()
    table2 = generator.latest(first_changes + more_changes)
    want = _expected(first, table1) | _expected(second, table2)
    got = {}
    for r in read_records(b, dst, 1):
        row = json.loads(r.value)
        assert r.key == row["event_id"].encode()
        assert row["event_id"] not in got
        got[row["event_id"]] = row
    assert any("tier" not in row for row in want.values())  # unknown and deleted users
    assert got == want
