"""Issue 18: replication and controller metrics of a real 3-node cluster. Under-replicated
partitions rise on the leader when a follower is killed (-9) and fall when it returns;
exactly one node reports itself the active controller."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.metrics import get, scrape, value
from tests.system.cluster_support import Cluster, running_cluster, wait_until

pytestmark = pytest.mark.timeout(600)

URP = "kafka_server_replicamanager_underreplicatedpartitions"


def admin_url(cluster: Cluster, node_id: int) -> str:
    url = cluster.node(node_id).admin_url
    assert url is not None
    return url


def metric(cluster: Cluster, node_id: int, name: str, **labels: str) -> float:
    return value(scrape(admin_url(cluster, node_id)), name, **labels)


def test_urp_rises_when_a_follower_dies_and_falls_when_it_returns(tmp_path: Path) -> None:
    with running_cluster(tmp_path / "c", 3) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        admin.create_topics([NewTopic("watched", 1, 3)])["watched"].result(60)
        part = c.wait_isr("watched", 3)[0]
        leader = part["leader"]
        quorum_leader = c.quorum_leader()
        # a follower, not the quorum leader if we can help it (less churn while it is down)
        followers = [r for r in part["replicas"] if r != leader]
        follower = next((r for r in followers if r != quorum_leader), followers[0])

        wait_until(lambda: all(get(admin_url(c, n) + "/health/ready")[0] == 200
                               for n in c.nodes), "every node ready", 120, c)
        active = [n for n in c.nodes
                  if metric(c, n, "kafka_controller_kafkacontroller_activecontrollercount")]
        assert len(active) == 1, active
        assert metric(c, leader, URP) == 0
        shrinks = metric(c, leader, "kafka_server_replicamanager_isrshrinks_total")

        c.kill9(follower)
        wait_until(lambda: metric(c, leader, URP) >= 1,
                   f"{URP} >= 1 on the leader {leader} after follower {follower} died", 120, c)
        assert metric(c, leader, "kafka_server_replicamanager_isrshrinks_total") > shrinks
        assert metric(c, leader, "kafka_topic_partition_under_replicated_partition",
                      topic="watched", partition="0") == 1
        wait_until(lambda: sum(metric(c, n, "kafka_controller_kafkacontroller_fencedbrokercount")
                               for n in c.nodes if n != follower) >= 1,
                   "the active controller to count a fenced broker", 120, c)

        c.restart(follower)
        wait_until(lambda: metric(c, leader, URP) == 0,
                   f"{URP} back to 0 on {leader} after {follower} returned", 180, c)
        assert metric(c, leader, "kafka_server_replicamanager_isrexpands_total") >= 1
        wait_until(lambda: get(admin_url(c, follower) + "/health/ready")[0] == 200,
                   f"node {follower} ready again", 120, c)
