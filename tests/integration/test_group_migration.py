"""Live migration between the group protocols (KIP-848, issue 20 point 3) on one node.

A classic group of kafka-python members is joined by confluent-kafka members with
`group.protocol=consumer`: the group is upgraded in place, the kafka-python members stay in
it through JoinGroup/SyncGroup/Heartbeat, and every partition has one owner. Then the
confluent-kafka members leave and the group goes back to the classic protocol. Each phase
produces a known set of keyed records once the group has settled: every record is read
exactly once across all members, and committed offsets carry over between the phases.
"""

from __future__ import annotations

import threading
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupType, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaConsumer
from kafka.errors import KafkaError
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)
from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest as DescribeGroupsV5
from kio.schema.describe_groups.v6.request import DescribeGroupsRequest as DescribeGroupsV6

from odradek.protocol.errors import ErrorCode
from tests.integration.group_support import Member, confluent_conf, disjoint_cover, new_topic
from tests.support.broker import BrokerProcess
from tests.support.wire import Conn

PARTITIONS = 6
WAIT_S = 120.0


def wait_for(cond: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.1)


class ClassicMember:
    """A kafka-python consumer (the classic protocol) polling in its own thread and
    committing synchronously after each batch it reads. A batch counts as read once its
    commit succeeded: one whose commit a rebalance refused is read again (by this member or
    the partition's next owner), so a record counted twice is one committed twice."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.records: list[tuple[int, int, bytes]] = []
        self.assignment: set[int] = set()
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
            auto_offset_reset="earliest", session_timeout_ms=10_000, heartbeat_interval_ms=500,
            client_id=f"kp-{uuid.uuid4().hex[:6]}")
        self.consumer.subscribe([topic])
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> ClassicMember:
        self.thread.start()
        return self

    def _run(self) -> None:
        c = self.consumer
        while not self._stop.is_set():
            try:
                batch = c.poll(timeout_ms=200)
                with self._lock:
                    self.assignment = {tp.partition for tp in c.assignment()}
                if batch:
                    c.commit()
                    with self._lock:
                        for recs in batch.values():
                            self.records.extend((r.partition, r.offset, r.key) for r in recs)
            except KafkaError as exc:  # noted; the test decides whether it matters
                self.errors.append(repr(exc))
            except Exception:
                self.errors.append("died: " + traceback.format_exc())
                raise
        c.close()

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(60)

    def snapshot(self) -> tuple[set[int], list[tuple[int, int, bytes]]]:
        with self._lock:
            return set(self.assignment), list(self.records)


def produce(bootstrap: str, topic: str, keys: list[str]) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for k in keys:
        p.produce(topic, key=k.encode(), value=k.encode())
    assert p.flush(60) == 0


def group_type(admin: AdminClient, group: str) -> tuple[Any, Any, list[set[int]]]:
    """(type, state, each member's partitions) as the admin client describes the group."""
    desc = admin.describe_consumer_groups([group])[group].result(30)
    members = [{tp.partition for tp in m.assignment.topic_partitions} for m in desc.members]
    return desc.type, desc.state, members


def check_mixed_describe(node: BrokerProcess, group: str, topic: str) -> None:
    """A consumer group with classic members, described as Kafka 4.x describes it: every
    member in ConsumerGroupDescribe v1 with its member_type (0 classic, 1 consumer); to
    DescribeGroups it is not a classic group (v6: GROUP_ID_NOT_FOUND; before: Dead)."""
    with Conn(node.port, timeout=30) as conn:
        [g] = conn.request(ConsumerGroupDescribeRequest(
            group_ids=(group,), include_authorized_operations=False)).groups
        assert g.error_code == ErrorCode.none and g.group_state == "Stable"
        kinds = sorted((int(m.member_type), m.client_id.startswith("kp-")) for m in g.members)
        assert kinds == [(0, True), (0, True), (1, False), (1, False)], kinds
        for m in g.members:  # the classic members' subscriptions come from their metadata
            assert list(m.subscribed_topic_names) == [topic]
        [v6] = conn.request(DescribeGroupsV6(groups=(group,),
                                             include_authorized_operations=False)).groups
        assert (v6.error_code, v6.error_message, v6.group_state, v6.members) == (
            ErrorCode.group_id_not_found, f"Group {group} is not a classic group.", "Dead", ())
        [v5] = conn.request(DescribeGroupsV5(groups=(group,),
                                             include_authorized_operations=False)).groups
        assert (v5.error_code, v5.group_state, v5.protocol_type, v5.members) == (
            ErrorCode.none, "Dead", "", ())
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        described = admin.describe_groups([group])[group]
    finally:
        admin.close()
    assert described["error"] is not None and "not a classic group" in described["error"]


def check_classic_describe(node: BrokerProcess, group: str, topic: str) -> None:
    """Back in the classic protocol, DescribeGroups lists the two kafka-python members with
    their subscription and assignment as ConsumerProtocol bytes (kafka-python decodes them)."""
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        described = admin.describe_groups([group])[group]
    finally:
        admin.close()
    assert described["error"] is None and described["group_state"] == "Stable", described
    assert described["protocol_type"] == "consumer" and len(described["members"]) == 2
    with Conn(node.port, timeout=30) as conn:
        [g] = conn.request(DescribeGroupsV5(groups=(group,),
                                            include_authorized_operations=False)).groups
    assert g.error_code == ErrorCode.none and g.group_state == "Stable"
    owned: list[set[int]] = []
    for m in g.members:
        assert m.client_id.startswith("kp-")
        assert list(ConsumerProtocolSubscription.decode(m.member_metadata).topics) == [topic]
        tps = ConsumerProtocolAssignment.decode(m.member_assignment).partitions()
        assert {tp.topic for tp in tps} == {topic}
        owned.append({tp.partition for tp in tps})
    assert disjoint_cover(owned, PARTITIONS), owned


@pytest.fixture(scope="module")
def node(shared_broker: BrokerProcess) -> Iterator[BrokerProcess]:
    yield shared_broker


def test_classic_group_upgrades_and_downgrades_live(node: BrokerProcess) -> None:
    b = node.bootstrap
    topic = new_topic(b, f"migrate-{uuid.uuid4().hex[:8]}", PARTITIONS)
    group = f"migrate-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": b})
    classic = [ClassicMember(b, group, topic).start() for _ in range(2)]
    modern: list[Member] = []
    departed: list[Member] = []  # what they read still counts
    expected: list[str] = []

    def all_keys() -> Counter[bytes]:
        out: Counter[bytes] = Counter()
        for cm in classic:
            out.update(k for _, _, k in cm.snapshot()[1])
        for m in modern + departed:
            with m._lock:
                out.update(v for _, _, v in m.records)
        return out

    def phase(name: str, n: int) -> None:
        keys = [f"{name}-{i}" for i in range(n)]
        expected.extend(keys)
        produce(b, topic, keys)
        wait_for(lambda: sum(all_keys().values()) >= len(expected),
                 f"{name}: every record read (classic members' partitions and errors: "
                 f"{[(cm.snapshot()[0], cm.errors) for cm in classic]})")
        got = all_keys()
        twice = {k: c for k, c in got.items() if c > 1}
        assert not twice, f"{name}: read more than once: {sorted(twice)[:10]}"
        assert set(got) == {k.encode() for k in expected}, f"{name}: records missing"

    def settled(kind: Any, members: int) -> Callable[[], bool]:
        def check() -> bool:
            try:
                gtype, state, parts = group_type(admin, group)
            except KafkaException:  # e.g. the coordinator is loading: ask again
                return False
            owned = [cm.snapshot()[0] for cm in classic] + [m.assignment for m in modern]
            return (gtype == kind and str(state).endswith("STABLE") and len(parts) == members
                    and disjoint_cover(parts, PARTITIONS) and disjoint_cover(owned, PARTITIONS))
        return check

    try:
        # 1. a classic group of two kafka-python members
        wait_for(settled(ConsumerGroupType.CLASSIC, 2), "the classic group to settle")
        phase("classic", 60)

        # 2. two confluent-kafka members join with the consumer protocol: the group is
        # upgraded and the kafka-python members stay in it
        modern.extend(Member(confluent_conf(b, group, protocol="consumer"), [topic]).start()
                      for _ in range(2))
        wait_for(settled(ConsumerGroupType.CONSUMER, 4),
                 "the upgraded group to settle with every member owning partitions")
        # members of both protocols share the partitions
        assert all(cm.snapshot()[0] for cm in classic) and all(m.assignment for m in modern)
        check_mixed_describe(node, group, topic)
        phase("mixed", 120)

        # 3. the consumer-protocol members leave: the group is downgraded to classic
        for m in modern:
            m.stop()
        owned_before = [m.assignment for m in modern]
        departed.extend(modern)
        modern.clear()
        wait_for(settled(ConsumerGroupType.CLASSIC, 2), "the downgraded group to settle")
        check_classic_describe(node, group, topic)
        phase("downgraded", 60)
        assert any(owned_before), "the consumer-protocol members owned nothing"
    finally:
        for m in modern:
            m.stop()
        for cm in classic:
            cm.stop()
    # rebalances may make a commit fail; what matters is that nothing was read twice
    for cm in classic:
        assert all("CommitFailed" in e or "RebalanceInProgress" in e for e in cm.errors), \
            cm.errors
