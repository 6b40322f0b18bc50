"""Share groups (issue 20, KIP-932) with the real share consumer (confluent-kafka's
ShareConsumer over librdkafka) against one node: more consumers than partitions each get
records and every record is delivered once accepted; a released record comes back with a
higher delivery count; a record released at the delivery-count limit is archived and never
comes back; what was acknowledged survives a restart of the node. At the wire: bad
acknowledgements and session epochs get Kafka's error codes and change nothing, and a
record whose acquisition lock ran out goes to another member."""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.alter_share_group_offsets.v0.request import (
    AlterShareGroupOffsetsRequest,
)
from kio.schema.alter_share_group_offsets.v0.request import (
    AlterShareGroupOffsetsRequestPartition as AlterPartition,
)
from kio.schema.alter_share_group_offsets.v0.request import (
    AlterShareGroupOffsetsRequestTopic as AlterTopic,
)
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.delete_share_group_offsets.v0.request import (
    DeleteShareGroupOffsetsRequest,
)
from kio.schema.delete_share_group_offsets.v0.request import (
    DeleteShareGroupOffsetsRequestTopic as DeleteTopic,
)
from kio.schema.describe_share_group_offsets.v1.request import (
    DescribeShareGroupOffsetsRequest,
)
from kio.schema.describe_share_group_offsets.v1.request import (
    DescribeShareGroupOffsetsRequestGroup as DescribeGroup,
)
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.share_acknowledge.v1.request import AcknowledgementBatch as AckBatchV1
from kio.schema.share_acknowledge.v1.request import (
    AcknowledgePartition,
    AcknowledgeTopic,
    ShareAcknowledgeRequest,
)
from kio.schema.share_fetch.v1.request import AcknowledgementBatch as FetchAckBatch
from kio.schema.share_fetch.v1.request import FetchPartition, FetchTopic, ShareFetchRequest
from kio.schema.share_fetch.v2.request import FetchPartition as FetchPartitionV2
from kio.schema.share_fetch.v2.request import FetchTopic as FetchTopicV2
from kio.schema.share_fetch.v2.request import ShareFetchRequest as ShareFetchRequestV2
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.static.primitive import i8, i32, i32Timedelta, i64

from odradek.protocol.errors import ErrorCode as E
from tests.integration.cli_support import odradek, ok
from tests.support.broker import BrokerProcess
from tests.support.wire import Conn

DEADLINE_S = 60


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    # the delivery limit at its minimum (2) keeps the archive case short
    # and locks as short as a group may set them (1 s) for the lock-timeout case
    b = BrokerProcess(Path(tmp_path_factory.mktemp("share")) / "data",
                      settings={"group.share.delivery.count.limit": "2",
                                "group.share.min.record.lock.duration.ms": "1000"})
    b.start(timeout=120)
    try:
        yield b
    finally:
        b.stop()


def _setup(node: BrokerProcess, topic: str, group: str, partitions: int, n: int,
           **group_configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result()
    configs = {"share.auto.offset.reset": "earliest", **group_configs}
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
        for k, v in configs.items()])
    for f in admin.incremental_alter_configs([res]).values():
        f.result()
    p = Producer({"bootstrap.servers": node.bootstrap})
    for i in range(n):
        p.produce(topic, str(i).encode(), partition=i % partitions)
    assert p.flush(30) == 0


def _consumer(node: BrokerProcess, group: str, topic: str, explicit: bool = False
              ) -> ShareConsumer:
    conf = {"bootstrap.servers": node.bootstrap, "group.id": group}
    if explicit:
        conf["share.acknowledgement.mode"] = "explicit"
    c = ShareConsumer(conf)
    c.subscribe([topic])
    return c


def _poll(c: ShareConsumer, timeout: float = 0.5) -> list:
    return [m for m in list(c.poll(timeout) or []) if m.error() is None]


def test_more_consumers_than_partitions_share_every_record(node: BrokerProcess) -> None:
    _setup(node, "sq-many", "sg-many", 2, 0)
    consumers = [_consumer(node, "sg-many", "sq-many") for _ in range(4)]
    seen: dict[int, list[bytes]] = {i: [] for i in range(4)}
    try:
        for c in consumers:  # each joins and opens its share session (a waiting fetch)
            _poll(c, 1.0)
        # one record at a time: each wakes the share fetches waiting then, so the records
        # spread over the members (all four hold both partitions)
        p = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 0})
        for i in range(200):
            p.produce("sq-many", str(i).encode(), partition=i % 2)
            p.flush(30)
        deadline = time.monotonic() + DEADLINE_S
        while sum(len(v) for v in seen.values()) < 200:
            if time.monotonic() > deadline:
                pytest.fail(f"got {[len(v) for v in seen.values()]} records per consumer")
            for i, c in enumerate(consumers):
                seen[i].extend(m.value() for m in _poll(c, 0.2))
    finally:
        for c in consumers:
            c.close()
    values = [v for vs in seen.values() for v in vs]
    assert sorted(values) == sorted(str(i).encode() for i in range(200))  # each exactly once
    assert all(seen.values()), "every consumer got records"


def test_release_redelivers_and_the_limit_archives(node: BrokerProcess) -> None:
    _setup(node, "sq-rel", "sg-rel", 1, 5)
    c = _consumer(node, "sg-rel", "sq-rel", explicit=True)
    deliveries: dict[bytes, list[int]] = {}
    deadline = time.monotonic() + DEADLINE_S
    try:
        # 0 is accepted; 1 released until the limit (2) archives it; 2 released once and
        # then accepted; 3 rejected; 4 (the last) accepted once 1 and 2 are settled
        while True:
            if time.monotonic() > deadline:
                pytest.fail(f"deliveries: {deliveries}")
            for m in _poll(c):
                counts = deliveries.setdefault(m.value(), [])
                counts.append(m.delivery_count())
                ack = AcknowledgeType.ACCEPT
                if m.value() == b"1" or (m.value() == b"2" and len(counts) == 1):
                    ack = AcknowledgeType.RELEASE
                elif m.value() == b"3":
                    ack = AcknowledgeType.REJECT
                c.acknowledge(m, ack)
            c.commit_sync()
            if len(deliveries.get(b"1", [])) >= 2 and len(deliveries.get(b"2", [])) >= 2:
                break
    finally:
        c.close()
    # nothing is left to deliver: the share-partition start offset passed every record
    with Conn(node.port) as conn:
        r = conn.request(DescribeShareGroupOffsetsRequest(groups=(
            DescribeGroup(group_id="sg-rel", topics=None),)))
        [p] = r.groups[0].topics[0].partitions
        assert (p.start_offset, p.lag) == (5, 0)
    assert deliveries == {b"0": [1], b"1": [1, 2], b"2": [1, 2], b"3": [1], b"4": [1]}


def test_acknowledged_state_survives_a_restart(node: BrokerProcess) -> None:
    _setup(node, "sq-dur", "sg-dur", 1, 10)
    c = _consumer(node, "sg-dur", "sq-dur", explicit=True)
    got: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(got) < 10:
            if time.monotonic() > deadline:
                pytest.fail(f"got {got}")
            for m in _poll(c):
                # the first five are accepted, the rest released for later
                n = int(m.value())
                if n < 5:
                    got.append(m.value())
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                else:
                    c.acknowledge(m, AcknowledgeType.RELEASE)
            c.commit_sync()
            if len(got) == 5:
                break
    finally:
        c.close()
    # a member of another group, at the wire: its membership is a record of
    # __consumer_offsets and outlives the restart with its epoch
    with Conn(node.port) as conn:
        r = conn.request(ShareGroupHeartbeatRequest(
            group_id="sg-dur-wire", member_id="w1", member_epoch=i32(0), rack_id=None,
            subscribed_topic_names=("sq-dur",)))
        assert r.error_code == 0, r
        epoch = r.member_epoch
    node.stop()
    node.start(timeout=120)
    with Conn(node.port) as conn:
        r = conn.request(ShareGroupHeartbeatRequest(
            group_id="sg-dur-wire", member_id="w1", member_epoch=epoch, rack_id=None,
            subscribed_topic_names=None))
        assert (r.error_code, r.member_epoch) == (0, epoch), r
    c = _consumer(node, "sg-dur", "sq-dur")
    after: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(after) < 5:
            if time.monotonic() > deadline:
                pytest.fail(f"after the restart got {after}")
            after.extend(m.value() for m in _poll(c))
    finally:
        c.close()
    assert sorted(after) == [str(i).encode() for i in range(5, 10)]


# ---------------------------------------------------------------- at the wire


def _join(conn: Conn, group: str, member: str, topic: str) -> uuid.UUID:
    r = conn.request(ShareGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=i32(0), rack_id=None,
        subscribed_topic_names=(topic,)))
    assert r.error_code == 0 and r.assignment is not None, r
    return r.assignment.topic_partitions[0].topic_id


def _fetch(conn: Conn, group: str, member: str, epoch: int, tid: uuid.UUID | None,
           wait_ms: int = 0, acks: tuple = ()) -> Any:
    topics = () if tid is None else (FetchTopic(topic_id=tid, partitions=(FetchPartition(
        partition_index=i32(0), acknowledgement_batches=acks),)),)
    return conn.request(ShareFetchRequest(
        group_id=group, member_id=member, share_session_epoch=i32(epoch),
        max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=wait_ms)),
        min_bytes=i32(1), max_bytes=i32(1 << 20), max_records=i32(100), batch_size=i32(100),
        topics=topics, forgotten_topics_data=()))


def _ack(conn: Conn, group: str, member: str, epoch: int, tid: uuid.UUID, first: int,
         last: int, kind: int = 1) -> Any:
    return conn.request(ShareAcknowledgeRequest(
        group_id=group, member_id=member, share_session_epoch=i32(epoch), topics=(
            AcknowledgeTopic(topic_id=tid, partitions=(AcknowledgePartition(
                partition_index=i32(0), acknowledgement_batches=(AckBatchV1(
                    first_offset=i64(first), last_offset=i64(last),
                    acknowledge_types=(i8(kind),)),)),)),)))


def _acquired(r: Any) -> list[tuple[int, int, int]]:
    return [(a.first_offset, a.last_offset, a.delivery_count)
            for t in r.responses for p in t.partitions for a in p.acquired_records]


def _part_code(r: Any) -> int:
    return int(r.responses[0].partitions[0].error_code)


def test_bad_acknowledgements_and_epochs_change_nothing(node: BrokerProcess) -> None:
    _setup(node, "sq-bad", "sg-bad", 1, 5, **{"share.record.lock.duration.ms": "1000"})
    with Conn(node.port) as a, Conn(node.port) as b:
        tid = _join(a, "sg-bad", "member-a", "sq-bad")
        _join(b, "sg-bad", "member-b", "sq-bad")
        got: list[tuple[int, int, int]] = []
        deadline = time.monotonic() + DEADLINE_S
        epoch_a = 0
        while not got:  # the first fetch opens the session; later ones wait for records
            if time.monotonic() > deadline:
                pytest.fail("member a acquired nothing")
            r = _fetch(a, "sg-bad", "member-a", epoch_a, tid, wait_ms=500)
            assert r.error_code == 0, r
            epoch_a += 1
            got = _acquired(r)
        assert got == [(0, 4, 1)]
        # a wrong session epoch, and acknowledgements on the session-opening fetch
        assert _fetch(a, "sg-bad", "member-a", epoch_a + 5, tid).error_code == \
            E.invalid_share_session_epoch
        r = _fetch(b, "sg-bad", "member-b", 0, tid, acks=(AckBatchV1Fetch(0, 4),))
        assert r.error_code == E.invalid_request
        assert _ack(b, "sg-bad", "member-b", 1, tid, 0, 4).error_code == \
            E.share_session_not_found
        r = _fetch(b, "sg-bad", "member-b", 0, tid)  # b's session, nothing to acquire
        assert r.error_code == 0 and not _acquired(r)
        # b acknowledges a's records; a acknowledges past what it acquired
        assert _part_code(_ack(b, "sg-bad", "member-b", 1, tid, 0, 4)) == \
            E.invalid_record_state
        assert _part_code(_ack(a, "sg-bad", "member-a", epoch_a, tid, 3, 9)) == \
            E.invalid_request
        epoch_a += 1
        # nothing changed: a still holds 0-4, and accepts 0-1 (records 2-4 are left to
        # run out their 1 s lock)
        assert _part_code(_ack(a, "sg-bad", "member-a", epoch_a, tid, 0, 1)) == 0
        epoch_a += 1
        # lock timeout: b gets 2-4 again, on their second delivery
        again: list[tuple[int, int, int]] = []
        epoch_b = 1
        while not again:
            if time.monotonic() > deadline:
                pytest.fail("the records whose lock ran out never came back")
            again = _acquired(_fetch(b, "sg-bad", "member-b", epoch_b, tid, wait_ms=500))
            epoch_b += 1
        assert again == [(2, 4, 2)]
        # a's acknowledgement after its lock ran out is refused
        assert _part_code(_ack(a, "sg-bad", "member-a", epoch_a, tid, 2, 2)) == \
            E.invalid_record_state
        assert _part_code(_ack(b, "sg-bad", "member-b", epoch_b, tid, 2, 4)) == 0


def AckBatchV1Fetch(first: int, last: int) -> Any:
    return FetchAckBatch(first_offset=i64(first), last_offset=i64(last),
                         acknowledge_types=(i8(1),))


def test_share_group_admin(node: BrokerProcess) -> None:
    """kafka-share-groups' calls at the wire: list with the type filter, describe the start
    offsets and lag, reset them (the records are delivered again), delete the offsets and
    the group."""
    _setup(node, "sq-adm", "sg-adm", 1, 4)
    c = _consumer(node, "sg-adm", "sq-adm")
    got: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(got) < 4:
            if time.monotonic() > deadline:
                pytest.fail(f"got {got}")
            got.extend(m.value() for m in _poll(c))
        # implicit mode accepts a poll's records at the next poll or commit; librdkafka's
        # close does neither (its final ShareAcknowledge carries no acknowledgements)
        c.commit_sync()
    finally:
        c.close()
    with Conn(node.port) as conn:
        def describe() -> Any:
            r = conn.request(DescribeShareGroupOffsetsRequest(groups=(
                DescribeGroup(group_id="sg-adm", topics=None),)))
            [g] = r.groups
            assert g.error_code == 0, g
            [t] = g.topics
            [p] = t.partitions
            return p

        p = describe()
        assert (p.start_offset, p.lag, p.error_code) == (4, 0, 0)
        r = conn.request(ListGroupsRequest(states_filter=(), types_filter=("share",)))
        assert [(g.group_id, g.group_type) for g in r.groups if g.group_id == "sg-adm"] == \
            [("sg-adm", "share")]
        assert all(g.group_type == "share" for g in r.groups)
        # reset to the start: everything is delivered again, on a first delivery
        r = conn.request(AlterShareGroupOffsetsRequest(group_id="sg-adm", topics=(AlterTopic(
            topic_name="sq-adm", partitions=(AlterPartition(
                partition_index=i32(0), start_offset=i64(0)),)),)))
        assert r.error_code == 0 and r.responses[0].partitions[0].error_code == 0, r
        p = describe()
        assert (p.start_offset, p.lag) == (0, 4)
        # one namespace: a consumer-protocol member cannot join the share group's id
        r = conn.request(ConsumerGroupHeartbeatRequest(
            group_id="sg-adm", member_id="c1", member_epoch=i32(0),
            rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
            subscribed_topic_names=("sq-adm",), server_assignor=None, topic_partitions=()))
        assert r.error_code == E.group_id_not_found, r
    c = _consumer(node, "sg-adm", "sq-adm")
    again: list[tuple[bytes, int]] = []
    try:
        while len(again) < 4:
            if time.monotonic() > deadline:
                pytest.fail(f"after the reset got {again}")
            again.extend((m.value(), m.delivery_count()) for m in _poll(c))
        with Conn(node.port) as conn:  # a member is in: the offsets cannot change
            r = conn.request(DeleteShareGroupOffsetsRequest(
                group_id="sg-adm", topics=(DeleteTopic(topic_name="sq-adm"),)))
            assert r.error_code == E.non_empty_group
    finally:
        c.close()
    assert sorted(again) == [(str(i).encode(), 1) for i in range(4)]
    with Conn(node.port) as conn:
        r = conn.request(DeleteShareGroupOffsetsRequest(
            group_id="sg-adm", topics=(DeleteTopic(topic_name="sq-adm"),)))
        assert r.error_code == 0 and r.responses[0].error_code == 0, r
        r = conn.request(DeleteGroupsRequest(groups_names=("sg-adm",)))
        assert [(x.group_id, x.error_code) for x in r.results] == [("sg-adm", 0)]
        r = conn.request(ListGroupsRequest(states_filter=(), types_filter=("share",)))
        assert "sg-adm" not in [g.group_id for g in r.groups]


def test_auto_offset_reset_by_duration(node: BrokerProcess) -> None:
    # records of the last day: all three (the start offset found by timestamp)
    _setup(node, "sq-dur1d", "sg-dur1d", 1, 3, **{"share.auto.offset.reset": "by_duration:P1D"})
    c = _consumer(node, "sg-dur1d", "sq-dur1d")
    got: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(got) < 3:
            if time.monotonic() > deadline:
                pytest.fail(f"got {got}")
            got.extend(m.value() for m in _poll(c))
        c.commit_sync()
    finally:
        c.close()
    assert got == [b"0", b"1", b"2"]


def test_read_committed_skips_aborted_transactions(node: BrokerProcess) -> None:
    _setup(node, "sq-txn", "sg-txn", 1, 0, **{"share.isolation.level": "read_committed"})
    p = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": "share-txn"})
    p.init_transactions(30)
    for values, commit in ((["c0", "c1"], True), (["a0", "a1"], False), (["c2"], True)):
        p.begin_transaction()
        for v in values:
            p.produce("sq-txn", v.encode(), partition=0)
        p.flush(30)
        (p.commit_transaction if commit else p.abort_transaction)(30)
    c = _consumer(node, "sg-txn", "sq-txn")
    got: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        # one partition, acquired in offset order: once c2 is here, the aborted records
        # before it (and the transaction markers) were passed over
        while b"c2" not in got:
            if time.monotonic() > deadline:
                pytest.fail(f"got {got}")
            got.extend(m.value() for m in _poll(c))
        c.commit_sync()
    finally:
        c.close()
    assert got == [b"c0", b"c1", b"c2"]


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.tuples(st.integers(-5, 2**40), st.integers(-5, 2**40),
                                  st.lists(st.integers(-3, 9), max_size=4)), max_size=3),
       epoch=st.integers(-3, 5))
def test_random_acknowledgements_get_kafka_codes(node: BrokerProcess, batches: list,
                                                 epoch: int) -> None:
    """Whatever acknowledgements and session epochs a member sends, it gets an error code
    (top level or per partition) and the node keeps serving."""
    global _FUZZ_TOPIC
    if _FUZZ_TOPIC is None:
        _setup(node, "sq-fuzz", "sg-fuzz", 1, 3)
        with Conn(node.port) as conn:
            _FUZZ_TOPIC = _join(conn, "sg-fuzz", "fz", "sq-fuzz")
    tid = _FUZZ_TOPIC
    with Conn(node.port) as conn:
        opened = _fetch(conn, "sg-fuzz", "fz", 0, tid)  # a fresh session each time
        assert opened.error_code == 0, opened
        r = conn.request(ShareAcknowledgeRequest(
            group_id="sg-fuzz", member_id="fz", share_session_epoch=i32(epoch), topics=(
                AcknowledgeTopic(topic_id=tid, partitions=(AcknowledgePartition(
                    partition_index=i32(0), acknowledgement_batches=tuple(AckBatchV1(
                        first_offset=i64(a), last_offset=i64(b),
                        acknowledge_types=tuple(i8(t) for t in ts))
                        for a, b, ts in batches)),)),)))
        codes = {int(r.error_code)} | {int(p.error_code) for t in r.responses
                                       for p in t.partitions}
        assert codes <= {0, E.invalid_request, E.invalid_record_state,
                         E.invalid_share_session_epoch, E.share_session_not_found}, r
        if epoch != 1:
            assert r.error_code in (E.invalid_share_session_epoch, 0 if epoch == -1 else -1)
    with Conn(node.port) as conn:  # the node still answers
        assert _fetch(conn, "sg-fuzz", "fz", 0, tid).error_code == 0


_FUZZ_TOPIC: uuid.UUID | None = None


def test_record_limit_acquire_mode(node: BrokerProcess) -> None:
    """ShareFetch v2's record-limit mode: max_records is strict even inside a batch."""
    _setup(node, "sq-lim", "sg-lim", 1, 0)
    p = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 30_000})
    for i in range(5):  # one batch of five
        p.produce("sq-lim", str(i).encode(), partition=0)
    assert p.flush(30) == 0
    with Conn(node.port) as conn:
        tid = _join(conn, "sg-lim", "lim", "sq-lim")
        got: list[tuple[int, int, int]] = []
        epoch = 0
        deadline = time.monotonic() + DEADLINE_S
        while not got:
            if time.monotonic() > deadline:
                pytest.fail("nothing acquired")
            r = conn.request(ShareFetchRequestV2(
                group_id="sg-lim", member_id="lim", share_session_epoch=i32(epoch),
                max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=500)),
                min_bytes=i32(1), max_bytes=i32(1 << 20), max_records=i32(2),
                batch_size=i32(2), share_acquire_mode=i8(1), topics=(FetchTopicV2(
                    topic_id=tid, partitions=(FetchPartitionV2(
                        partition_index=i32(0), acknowledgement_batches=()),)),),
                forgotten_topics_data=()))
            assert r.error_code == 0, r
            epoch += 1
            got = _acquired(r)
        assert got == [(0, 1, 1)]


# ---------------------------------------------------------------- odradek group --type share


def _rows(out: str) -> list[list[str]]:
    return [ln.split() for ln in out.splitlines()
            if ln.strip() and not ln.startswith(("GROUP", "Share group", "(plan"))]


def test_cli_lists_describes_and_resets_share_groups(node: BrokerProcess) -> None:
    """`odradek group list/describe/reset-offsets --type share`, as kafka-share-groups: a
    reset is refused while the group has a member, and once it is empty the start offsets
    move back and the records come again."""
    _setup(node, "sq-cli", "sg-cli", 2, 10)
    b = node.bootstrap
    c = _consumer(node, "sg-cli", "sq-cli", explicit=True)
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < 10:
            if time.monotonic() > deadline:
                pytest.fail(f"got {got}")
            for m in _poll(c):
                got.append(m.value())
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync()
        # (each command is a subprocess: a few, to keep the test cheap)
        assert ["sg-cli", "share", "Stable"] in _rows(ok("group", "list", "--type", "share",
                                                         bootstrap=b))
        [member] = _rows(ok("group", "describe", "sg-cli", "--type", "share", "--members",
                            bootstrap=b))
        assert member[0] == "sg-cli" and member[4] == "2"
        refused = odradek("group", "reset-offsets", "sg-cli", "--type", "share",
                          "--all-topics", "--to-earliest", "--execute", bootstrap=b)
        assert refused.returncode != 0 and "is not empty" in refused.stderr, refused
    finally:
        c.close()

    # the member leaves with close()
    deadline = time.monotonic() + DEADLINE_S
    while (state := _rows(ok("group", "describe", "sg-cli", "--type", "share", "--state",
                             bootstrap=b))[0])[-2:] != ["Empty", "0"]:
        if time.monotonic() > deadline:
            pytest.fail(f"the group did not become empty: {state}")
        time.sleep(0.2)
    ok("group", "reset-offsets", "sg-cli", "--type", "share", "--topic", "sq-cli:1",
       "--to-offset", "3", "--execute", bootstrap=b)
    # partition 0 untouched: every record done, no lag; partition 1 back at 3, 2 to go
    offsets = _rows(ok("group", "describe", "sg-cli", "--type", "share", bootstrap=b))
    assert [(r[2], r[4], r[5]) for r in offsets] == [("0", "5", "0"), ("1", "3", "2")]
    c = _consumer(node, "sg-cli", "sq-cli")
    again: list[bytes] = []
    try:
        deadline = time.monotonic() + DEADLINE_S
        while len(again) < 2:
            if time.monotonic() > deadline:
                pytest.fail(f"after the reset got {again}")
            again.extend(m.value() for m in _poll(c))
        c.commit_sync()
    finally:
        c.close()
    # partition 1 holds 1, 3, 5, 7, 9 at offsets 0-4: from offset 3 come 7 and 9
    assert sorted(again) == [b"7", b"9"]
