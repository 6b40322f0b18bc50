"""Issue 20, point 2 across a cluster: share groups (KIP-932) whose share-partition leaders
are not the share coordinators of their state, on one real 3-node cluster.

The group name is chosen so that no data partition's leader is the share coordinator of its
state (the leader of the `__share_group_state` partition its key "group:topicId:partition"
hashes to), and so that the node killed later leads neither a data partition nor the
group's `__consumer_offsets` partition: the share-partition leaders read and write the
state through the persister RPCs on another node. confluent-kafka's real ShareConsumer gets
every record exactly once. Then the share coordinator of partition 0's state is killed with
kill -9: its partition moves to a new leader, which replays the state; consumption goes on
with no acknowledged record delivered again, and ReadShareGroupState at the new coordinator
shows the share-partition start offset past every record. One cluster for the module.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from kio.schema.describe_share_group_offsets.v1.request import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsRequestTopic,
)
from kio.schema.read_share_group_state_summary.v1.request import (
    PartitionData,
    ReadShareGroupStateSummaryRequest,
    ReadStateSummaryData,
)
from kio.static.primitive import i32

from odradek.coordinator.offsets_topic import partition_for
from odradek.coordinator.share.state_log import ShareKey
from tests.support.wire import Conn
from tests.system.cluster_support import Cluster, running_cluster, wait_until

TOPIC = "sq-cluster"
PARTITIONS = 2
STATE_PARTITIONS = 3
OFFSETS_PARTITIONS = 3
FIRST = 200  # consumed and acknowledged before the kill
MORE = 100  # produced after it
EXTRA = 10  # produced last, per partition, never consumed: the share-group lag
DEADLINE_S = 120.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    settings = {"share.coordinator.state.topic.num.partitions": str(STATE_PARTITIONS),
                "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS)}
    with running_cluster(tmp_path_factory.mktemp("share") / "c", 3, settings=settings) as c:
        yield c


def _consumer(bootstrap: str, group: str) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "share.acknowledgement.mode": "explicit"})
    c.subscribe([TOPIC])
    return c


def _set_earliest(admin: AdminClient, group: str) -> None:
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest",
                    incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([res]).values():
        f.result()


def _produce(bootstrap: str, start: int, count: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                  "message.timeout.ms": 120000})
    for i in range(start, start + count):
        p.produce(TOPIC, str(i).encode(), partition=i % PARTITIONS)
        p.poll(0)
    assert p.flush(120) == 0


def _topic_id(admin: AdminClient) -> uuid.UUID:
    from confluent_kafka import TopicCollection

    desc = admin.describe_topics(TopicCollection([TOPIC]))[TOPIC].result()
    tid = desc.topic_id
    msb = tid.get_most_significant_bits() & (2**64 - 1)
    lsb = tid.get_least_significant_bits() & (2**64 - 1)
    return uuid.UUID(int=(msb << 64) | lsb)


def _pick_group(cluster: Cluster, topic_id: uuid.UUID) -> tuple[str, int]:
    """A group whose state coordinators differ from every data partition's leader, and a
    node to kill (partition 0's state coordinator) that leads no data partition and not the
    group's offsets partition."""
    data = {p: v["leader"] for p, v in cluster.partitions(TOPIC).items()}
    state = {p: v["leader"] for p, v in cluster.partitions("__share_group_state").items()}
    offsets = {p: v["leader"] for p, v in cluster.partitions("__consumer_offsets").items()}
    fallback = None
    for i in range(5000):
        group = f"sg-{i}"
        coords = {p: state[partition_for(ShareKey(group, topic_id, p).coordinator_key(),
                                         STATE_PARTITIONS)] for p in data}
        victim = coords[0]
        group_coordinator = offsets[partition_for(group, OFFSETS_PARTITIONS)]
        # ...and a group coordinator that does not lead every data partition (the lag of
        # one led elsewhere needs that leader's high watermark)
        if (all(coords[p] != data[p] for p in data) and victim not in data.values()
                and group_coordinator != victim
                and any(data[p] != group_coordinator for p in data)):
            # best: partition 1's state stays on a live node other than the group
            # coordinator, so DeleteGroups deletes it remotely (the leaders' layout may
            # not allow it: then any group that fits the rest)
            if coords[1] not in (victim, group_coordinator):
                return group, victim
            fallback = fallback or (group, victim)
    if fallback is not None:
        return fallback
    pytest.fail(f"no group fits leaders {data}, state {state}, offsets {offsets}")


def _consume(consumer: ShareConsumer, want: set[bytes], got: list[bytes],
             cluster: Cluster) -> None:
    """Poll, accept and commit until every value of `want` arrived."""
    deadline = time.monotonic() + DEADLINE_S
    while not want <= set(got):
        if time.monotonic() > deadline:
            pytest.fail(f"missing {sorted(want - set(got))[:20]} of {len(want)}\n"
                        f"{cluster.logs(3000)}")
        cluster.check_alive()
        for m in list(consumer.poll(0.5) or []):
            if m.error() is None:
                got.append(m.value())
                consumer.acknowledge(m, AcknowledgeType.ACCEPT)
        consumer.commit_sync()


def _read_state(port: int, group: str, topic_id: uuid.UUID, partition: int) -> Any:
    with Conn(port) as conn:
        r = conn.request(ReadShareGroupStateSummaryRequest(group_id=group, topics=(
            ReadStateSummaryData(topic_id=topic_id, partitions=(
                PartitionData(partition=i32(partition), leader_epoch=i32(-1)),)),)))
    return r.results[0].partitions[0]


def test_share_group_state_on_another_node_survives_its_coordinator(cluster: Cluster) -> None:
    bootstrap = cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result()
    cluster.wait_isr(TOPIC, 3)
    # the first share group creates __share_group_state: a warm-up member makes it
    _set_earliest(admin, "sg-warmup")
    warm = _consumer(bootstrap, "sg-warmup")
    try:
        wait_until(lambda: (warm.poll(0.5), _has_state_topic(cluster))[1],
                   "__share_group_state created", 90, cluster)
    finally:
        warm.close()
    cluster.wait_isr("__share_group_state", 3)
    topic_id = _topic_id(admin)
    group, victim = _pick_group(cluster, topic_id)
    _set_earliest(admin, group)
    _produce(bootstrap, 0, FIRST)

    consumer = _consumer(bootstrap, group)
    got: list[bytes] = []
    try:
        _consume(consumer, {str(i).encode() for i in range(FIRST)}, got, cluster)
        before = list(got)
        # the state of partition 0 is at `victim`, which leads no data partition: kill it
        cluster.kill9(victim)
        _produce(cluster.bootstrap_of(), FIRST, MORE)
        _consume(consumer, {str(i).encode() for i in range(FIRST + MORE)}, got, cluster)
    finally:
        consumer.close()
    assert sorted(got) == sorted(str(i).encode() for i in range(FIRST + MORE)), \
        "every record delivered exactly once, none acknowledged delivered again"
    assert len(before) == FIRST

    # the new coordinator of partition 0's state (an admin's ReadShareGroupStateSummary,
    # which neither fences nor moves the leader epoch) has every record of the partition
    # done: the share-partition start offset is past them all
    state_p = partition_for(ShareKey(group, topic_id, 0).coordinator_key(), STATE_PARTITIONS)
    leader = wait_until(lambda: _live_leader(cluster, state_p, victim),
                        "a new leader of the state partition", 60, cluster)
    port = int(cluster.node(leader).bootstrap.rsplit(":", 1)[1])
    records_p0 = len([i for i in range(FIRST + MORE) if i % PARTITIONS == 0])
    p = wait_until(lambda: _done(port, group, topic_id, records_p0),
                   "the state of partition 0 at its new coordinator", 60, cluster)
    assert int(p.error_code) == 0 and int(p.start_offset) == records_p0, p

    # share-group lag (DescribeShareGroupOffsets v1) at the group's coordinator, also for
    # the partition another node leads: EXTRA records past everything acknowledged
    _produce_each(cluster.bootstrap_of(), EXTRA)
    offsets_leader = cluster.partitions("__consumer_offsets")[
        partition_for(group, OFFSETS_PARTITIONS)]["leader"]
    data = {q: v["leader"] for q, v in cluster.partitions(TOPIC).items()}
    assert any(leader != offsets_leader for leader in data.values()), (data, offsets_leader)
    coord_port = int(cluster.node(offsets_leader).bootstrap.rsplit(":", 1)[1])
    counts = {q: len([i for i in range(FIRST + MORE) if i % PARTITIONS == q])
              for q in range(PARTITIONS)}
    want = {q: (counts[q], EXTRA) for q in range(PARTITIONS)}
    lags = wait_until(lambda: _lags_if(coord_port, group, want),
                      "the share-group lag of every partition", 60, cluster)
    assert lags == want, lags

    # DeleteGroups of the group, empty now, through the admin client: the state of every
    # share-partition goes, also where another node's share coordinator holds it
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_of()})
    admin.delete_consumer_groups([group])[group].result(60)
    state_leaders = {}
    for q in range(PARTITIONS):
        state_q = partition_for(ShareKey(group, topic_id, q).coordinator_key(), STATE_PARTITIONS)
        state_leaders[q] = leader = wait_until(
            lambda sq=state_q: _live_leader(cluster, sq, victim), "a state leader", 60, cluster)
        port = int(cluster.node(leader).bootstrap.rsplit(":", 1)[1])
        p = _read_state(port, group, topic_id, q)
        assert (int(p.error_code), int(p.start_offset)) == (0, -1), (q, p)
    print(f"group coordinator {offsets_leader}, state coordinators {state_leaders}")
    assert group not in {g.group_id for g in admin.list_consumer_groups().result(60).valid}


def _produce_each(bootstrap: str, count: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                  "message.timeout.ms": 120000})
    for q in range(PARTITIONS):
        for i in range(count):
            p.produce(TOPIC, f"extra-{q}-{i}".encode(), partition=q)
    assert p.flush(120) == 0


def _lags(port: int, group: str) -> dict[int, tuple[int, int]]:
    """partition -> (start offset, lag) from DescribeShareGroupOffsets v1."""
    with Conn(port, timeout=60) as conn:
        r = conn.request(DescribeShareGroupOffsetsRequest(groups=(
            DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=(
                DescribeShareGroupOffsetsRequestTopic(
                    topic_name=TOPIC, partitions=tuple(i32(q) for q in range(PARTITIONS))),
            )),)))
    [g] = r.groups
    assert int(g.error_code) == 0, g
    [t] = g.topics
    out = {}
    for p in t.partitions:
        assert int(p.error_code) == 0, p
        out[int(p.partition_index)] = (int(p.start_offset), int(p.lag))
    return out


def _lags_if(port: int, group: str, want: dict[int, tuple[int, int]]
             ) -> dict[int, tuple[int, int]] | None:
    # the high watermarks move once the followers have the extra records
    got = _lags(port, group)
    return got if got == want else None


def _done(port: int, group: str, topic_id: uuid.UUID, end: int) -> Any:
    p = _read_state(port, group, topic_id, 0)
    # the last acknowledgements reach the coordinator with the consumer's close
    return p if int(p.error_code) == 0 and int(p.start_offset) == end else None


def _has_state_topic(cluster: Cluster) -> bool:
    try:
        return bool(cluster.partitions("__share_group_state"))
    except RuntimeError:
        return False


def _live_leader(cluster: Cluster, partition: int, dead: int) -> int | None:
    leader = cluster.partitions("__share_group_state")[partition]["leader"]
    return leader if leader >= 0 and leader != dead else None
