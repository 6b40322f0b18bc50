"""Issue 14: faults of a real 3-node cluster (combined roles, real processes on loopback).

- bad input a live cluster must refuse with Kafka's errors and survive: a follower fetch
  with a stale leader epoch (FENCED_LEADER_EPOCH), an AlterPartition with a stale partition
  epoch (INVALID_UPDATE_VERSION), a Vote from a node outside the quorum
  (INCONSISTENT_VOTER_SET);
- a divergent tail: the partition leader is paused (SIGSTOP) with an acks=1 produce waiting
  in its socket, a new leader takes acks=all writes, the old one resumes, appends the produce
  above the high watermark, learns it was replaced and truncates to the new leader's
  history; no consumer ever sees those records;
- unclean election: with unclean.leader.election.enable=false a partition whose only live
  replica is out of sync stays offline; turning it on (IncrementalAlterConfigs) brings it
  back, and the controller logs the data loss.
One cluster for the module; each test restores what it stops.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from odradek.broker.admin_calls import call
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import Record, build_batch, iter_batches
from tests.system.cluster_support import Cluster, running_cluster, wait_until

ODRADEK = [sys.executable, "-m", "odradek.cli.main"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("faults") / "c", 3) as c:
        yield c


def odradek(*args: str, bootstrap: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ODRADEK, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "ODRADEK_BOOTSTRAP": bootstrap})


def create(cluster: Cluster, topic: str, replicas: list[int], **configs: str) -> None:
    # confluent-kafka's NewTopic refuses a replica assignment without a partition count
    # and with one alike; kafka-python sends it as Kafka's tools do
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as PyNewTopic

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap.split(","))
    try:
        admin.create_topics([PyNewTopic(topic, -1, -1, replica_assignments={0: replicas},
                                        topic_configs=configs)], timeout_ms=60000)
    finally:
        admin.close()
    wait_until(lambda: (lambda p: p["leader"] == replicas[0] and len(p["isr"]) == len(replicas))(
        cluster.partitions(topic)[0]), f"{topic}-0 led by {replicas[0]} with a full ISR",
        60, cluster)


def topic_id(cluster: Cluster, topic: str) -> uuid.UUID:
    return call(cluster.bootstrap_of(), 3, 12, {  # type: ignore[no-any-return]
        "topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False}).topics[0].topic_id


def partition_seen_by(cluster: Cluster, node_id: int, topic: str) -> dict[str, Any]:
    """Partition 0 of `topic` as broker `node_id` itself describes it (its own metadata)."""
    resp = call(cluster.node(node_id).bootstrap, 3, 12, {
        "topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False}, 5.0)
    p = resp.topics[0].partitions[0]
    return {"leader": int(p.leader_id), "leader_epoch": int(p.leader_epoch),
            "isr": sorted(int(r) for r in p.isr_nodes)}


def broker_epoch(cluster: Cluster, node_id: int) -> int:
    """The broker epoch the node's last registration got (its log says it)."""
    found = re.findall(r"broker epoch (\d+)", cluster.node(node_id).log(10**7))
    assert found, cluster.node(node_id).log()
    return int(found[-1])


def controller_address(cluster: Cluster) -> str:
    return f"127.0.0.1:{cluster.node(cluster.quorum_leader()).spec.controller_port}"


def produce_raw(bootstrap: str, topic: str, values: list[bytes], acks: int,
                timeout: float = 60.0) -> Any:
    """One Produce v9 of one batch to exactly this broker: the partition response."""
    batch = build_batch([Record(-1, -1, None, v) for v in values])
    resp = call(bootstrap, 0, 9, {"transactional_id": None, "acks": acks, "timeout": 30000,
                                  "topic_data": [{"name": topic, "partition_data": [
                                      {"index": 0, "records": batch}]}]}, timeout)
    return resp.responses[0].partition_responses[0]


def log_values(data_dir: Path, topic: str) -> list[tuple[int, int, int]]:
    """(base offset, last offset, CRC) of every batch of the partition's segments."""
    out = []
    for seg in sorted((data_dir / f"{topic}-0").glob("*.log")):
        for h, _ in iter_batches(seg.read_bytes()):
            out.append((h.base_offset, h.last_offset, h.crc))
    return out


def restore(cluster: Cluster, topic: str, rf: int) -> None:
    cluster.wait_ready()
    cluster.wait_isr(topic, rf, 120)


class Watcher:
    """A read_uncommitted consumer of a topic in a thread from the start: every value it
    was ever served."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"w-{topic}",
                                  "auto.offset.reset": "earliest",
                                  "enable.auto.commit": False,
                                  "topic.metadata.refresh.interval.ms": 1000})
        self.consumer.subscribe([topic])
        self.seen: list[bytes] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            for m in self.consumer.consume(500, 0.5):
                if m.error() is None:
                    self.seen.append(m.value())

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)
        self.consumer.close()


@pytest.mark.timeout(300)
def test_stale_epochs_and_foreign_vote_get_kafka_errors(cluster: Cluster,
                                                        tmp_path: Path) -> None:
    topic = "faults-bad"
    create(cluster, topic, [1, 2, 3], **{"min.insync.replicas": "2"})
    # move the leadership once (reorder the replicas, elect the preferred one) so that
    # leader and partition epochs have an older value to be stale with
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [2, 1, 3]}]}))
    moved = odradek("partitions", "reassign", "--plan", str(plan), "--wait",
                    bootstrap=cluster.bootstrap)
    assert moved.returncode == 0, moved.stdout + moved.stderr
    elect = odradek("partitions", "elect-leaders", "--topic", topic, "--partition", "0",
                    bootstrap=cluster.bootstrap)
    assert elect.returncode == 0, elect.stdout + elect.stderr
    def settled() -> dict[str, Any] | None:
        # the leader as the leader itself sees it, after at least one election
        seen = cluster.partitions(topic)[0]
        own = partition_seen_by(cluster, seen["leader"], topic) if seen["leader"] > 0 else None
        ok = own and own["leader"] == seen["leader"] and own["leader_epoch"] >= 1 and \
            len(own["isr"]) == 3
        return own if ok else None

    part = wait_until(settled, f"{topic}-0 led after an election", 60, cluster)
    tid = topic_id(cluster, topic)
    lead = part["leader"]
    follower = next(n for n in (1, 2, 3) if n != lead)
    leader = cluster.node(lead)

    # a follower fetch with the leader epoch before the election
    fetch = call(leader.bootstrap, 1, 15, {
        "replica_state": {"replica_id": follower,
                          "replica_epoch": broker_epoch(cluster, follower)},
        "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "topics": [{"topic_id": tid, "partitions": [{
            "partition": 0, "current_leader_epoch": part["leader_epoch"] - 1,
            "fetch_offset": 0, "last_fetched_epoch": -1, "log_start_offset": 0,
            "partition_max_bytes": 1 << 20}]}], "forgotten_topics_data": [], "rack_id": ""})
    got = fetch.responses[0].partitions[0]
    assert ErrorCode(int(got.error_code)) == ErrorCode.fenced_leader_epoch, fetch
    assert not got.records

    # an AlterPartition from the real leader, right broker epoch, stale partition epoch
    controller = controller_address(cluster)
    alter = call(controller, 56, 3, {
        "broker_id": lead, "broker_epoch": broker_epoch(cluster, lead), "topics": [
            {"topic_id": tid, "partitions": [{
                "partition_index": 0, "leader_epoch": part["leader_epoch"],
                "new_isr_with_epochs": [{"broker_id": lead, "broker_epoch": -1}],
                "leader_recovery_state": 0, "partition_epoch": 0}]}]})
    assert ErrorCode(int(alter.error_code)) == ErrorCode.none, alter
    result = alter.topics[0].partitions[0]
    assert ErrorCode(int(result.error_code)) == ErrorCode.invalid_update_version, alter

    # a Vote from node 9, which is no voter, standing in a far later epoch
    quorum = cluster.state()["quorum"]
    vote = call(controller, 52, 2, {
        "cluster_id": cluster.local.cluster_id, "voter_id": cluster.quorum_leader(),
        "topics": [{"topic_name": "__cluster_metadata", "partitions": [{
            "partition_index": 0, "replica_epoch": quorum["leader_epoch"] + 100,
            "replica_id": 9, "replica_directory_id": None, "voter_directory_id": None,
            "last_offset_epoch": quorum["leader_epoch"] + 100, "last_offset": 10**9,
            "pre_vote": False}]}]})
    answered = vote.topics[0].partitions[0]
    assert ErrorCode(int(answered.error_code)) == ErrorCode.inconsistent_voter_set, vote
    assert not answered.vote_granted

    # the cluster is as it was: same quorum epoch, ISR untouched, the topic takes writes
    state = cluster.wait_ready()
    assert state["quorum"]["leader_epoch"] == quorum["leader_epoch"]
    assert not any(b["fenced"] for b in state["brokers"])
    cluster.wait_isr(topic, 3)
    produce_acked(cluster.bootstrap, topic, [b"still-writable"])


def produce_acked(bootstrap: str, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 2, "message.timeout.ms": 120000})
    errors: list[str] = []
    for v in values:
        p.produce(topic, v, on_delivery=lambda err, _m: errors.append(str(err)) if err else None)
        p.poll(0)
    assert p.flush(120) == 0
    assert not errors, errors[:5]


def followers_of_quorum(cluster: Cluster) -> list[int]:
    """The nodes that are not the active controller, so pausing one keeps the quorum's
    leader (the partition faults then test replication, not KRaft failover)."""
    active = cluster.quorum_leader()
    return [n for n in sorted(cluster.nodes) if n != active]


@pytest.mark.timeout(400)
def test_divergent_tail_is_truncated(cluster: Cluster) -> None:
    topic = "faults-diverge"
    old, second = followers_of_quorum(cluster)[:2]
    third = ({1, 2, 3} - {old, second}).pop()
    create(cluster, topic, [old, second, third], **{"min.insync.replicas": "2"})
    watcher = Watcher(cluster.bootstrap, topic)
    answer: list[Any] = []
    sender: threading.Thread | None = None
    try:
        produce_acked(cluster.bootstrap, topic, [f"pre-{i}".encode() for i in range(300)])
        cluster.wait_isr(topic, 3)
        cluster.pause(old)
        # an acks=1 produce waits in the paused leader's socket: when it resumes it still
        # believes it leads and appends it above the high watermark nobody else will reach
        divergent = [f"divergent-{i}".encode() for i in range(50)]
        sender = threading.Thread(target=lambda: answer.append(
            produce_raw(cluster.node(old).bootstrap, topic, divergent, 1, 300)), daemon=True)
        sender.start()
        moved = wait_until(lambda: (lambda p: p if p["leader"] not in (old, -1) else None)(
            cluster.partitions(topic)[0]), f"a new leader of {topic}-0 while {old} is paused",
            60, cluster)
        assert old not in moved["isr"]
        others = cluster.bootstrap_of([n for n in sorted(cluster.nodes) if n != old])
        produce_acked(others, topic, [f"post-{i}".encode() for i in range(300)])
        cluster.resume(old)
        sender.join(300)
        assert answer, "the paused leader never answered the acks=1 produce"
        cluster.wait_isr(topic, 3, 120)
        new_leader = cluster.partitions(topic)[0]["leader"]

        def identical() -> bool:
            logs = {n: log_values(cluster.node(n).data_dir, topic) for n in cluster.nodes}
            return all(v == logs[new_leader] for v in logs.values())

        wait_until(identical, f"{topic}-0 byte-identical on the 3 replicas", 120, cluster)
        assert log_values(cluster.node(old).data_dir, topic)[-1][1] == 599  # 300 + 300
        wait_until(lambda: len(watcher.seen) >= 600, "the watcher read all 600 records",
                   120, cluster)
    finally:
        watcher.close()
        if sender is not None and cluster.node(old).paused:
            cluster.resume(old)
    # the old leader appended the divergent batch (acks=1 succeeded) above the high watermark
    result = answer[0]
    assert ErrorCode(int(result.error_code)) == ErrorCode.none, result
    assert int(result.base_offset) == 300  # right above the last acks=all record it had
    assert not [v for v in watcher.seen if v.startswith(b"divergent")]
    assert sorted(watcher.seen) == sorted(
        [f"pre-{i}".encode() for i in range(300)] + [f"post-{i}".encode() for i in range(300)])
    text = cluster.node(old).log(10**7)
    assert re.search(rf"truncating {topic}-0 from log end \d+ to offset 300\b", text), text[-3000:]


def fetch_raw(bootstrap: str, tid: uuid.UUID) -> Any:
    """A consumer's Fetch v15 of partition 0 from offset 0 at exactly this broker."""
    resp = call(bootstrap, 1, 15, {
        "replica_state": {"replica_id": -1, "replica_epoch": -1}, "max_wait": 0,
        "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
        "session_epoch": -1, "topics": [{"topic_id": tid, "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
            "last_fetched_epoch": -1, "log_start_offset": -1,
            "partition_max_bytes": 1 << 20}]}], "forgotten_topics_data": [], "rack_id": ""})
    return resp.responses[0].partitions[0]


@pytest.mark.timeout(500)
def test_unclean_election_off_then_on(cluster: Cluster) -> None:
    topic = "faults-unclean"
    first, second = followers_of_quorum(cluster)[:2]  # the active controller stays up
    create(cluster, topic, [first, second], **{"min.insync.replicas": "1",
                                              "unclean.leader.election.enable": "false"})
    tid = topic_id(cluster, topic)
    produce_acked(cluster.bootstrap, topic, [f"kept-{i}".encode() for i in range(100)])
    cluster.wait_isr(topic, 2)
    try:
        # `second` dies; `first` alone takes acks=all writes `second` never gets
        cluster.kill9(second)
        wait_until(lambda: cluster.partitions(topic)[0]["isr"] == [first],
                   f"{topic}-0 with the ISR [{first}]", 60, cluster)
        produce_acked(cluster.bootstrap_of(), topic, [f"lost-{i}".encode() for i in range(100)])
        # then `first` dies and `second` comes back: the only live replica is out of sync
        # (the quorum is lost between the two and comes back with `second`)
        cluster.kill9(first)
        cluster.restart(second)
        cluster.wait_ready(120)  # `second` is unfenced: its unfencing election has run
        part = wait_until(lambda: (lambda p: p if p["leader"] == -1 else None)(
            partition_seen_by(cluster, second, topic)), f"{topic}-0 offline", 60, cluster)
        assert part["isr"] == [first]
        offline = cluster.partitions(topic)[0]
        assert offline["leader"] == -1
        assert ErrorCode(offline["error"]) == ErrorCode.leader_not_available
        refused = produce_raw(cluster.node(second).bootstrap, topic, [b"nope"], -1)
        assert ErrorCode(int(refused.error_code)) == ErrorCode.not_leader_or_follower
        # a v11+ consumer fetch may be served by a follower (KIP-392), but only below its
        # high watermark: never the records `second` does not have
        served = fetch_raw(cluster.node(second).bootstrap, tid)
        assert ErrorCode(int(served.error_code)) in (ErrorCode.none,
                                                     ErrorCode.not_leader_or_follower)
        assert int(served.high_watermark) <= 100

        # a user turns unclean election on for the topic
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_of()})
        resource = ConfigResource("TOPIC", topic, incremental_configs=[ConfigEntry(
            "unclean.leader.election.enable", "true",
            incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([resource])[resource].result(60)
        back = wait_until(lambda: (lambda p: p if p["leader"] == second else None)(
            cluster.partitions(topic)[0]), f"{topic}-0 led by {second} again", 60, cluster)
        assert back["isr"] == [second]
        logs = "\n".join(cluster.node(n).log(10**7) for n in cluster.nodes)
        assert re.search(rf"unclean leader election for {topic}-0: broker {second} leads",
                         logs), logs[-4000:]
        described = odradek("topic", "describe", topic, bootstrap=cluster.bootstrap_of())
        assert described.returncode == 0, described.stderr
        assert re.search(rf"Partition: 0\tLeader: {second}\t", described.stdout), \
            described.stdout
        # the data loss: what only `first` had is gone, what both had is served
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap_of(), "group.id": "g-unc",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe([topic])
        seen: list[bytes] = []

        def got_kept() -> bool:
            seen.extend(m.value() for m in consumer.consume(500, 1.0) if m.error() is None)
            return len(seen) >= 100

        try:
            wait_until(got_kept, "the 100 records both replicas had", 120, cluster)
        finally:
            consumer.close()
        assert sorted(seen) == sorted(f"kept-{i}".encode() for i in range(100))
    finally:
        for node in (first, second):
            if not cluster.node(node).alive():
                cluster.restart(node)
    restore(cluster, topic, 2)

    def same() -> bool:
        a, b = (log_values(cluster.node(n).data_dir, topic) for n in (first, second))
        return bool(a) and a == b

    # the returning replica gave up the records the unclean election lost
    wait_until(same, f"{topic}-0 byte-identical on {first} and {second}", 120, cluster)
