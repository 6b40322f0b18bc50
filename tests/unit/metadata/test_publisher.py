from __future__ import annotations

import uuid
from dataclasses import dataclass

from odradek.metadata.config.broker_configs import BrokerConfig
from odradek.metadata.controller import Controller, load_image
from odradek.metadata.controller_requests import CreatableTopic
from odradek.metadata.publisher import MetadataPublisher
from odradek.metadata.quorum import MetadataQuorum
from odradek.metadata.records import (
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from tests.unit.metadata.fake_quorum import FakeQuorum


@dataclass
class SnapshotLoaded:  # the shape of h14raft's notice
    records: list[MetadataRecord]


def topic_records(name: str, tid: uuid.UUID, partitions: int = 1) -> list[MetadataRecord]:
    return [TopicRecord(name, tid)] + [
        PartitionRecord(p, tid, [1], [1], leader=1, leader_epoch=0, partition_epoch=0)
        for p in range(partitions)]


def test_commits_build_the_image_and_listeners_get_delta_and_image():
    quorum = FakeQuorum()
    publisher = MetadataPublisher("c")
    publisher.attach(quorum)
    seen = []
    publisher.add_listener(lambda delta, image: seen.append((delta, image)))
    tid = uuid.uuid4()
    last = quorum.append(topic_records("a", tid, 2))
    assert last == 2 and publisher.offset == 2
    [(delta, image)] = seen
    assert image is publisher.image
    assert delta.created_topics == {"a": tid}
    assert sorted(image.topics_by_name["a"].partitions) == [0, 1]


def test_a_batch_already_applied_is_skipped():
    publisher = MetadataPublisher("c")
    tid = uuid.uuid4()
    batch = list(enumerate(topic_records("a", tid)))
    publisher.on_commit(batch)
    assert publisher.on_commit(batch) is None  # replay overlapping the commit notice
    assert publisher.offset == 1


def test_a_failing_listener_does_not_stop_the_others():
    publisher = MetadataPublisher("c")
    calls = []

    def bad(delta, image):
        raise RuntimeError("boom")

    publisher.add_listener(bad)
    publisher.add_listener(lambda d, i: calls.append(i.offset))
    publisher.on_commit(list(enumerate(topic_records("a", uuid.uuid4()))))
    assert calls == [1]


def test_snapshot_notice_rebuilds_the_image_and_reports_the_difference():
    publisher = MetadataPublisher("c")
    old, kept = uuid.uuid4(), uuid.uuid4()
    publisher.on_commit(list(enumerate(topic_records("old", old) + topic_records("kept", kept))))
    new = uuid.uuid4()
    inc = uuid.uuid4()
    snapshot = (topic_records("kept", kept, 2) + topic_records("new", new) + [
        RegisterBrokerRecord(broker_id=1, incarnation_id=inc, broker_epoch=7),
        UnfenceBrokerRecord(1, 7)])
    seen = []
    publisher.add_listener(lambda d, i: seen.append(d))
    publisher.on_commit([(50, SnapshotLoaded(snapshot))])
    image = publisher.image
    assert image.offset == 50
    assert set(image.topics_by_name) == {"kept", "new"}
    assert image.live_brokers() == [1]
    [delta] = seen
    assert delta.created_topics == {"new": new}
    assert set(delta.deleted_topics) == {"old"}
    assert ("kept", 1) in delta.created_partitions
    assert ("kept", 0) not in delta.changed_partitions  # same state as before
    assert 1 in delta.changed_brokers
    # records after the snapshot apply on top of it
    publisher.on_commit([(51, UnfenceBrokerRecord(1, 7))])
    assert publisher.offset == 51


def test_load_replays_the_committed_log(tmp_path):
    quorum = MetadataQuorum.open(tmp_path, node_id=1)
    controller = Controller(quorum, load_image(quorum, "c"), BrokerConfig.from_properties({}))
    controller.bootstrap()
    controller.register_broker()
    controller.create_topics([CreatableTopic("t", 2)])
    quorum.close()
    quorum = MetadataQuorum.open(tmp_path, node_id=1)
    publisher = MetadataPublisher("c")
    image = publisher.load(quorum)
    assert sorted(image.topics_by_name["t"].partitions) == [0, 1]
    assert image.offset == quorum.commit_offset
    quorum.close()


def test_controller_reads_what_the_publisher_applied():
    # the controller never applies its own records: with a quorum that notifies, the image
    # it reads after an operation is the publisher's
    quorum = FakeQuorum()
    publisher = MetadataPublisher("c")
    publisher.attach(quorum)
    controller = Controller(quorum, publisher, BrokerConfig.from_properties({}))
    controller.bootstrap()
    controller.register_broker()
    controller.create_topics([CreatableTopic("t", 1)])
    assert controller.image is publisher.image
    assert "t" in publisher.image.topics_by_name
    assert publisher.batches == len(quorum.batches)


def test_image_to_records_rebuilds_the_image():
    from odradek.metadata.controller_requests import (
        AlterPartitionItem,
        IncrementalAlterConfigsResource,
        ReassignmentTarget,
    )
    from odradek.metadata.image import image_to_records
    from odradek.metadata.records import RESOURCE_TOPIC, decode_record, encode_record
    from tests.unit.metadata.cluster_support import make_cluster

    c = make_cluster()
    c.start_brokers(1, 2, 3, racks={1: "a", 2: "b", 3: "a"})
    c.create("t", partitions=3, rf=2)
    c.controller.incremental_alter_configs([IncrementalAlterConfigsResource(
        RESOURCE_TOPIC, "t", [("retention.ms", 0, "1000")])])
    c.controller.alter_partition_reassignments([ReassignmentTarget("t", 0, [1, 2, 3])])
    c.controller.allocate_producer_ids(1, c.epochs[1])
    c.heartbeat(3, want_fence=True)
    part = c.partition("t", 1)
    c.controller.alter_partition(part.leader, c.epochs[part.leader], [AlterPartitionItem(
        c.image.topics_by_name["t"].topic_id, 1, part.leader_epoch, part.partition_epoch,
        [(part.leader, -1)])])
    image = c.image
    records = [decode_record(encode_record(r)) for r in image_to_records(image)]
    publisher = MetadataPublisher(image.cluster_id)
    publisher.on_commit([(image.offset, SnapshotLoaded(records))])
    rebuilt = publisher.image
    assert rebuilt.brokers == image.brokers
    assert rebuilt.topics_by_id == image.topics_by_id
    assert rebuilt.configs == image.configs
    assert rebuilt.features == image.features
    assert rebuilt.next_producer_id == image.next_producer_id
    assert rebuilt.offset == image.offset


def test_replayed_snapshot_records_share_one_offset():
    # KRaftQuorum.replay hands a snapshot's records over with the snapshot's last offset
    tid = uuid.uuid4()
    publisher = MetadataPublisher("c")
    publisher.on_commit([(9, r) for r in topic_records("a", tid, 3)])
    assert sorted(publisher.image.topics_by_name["a"].partitions) == [0, 1, 2]
    assert publisher.offset == 9
    publisher.on_commit([(9, UnfenceBrokerRecord(1, 1))])  # at or below the image: skipped
    assert publisher.batches == 1


def test_attach_makes_the_publisher_the_snapshot_source():
    class SnapshottingQuorum(FakeQuorum):
        source = None

        def set_snapshot_source(self, fn):
            self.source = fn

    quorum = SnapshottingQuorum()
    publisher = MetadataPublisher("c")
    publisher.attach(quorum)
    tid = uuid.uuid4()
    quorum.append(topic_records("a", tid, 2))
    rebuilt = MetadataPublisher("c")
    rebuilt.on_commit([(quorum.commit_offset, SnapshotLoaded(quorum.source()))])
    assert rebuilt.image.topics_by_id == publisher.image.topics_by_id
