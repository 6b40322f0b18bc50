"""Issue 14 (tools and clients): odradek's own native client and perf tools on a real 3-node
cluster, while partition leadership moves.

The columnar producer (idempotent, acks=all) writes numbered records to 6 partitions (RF=3)
while the leader of some of them is killed with -9 and restarted; the native fetcher reads
them back while another leader is killed: every record exactly once, in order, at
contiguous offsets. A reassignment that reorders the replicas and `partitions elect-leaders`
move every leader while the old ones stay up (they fence the fetchers' leader epoch): the
same, through the same long-lived fetchers. `odradek bench produce|consume` (columnar and
confluent-kafka) and `bench e2e --client columnar --acks all` against the cluster's bootstrap
count exactly what they wrote, the e2e run also while every leader moves under it. One
cluster for the module. Expected contents come from what the test built, never from the
client under test.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.client.batch_builder import build_columnar_batch
from odradek.client.columnar import columns, select
from odradek.client.fetcher import PartitionFetcher
from odradek.client.metadata import topic_leaders
from odradek.client.producer_columnar import ColumnarProducer, settings_from
from tests.integration.cli_support import ODRADEK, ok
from tests.integration.test_cli_bench import CONSUMER_LINE, E2E, PRODUCER_SUMMARY
from tests.system.cluster_support import Cluster, running_cluster, wait_until

PARTITIONS = 6


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("native") / "c", 3) as c:
        yield c


def create(cluster: Cluster, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[
        topic].result(60)
    cluster.wait_isr(topic, 3)
    # every broker's metadata has caught up with the topic (a client may ask any of them)
    for node in cluster.nodes.values():
        wait_until(lambda n=node: (found := topic_leaders(n.bootstrap, topic, "check")) and
                   not found.error_code and len(found.leaders) == PARTITIONS,
                   f"node {node.node_id} knowing {topic}", 60, cluster)
    # and every leader has opened its partition's log: the metadata names a new topic's
    # leaders before they host it (they answer NOT_LEADER_OR_FOLLOWER meanwhile, as Kafka's
    # do); a producer's first pipelined batches racing that could be refused while a later
    # one lands. The fetcher asks again on NOT_LEADER_OR_FOLLOWER until the leader answers.
    client = {"bootstrap.servers": cluster.bootstrap, "client.id": "check"}
    for p in range(PARTITIONS):
        fetcher = PartitionFetcher(client, topic, p, read_committed=False, max_wait_ms=0)
        try:
            fetcher.send(0)
            got = fetcher.receive()
            assert got.error_code == 0, f"{topic}-{p}: error {got.error_code}"
        finally:
            fetcher.close()


def numbered(start: int, count: int) -> np.ndarray:
    """Records start..start+count-1 of a partition, as 8-byte big-endian values."""
    return np.arange(start, start + count, dtype=">u8").view(np.uint8).reshape(count, 8)


def leader_node(cluster: Cluster, topic: str, partition: int) -> int:
    return int(wait_until(lambda: cluster.partitions(topic)[partition]["leader"] >= 0 and
                          cluster.partitions(topic)[partition]["leader"],
                          f"a leader for {topic}-{partition}", 60, cluster))


def kill_and_wait(cluster: Cluster, topic: str, victim: int) -> None:
    cluster.kill9(victim)
    wait_until(lambda: all(p["leader"] not in (victim, -1)
                           for p in cluster.partitions(topic).values()),
               f"new leaders after node {victim} died", 60, cluster)


def restart(cluster: Cluster, topic: str, node: int) -> None:
    cluster.restart(node)
    cluster.wait_ready()
    cluster.wait_isr(topic, 3, 120)


def read_native(cluster: Cluster, topic: str, partition: int, start: int, end: int,
                fetcher: PartitionFetcher) -> tuple[list[int], list[int]]:
    """(offsets, record numbers) of [start, end) read through the native fetcher."""
    offsets: list[int] = []
    values: list[int] = []
    pos = start
    # records the producer counted as acknowledged are below the high watermark: a read
    # that cannot reach `end` fails with where it stopped instead of polling forever
    deadline = time.monotonic() + 120
    while pos < end:
        if time.monotonic() > deadline:
            pytest.fail(f"{topic}-{partition}: stuck at offset {pos} of {end}; "
                        f"partitions: {cluster.partitions(topic)}")
        fetcher.send(pos)
        got = fetcher.receive()
        assert got.error_code == 0, got.error_code
        sel = select(got.records, start=pos, end=end)
        cols = columns(sel)
        if cols is not None:
            assert (cols.value_len == 8).all()
            buf = np.frombuffer(cols.buffer, np.uint8)
            idx = cols.value_pos[:, None] + np.arange(8)
            values += buf[idx].copy().view(">u8").reshape(-1).tolist()
            offsets += cols.offsets.tolist()
        pos = sel.next_offset
    return offsets, values


@pytest.mark.timeout(600)
def test_columnar_producer_and_fetcher_follow_leader_changes(cluster: Cluster) -> None:
    topic = "native-failover"
    create(cluster, topic)
    settings = settings_from("all", {"enable.idempotence": "true", "batch.num.messages": "500",
                                     "max.in.flight": "5"})
    rounds, per_batch = 60, 200
    victim = leader_node(cluster, topic, 0)
    written = {p: 0 for p in range(PARTITIONS)}
    with ColumnarProducer(cluster.bootstrap, topic, settings) as producer:
        assert producer.producer_id >= 0
        for r in range(rounds):
            if r == rounds // 3:
                # kill -9 with requests in flight to it: they are answered by nobody and go
                # again to the new leaders, with the sequence numbers they had
                kill_and_wait(cluster, topic, victim)
            if r == 2 * rounds // 3:
                restart(cluster, topic, victim)
            now = int(time.time() * 1000)
            batches = []
            for p in range(PARTITIONS):
                batches.append((p, build_columnar_batch(numbered(written[p], per_batch),
                                                        base_timestamp=now)))
                written[p] += per_batch
            producer.send(batches)
        producer.flush()
        assert not producer.errors, producer.first_error
        assert producer.acked_records == producer.sent_records == rounds * per_batch * PARTITIONS
        assert producer.retried_batches > 0  # the kill did hit batches in flight

    # read back with the native fetcher; half way, kill the leader of partition 1
    client = {"bootstrap.servers": cluster.bootstrap_of(), "client.id": "native-check"}
    fetchers = {p: PartitionFetcher(client, topic, p, read_committed=False)
                for p in range(PARTITIONS)}
    total = rounds * per_batch
    try:
        got = {p: read_native(cluster, topic, p, 0, total // 2, fetchers[p])
               for p in range(PARTITIONS)}
        second = leader_node(cluster, topic, 1)
        kill_and_wait(cluster, topic, second)
        for p in range(PARTITIONS):
            offsets, values = read_native(cluster, topic, p, total // 2, total, fetchers[p])
            got[p][0].extend(offsets)
            got[p][1].extend(values)
        assert fetchers[1].leader_changes > 0  # partition 1 was read from its new leader
    finally:
        for f in fetchers.values():
            f.close()
    restart(cluster, topic, second)
    for p in range(PARTITIONS):
        offsets, values = got[p]
        assert offsets == list(range(total)), f"partition {p}: offsets not contiguous"
        assert values == list(range(total)), f"partition {p}: lost, repeated or out of order"
    # and nothing beyond: the high watermark is exactly what was written
    hw = PartitionFetcher(client, topic, 0, read_committed=False)
    try:
        hw.send(total)
        assert hw.receive().high_watermark == total
    finally:
        hw.close()


@pytest.mark.timeout(300)
def test_bench_produce_and_consume_on_the_cluster(cluster: Cluster) -> None:
    topic = "native-bench"
    create(cluster, topic)
    n = 30000
    out = ok("bench", "produce", "-t", topic, "-n", str(n), "-s", "100", "--acks", "all",
             "--client", "columnar", "-X", "enable.idempotence=true",
             "-X", "batch.num.messages=1000", bootstrap=cluster.bootstrap)
    line = PRODUCER_SUMMARY.search(out)
    assert line and int(line.group(1)) == n, out
    out = ok("bench", "produce", "-t", topic, "-n", str(n), "-s", "100", "--acks", "all",
             bootstrap=cluster.bootstrap)
    line = PRODUCER_SUMMARY.search(out)
    assert line and int(line.group(1)) == n, out
    for client in ("columnar", "confluent-kafka"):
        out = ok("bench", "consume", "-t", topic, "-n", str(2 * n), "--client", client,
                 "--timeout", "10", bootstrap=cluster.bootstrap)
        line = CONSUMER_LINE.search(out)
        assert line and int(line.group(2)) == 2 * n, out
    # end-to-end latency with the columnar clients on an RF=3 topic (acks=all)
    create(cluster, "native-e2e")
    out = ok("bench", "e2e", "--client", "columnar", "-t", "native-e2e", "--rate", "2000",
             "--seconds", "1", "--partitions", str(PARTITIONS), "--acks", "all",
             bootstrap=cluster.bootstrap)
    m = E2E.search(out)
    assert m and int(m.group(1)) > 0, out
    assert "acks=all" in out.splitlines()[0], out
    seen = re.search(r"# (\d+) records sent, .*?, (\d+) seen by the consumer", out)
    assert seen and seen.group(1) == seen.group(2), out


def move_leaders(cluster: Cluster, topic: str, plan: Path) -> dict[int, int]:
    """Reorder every partition's replicas so another one is preferred, then elect the
    preferred leaders (`odradek partitions reassign` + `elect-leaders`): the old leaders stay
    up and answer NOT_LEADER_OR_FOLLOWER. Returns partition -> new leader."""
    parts = cluster.partitions(topic)
    wanted = {p: [*v["replicas"][1:], v["replicas"][0]] for p, v in parts.items()}
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": r} for p, r in wanted.items()]}))
    ok("partitions", "reassign", "--plan", str(plan), "--wait", bootstrap=cluster.bootstrap)
    ok("partitions", "elect-leaders", "--all-topic-partitions", bootstrap=cluster.bootstrap)
    wait_until(lambda: all(v["leader"] == wanted[p][0]
                           for p, v in cluster.partitions(topic).items()),
               f"the preferred leaders of {topic} elected", 60, cluster)
    assert all(wanted[p][0] != parts[p]["leader"] for p in parts)
    return {p: r[0] for p, r in wanted.items()}


@pytest.mark.timeout(300)
def test_elected_leaders_are_followed_by_producer_and_fetcher(cluster: Cluster,
                                                              tmp_path: Path) -> None:
    topic = "native-elect"
    create(cluster, topic)
    settings = settings_from("all", {"enable.idempotence": "true"})
    per_batch, rounds = 300, 10
    client = {"bootstrap.servers": cluster.bootstrap, "client.id": "native-elect"}
    fetchers = {p: PartitionFetcher(client, topic, p, read_committed=False)
                for p in range(PARTITIONS)}
    got: dict[int, tuple[list[int], list[int]]] = {p: ([], []) for p in range(PARTITIONS)}
    written = 0
    try:
        with ColumnarProducer(cluster.bootstrap, topic, settings) as producer:
            producer.connect()
            for r in range(2 * rounds):
                if r == rounds:
                    producer.flush()
                    assert not producer.errors, producer.first_error
                    assert producer.acked_records == written * PARTITIONS
                    for p in range(PARTITIONS):
                        offsets, values = read_native(cluster, topic, p, 0, written,
                                                      fetchers[p])
                        got[p][0].extend(offsets)
                        got[p][1].extend(values)
                    move_leaders(cluster, topic, tmp_path / "plan.json")
                now = int(time.time() * 1000)
                producer.send([(p, build_columnar_batch(numbered(written, per_batch),
                                                        base_timestamp=now))
                               for p in range(PARTITIONS)])
                written += per_batch
            producer.flush()
            assert not producer.errors, producer.first_error
            assert producer.acked_records == written * PARTITIONS
            assert producer.retried_batches > 0  # NOT_LEADER_OR_FOLLOWER sent them again
        half = rounds * per_batch
        # The second half through the same fetchers, still connected to the old leaders
        # (which stay up and answer NOT_LEADER_OR_FOLLOWER): each finds its new leader.
        for p in range(PARTITIONS):
            offsets, values = read_native(cluster, topic, p, half, written, fetchers[p])
            got[p][0].extend(offsets)
            got[p][1].extend(values)
            assert fetchers[p].leader_changes > 0, f"partition {p} never moved"
    finally:
        for f in fetchers.values():
            f.close()
    for p in range(PARTITIONS):
        assert got[p][0] == list(range(written)), f"partition {p}: offsets"
        assert got[p][1] == list(range(written)), f"partition {p}: lost, repeated or reordered"


@pytest.mark.timeout(300)
def test_plain_columnar_producer_is_at_least_once_across_a_kill(cluster: Cluster) -> None:
    """Without enable.idempotence (librdkafka's default) Kafka promises at least once: a
    batch the killed leader appended (and replicated) but never answered is sent again. No
    record is lost. With max.in.flight=1 (Kafka's rule for keeping order without
    idempotence) each partition's records keep their order, apart from such repeats."""
    topic = "native-plain"
    create(cluster, topic)
    settings = settings_from("all", {"max.in.flight": "1"})
    rounds, per_batch = 30, 200
    victim = leader_node(cluster, topic, 0)
    written = 0
    with ColumnarProducer(cluster.bootstrap, topic, settings) as producer:
        assert producer.producer_id == -1
        for r in range(rounds):
            if r == rounds // 3:
                kill_and_wait(cluster, topic, victim)
            now = int(time.time() * 1000)
            producer.send([(p, build_columnar_batch(numbered(written, per_batch),
                                                    base_timestamp=now))
                           for p in range(PARTITIONS)])
            written += per_batch
        producer.flush()
        assert not producer.errors, producer.first_error
        assert producer.acked_records == written * PARTITIONS
    restart(cluster, topic, victim)
    client = {"bootstrap.servers": cluster.bootstrap, "client.id": "native-plain"}
    for p in range(PARTITIONS):
        fetcher = PartitionFetcher(client, topic, p, read_committed=False)
        try:
            fetcher.send(0)
            end = fetcher.receive().high_watermark
            offsets, values = read_native(cluster, topic, p, 0, end, fetcher)
        finally:
            fetcher.close()
        assert offsets == list(range(end))
        assert set(values) == set(range(written)), f"partition {p}: a record was lost"
        # repeats are whole batches sent again: dropping them leaves the order written
        assert list(dict.fromkeys(values)) == list(range(written)), f"partition {p}: order"


@pytest.mark.timeout(300)
def test_bench_e2e_follows_leaders_that_move(cluster: Cluster, tmp_path: Path) -> None:
    """`odradek bench e2e --client columnar` while every leader moves under it (the old ones
    stay up and answer NOT_LEADER_OR_FOLLOWER): its producer and its consumer find the new
    leaders, and the consumer sees every record the producer sent, once. The producer is
    idempotent: without it an acks=all batch can be written twice across a move (the old
    leader answers NOT_LEADER_OR_FOLLOWER to a produce whose batch the new leader had already
    fetched, and the retry writes it again), as with Kafka."""
    topic = "native-e2e-move"
    create(cluster, topic)
    run = subprocess.Popen(
        [*ODRADEK, "bench", "e2e", "--client", "columnar", "-t", topic, "--rate", "2000",
         "--seconds", "30", "--partitions", str(PARTITIONS), "--acks", "all",
         "-X", "enable.idempotence=true", "-b", cluster.bootstrap],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        probe = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "e2e-probe"})
        try:  # the run has started writing: the leaders move under it
            wait_until(lambda: all(probe.get_watermark_offsets(
                TopicPartition(topic, p), timeout=5)[1] > 0 for p in range(PARTITIONS)),
                f"records in every partition of {topic}", 120, cluster)
        finally:
            probe.close()
        move_leaders(cluster, topic, tmp_path / "plan.json")
        out, err = run.communicate(timeout=240)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 0, err
    seen = re.search(r"# (\d+) records sent, .*?, (\d+) seen by the consumer", out)
    assert seen and int(seen.group(1)) > 0 and int(seen.group(2)) == int(seen.group(1)), \
        out + err
