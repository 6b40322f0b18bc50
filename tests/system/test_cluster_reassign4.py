"""Issue 14: reassignment under load on a real 4-broker cluster (combined roles).

A partition moves from brokers {1,2,3} to {2,3,4} with `odradek partitions reassign --plan`
while an idempotent acks=all producer writes to it: every acknowledged record is read back
exactly once and in order, the final replica set and ISR are {2,3,4}, and the three new
replicas hold the same batches (offsets and CRCs).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.system.cluster_support import running_cluster, wait_until
from tests.system.test_cluster_failover import Writer, batches, read_all

ODRADEK = [sys.executable, "-m", "odradek.cli.main"]


@pytest.mark.timeout(600)
def test_reassign_123_to_234_under_load(tmp_path: Path) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    topic = "moving4"
    with running_cluster(tmp_path / "c", 4) as cluster:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap.split(","))
        try:
            admin.create_topics([NewTopic(topic, -1, -1, replica_assignments={0: [1, 2, 3]},
                                          topic_configs={"min.insync.replicas": "2"})],
                                timeout_ms=60000)
        finally:
            admin.close()
        cluster.wait_isr(topic, 3)
        assert cluster.partitions(topic)[0]["replicas"] == [1, 2, 3]
        writer = Writer(cluster.bootstrap, topic).start()
        try:
            writer.wait_more(1000, cluster)
            plan = tmp_path / "plan.json"
            plan.write_text(json.dumps({"version": 1, "partitions": [
                {"topic": topic, "partition": 0, "replicas": [2, 3, 4]}]}))
            moved = subprocess.run(
                [*ODRADEK, "partitions", "reassign", "--plan", str(plan), "--wait"],
                capture_output=True, text=True, timeout=300,
                env={**os.environ, "ODRADEK_BOOTSTRAP": cluster.bootstrap})
            assert moved.returncode == 0, moved.stdout + moved.stderr
            assert f"Reassignment of partition {topic}-0 is completed." in moved.stdout
            writer.wait_more(1000, cluster)  # and the producer goes on on the new replicas
        finally:
            writer.finish()
        assert not writer.errors, writer.errors[:5]
        part = wait_until(lambda: (lambda p: p if sorted(p["isr"]) == [2, 3, 4] else None)(
            cluster.partitions(topic)[0]), f"{topic}-0 with the ISR [2, 3, 4]", 60, cluster)
        assert sorted(part["replicas"]) == [2, 3, 4]
        assert part["leader"] in (2, 3, 4)
        got = read_all(cluster.bootstrap, topic, len(writer.acked))
        assert len(got) == len(set(got)), "a record was read twice"
        assert got == sorted(got), "records out of order"
        assert set(writer.acked) <= set(got), "an acknowledged record was lost"

        def same() -> bool:
            logs = [batches(cluster.node(n).data_dir, topic) for n in (2, 3, 4)]
            return bool(logs[0]) and all(x == logs[0] for x in logs)

        wait_until(same, f"{topic}-0 byte-identical on brokers 2, 3, 4", 120, cluster)
