"""Issue 15, finding 1 as a regression (tests/system/jepsen/kept/crash-seed7-two-tails.*):
unclean shutdown detection (KIP-966) on a real 3-node cluster.

The kept run: the two ISR replicas of a partition each lost their unflushed tail in a crash
and came back; the one left as the ISR's last member led again without the last acknowledged
batch, and a later record took its offset. Here, in small and deterministically: a topic on
the two nodes that do not lead the quorum (RF 2, min.insync.replicas=2, unclean election off),
records acknowledged with acks=all, then both nodes killed -9 one right after the other, the
last batch cut off their active segment as the harness's crash nemesis does (a kill keeps
the page cache; the cut stands for what a power loss takes), and both started again at once.
Each registers without a clean shutdown marker, so the controller takes it out of every ISR
before unfencing it, even as the last member: the partition has no leader rather than a
leader without acknowledged records. Before the fix the last member led again.

Also: a SIGTERM stop leaves the clean shutdown marker with the broker's epoch, which the next
start reads (and removes) and registers as clean.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from odradek.broker.admin_calls import call
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import Record, build_batch
from tests.system.cluster_support import Cluster, running_cluster, wait_until

pytestmark = pytest.mark.timeout(400)

UNCLEAN_LINE = "no clean shutdown marker in every log directory"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"  # Kafka's name (CleanShutdownFileHandler)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("unclean") / "c", 3) as c:
        yield c


def followers_of_quorum(cluster: Cluster) -> list[int]:
    active = cluster.quorum_leader()
    return [n for n in sorted(cluster.nodes) if n != active]


def create(cluster: Cluster, topic: str, replicas: list[int]) -> None:
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as PyNewTopic

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap.split(","))
    try:
        admin.create_topics([PyNewTopic(topic, -1, -1, replica_assignments={0: replicas},
                                        topic_configs={"min.insync.replicas": "2"})],
                            timeout_ms=60000)
    finally:
        admin.close()
    wait_until(lambda: (lambda p: p["leader"] == replicas[0] and len(p["isr"]) == 2)(
        cluster.partitions(topic)[0]), f"{topic}-0 led by {replicas[0]} with a full ISR",
        60, cluster)


def produce_acked_batches(bootstrap: str, topic: str, n: int) -> None:
    """n records, each its own batch (flushed one by one), all acknowledged by the ISR."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "message.timeout.ms": 120000})
    errors: list[str] = []
    for i in range(n):
        p.produce(topic, f"acked-{i}".encode(),
                  on_delivery=lambda err, _m: errors.append(str(err)) if err else None)
        assert p.flush(120) == 0
    assert not errors, errors[:5]


def cut_last_byte(data_dir: Path, topic: str) -> None:
    """The crash nemesis's cut (tests/system/jepsen/nemesis/process.py truncate_tails), on
    this topic's partition only: one byte off the active segment tears its last batch,
    which the next start's recovery cuts whole."""
    active = sorted((data_dir / f"{topic}-0").glob("*.log"))[-1]
    os.truncate(active, active.stat().st_size - 1)


def produce_raw(bootstrap: str, topic: str) -> ErrorCode:
    batch = build_batch([Record(-1, -1, None, b"after")])
    resp = call(bootstrap, 0, 9, {"transactional_id": None, "acks": -1, "timeout": 10000,
                                  "topic_data": [{"name": topic, "partition_data": [
                                      {"index": 0, "records": batch}]}]}, 60.0)
    return ErrorCode(int(resp.responses[0].partition_responses[0].error_code))


def controller_says_unclean(cluster: Cluster, node_id: int) -> int:
    """How often the controllers logged a registration of `node_id` as unclean."""
    line = f"broker {node_id} registers a new incarnation after an unclean shutdown"
    return sum(cluster.node(n).log(10**8).count(line) for n in cluster.nodes)


def unfenced_count(cluster: Cluster, node_id: int) -> int:
    return cluster.node(node_id).log(10**8).count("unfenced by controller")


def test_a_clean_stop_leaves_the_marker_the_next_start_reads(cluster: Cluster) -> None:
    node_id = followers_of_quorum(cluster)[0]
    node = cluster.node(node_id)
    epoch = int(re.findall(r"registered with controller \d+: broker epoch (\d+)",
                           node.log(10**8))[-1])
    cluster.sigterm(node_id)
    marker = node.data_dir / CLEAN_SHUTDOWN_FILE
    assert json.loads(marker.read_text()) == {"version": 0, "brokerEpoch": epoch}
    starts = node.log(10**8).count(UNCLEAN_LINE)
    said = controller_says_unclean(cluster, node_id)
    unfenced = unfenced_count(cluster, node_id)
    cluster.restart(node_id)
    wait_until(lambda: unfenced_count(cluster, node_id) > unfenced,
               f"node {node_id} registered again and unfenced", 180, cluster)
    assert not marker.exists()  # removed before anything is written: a crash now is unclean
    assert node.log(10**8).count(UNCLEAN_LINE) == starts, node.log()
    assert controller_says_unclean(cluster, node_id) == said, cluster.logs()
    cluster.wait_ready(120)


def test_two_replicas_losing_their_tail_leave_no_leader_without_acked_records(
        cluster: Cluster) -> None:
    topic = "unclean-two-tails"
    first, second = followers_of_quorum(cluster)
    create(cluster, topic, [first, second])
    produce_acked_batches(cluster.bootstrap, topic, 20)  # offsets 0-19, the last one alone
    starts = {n: cluster.node(n).log(10**8).count(UNCLEAN_LINE) for n in (first, second)}
    unfenced = {n: unfenced_count(cluster, n) for n in (first, second)}
    # both replicas hold offset 19 (acks=all with the ISR [first, second]); both lose it
    for victim in (second, first):
        cluster.kill9(victim)
        cut_last_byte(cluster.node(victim).data_dir, topic)
        cluster.restart(victim)
    for n in (first, second):  # each registered anew once its old session ran out
        wait_until(lambda n=n: unfenced_count(cluster, n) > unfenced[n],
                   f"node {n} registered again and unfenced", 180, cluster)

    def settled() -> dict[str, Any] | None:
        part = cluster.partitions(topic)[0]
        return part if part["leader"] == -1 and part["isr"] == [] else None

    # before the fix the ISR's last member led again here, from a log ending at offset 18
    part = wait_until(settled, f"{topic}-0 with no leader and an empty ISR", 120, cluster)
    assert ErrorCode(int(part["error"])) == ErrorCode.leader_not_available
    for node_id in (first, second):
        # nobody takes writes at the lost offset (once the node serves clients again)
        [code] = wait_until(lambda n=node_id: [produce_raw(cluster.node(n).bootstrap, topic)],
                            f"node {node_id} answering a produce", 120, cluster)
        assert code == ErrorCode.not_leader_or_follower
        log = cluster.node(node_id).log(10**8)
        assert log.count(UNCLEAN_LINE) == starts[node_id] + 1, log[-3000:]
    logs = "\n".join(cluster.node(n).log(10**8) for n in cluster.nodes)
    assert re.search(rf"is back from an unclean shutdown and was the last in-sync replica of "
                     rf"1 partition\(s\) \({topic}-0\)", logs), logs[-6000:]
    # and it stays so: the controller's ticks elect nobody (unclean election is off)
    cluster.wait_ready(120)
    assert cluster.partitions(topic)[0]["leader"] == -1
