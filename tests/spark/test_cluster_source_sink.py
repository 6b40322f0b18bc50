"""Issue 14: `format("odradek")` on a real 3-node cluster while leadership moves.

A batch read through the native fetch path runs after the leader of some partitions was
killed with -9 (the tasks find the new leaders); then another node is killed before the
sink writes the rows to a second topic. Every row is read and written exactly once.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import SparkSession

from tests.spark.support import read_all
from tests.system.cluster_support import Cluster, running_cluster, wait_until

PARTITIONS, RECORDS = 6, 3000


def _create(cluster: Cluster, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[
        topic].result(60)
    cluster.wait_isr(topic, 3)


def _kill_leader(cluster: Cluster, topic: str, partition: int) -> int:
    victim = int(cluster.partitions(topic)[partition]["leader"])
    cluster.kill9(victim)
    wait_until(lambda: all(p["leader"] not in (victim, -1)
                           for p in cluster.partitions(topic).values()),
               f"new leaders after node {victim} died", 60, cluster)
    return victim


@pytest.mark.timeout(600)
def test_native_read_and_sink_write_across_leader_changes(spark: SparkSession,
                                                          tmp_path: Path) -> None:
    with running_cluster(tmp_path / "c", 3) as cluster:
        src, dst = "spark-cluster-in", "spark-cluster-out"
        _create(cluster, src)
        _create(cluster, dst)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 5})
        for i in range(RECORDS):
            producer.produce(src, f"v{i}".encode(), f"k{i}".encode(), partition=i % PARTITIONS)
        assert producer.flush(60) == 0

        first = _kill_leader(cluster, src, 0)
        df = (spark.read.format("odradek").option("kafka.bootstrap.servers", cluster.bootstrap)
              .option("subscribe", src).option("fetchPath", "native").load()
              .selectExpr("key", "value", "partition", "offset"))
        rows = df.collect()
        assert Counter(r["value"] for r in rows) == Counter(
            f"v{i}".encode() for i in range(RECORDS))
        by_partition: dict[int, list[int]] = {}
        for r in rows:
            by_partition.setdefault(r["partition"], []).append(r["offset"])
        assert all(sorted(o) == list(range(RECORDS // PARTITIONS))
                   for o in by_partition.values())

        cluster.restart(first)
        cluster.wait_ready()
        cluster.wait_isr(dst, 3, 120)
        _kill_leader(cluster, dst, 1)  # between the read and the write
        (df.select("key", "value").write.format("odradek")
         .option("kafka.bootstrap.servers", cluster.bootstrap).option("topic", dst)
         .mode("append").save())
        got = read_all(cluster.bootstrap_of(), dst, PARTITIONS)
        assert Counter(got) == Counter((f"k{i}".encode(), f"v{i}".encode())
                                       for i in range(RECORDS))
