"""A snapshot's records rebuild the image they were taken from, field for field."""

from __future__ import annotations

import dataclasses
import uuid

from odradek.metadata.image import MetadataImage, image_to_records
from odradek.metadata.raft.log import SnapshotId
from odradek.metadata.records import (
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    BrokerEndpoint,
    ConfigRecord,
    FeatureLevelRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from odradek.metadata.snapshot import decode_snapshot, encode_snapshot


def _image() -> MetadataImage:
    a, b, gone = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    records = [
        FeatureLevelRecord("metadata.version", 21),
        RegisterBrokerRecord(broker_id=1, incarnation_id=uuid.uuid4(), broker_epoch=5,
                             end_points=[BrokerEndpoint("PLAINTEXT", "h1", 9092, 0)],
                             rack="r1", fenced=True),
        RegisterBrokerRecord(broker_id=2, incarnation_id=uuid.uuid4(), broker_epoch=9,
                             end_points=[BrokerEndpoint("PLAINTEXT", "h2", 9092, 0)]),
        UnfenceBrokerRecord(1, 5),
        TopicRecord("a", a),
        PartitionRecord(0, a, [1, 2], [1, 2], leader=1, leader_epoch=0, partition_epoch=0),
        PartitionRecord(1, a, [2, 1], [2], leader=2, leader_epoch=3, partition_epoch=4,
                        adding_replicas=[1]),
        PartitionChangeRecord(partition_id=0, topic_id=a, isr=[1], leader=-2),
        TopicRecord("gone", gone),
        PartitionRecord(0, gone, [1], [1], leader=1, leader_epoch=0, partition_epoch=0),
        ConfigRecord(RESOURCE_TOPIC, "gone", "retention.ms", "1"),
        RemoveTopicRecord(gone),
        TopicRecord("b", b),
        PartitionRecord(0, b, [2], [2], leader=2, leader_epoch=0, partition_epoch=0),
        ConfigRecord(RESOURCE_TOPIC, "b", "cleanup.policy", "compact"),
        ConfigRecord(RESOURCE_BROKER, "", "log.retention.ms", "1000"),
        ProducerIdsRecord(1, 5, 3000),
    ]
    return MetadataImage(cluster_id="c").apply(records, offset=41)


def test_image_records_rebuild_every_field() -> None:
    image = _image()
    records = image_to_records(image)
    # through a snapshot file's encoding too
    records = decode_snapshot(encode_snapshot(SnapshotId(42, 3), records))
    rebuilt = MetadataImage(cluster_id="c").apply(records, offset=41)
    for f in dataclasses.fields(MetadataImage):
        assert getattr(rebuilt, f.name) == getattr(image, f.name), f.name
    assert image.removed_topic_ids and image.brokers[1].fenced is False
