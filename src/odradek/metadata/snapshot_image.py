"""A metadata image as the records that rebuild it: what a snapshot (KIP-630) holds.

`image_records(image)` replays, on an empty image, into an image equal to `image` (its offset
aside): features, brokers, the ids of removed topics (so a log left on disk by an unfinished
deletion is still recognised as one, not kept as a stray), topics with their partitions,
configs, and the producer-id counter. Give the quorum a source of these for the image its
commit listeners built: `quorum.set_snapshot_source(lambda: image_records(publisher.image))`.
When the image gains state, this gains the records for it (tests/unit/metadata/
test_kraft_snapshot_image.py replays every field back).
"""

from __future__ import annotations

from typing import Any

from odradek.metadata.image import MetadataImage
from odradek.metadata.quorum import SnapshotLoaded
from odradek.metadata.records import (
    ConfigRecord,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)

__all__ = ["ImageFollower", "image_records"]


def image_records(image: MetadataImage) -> list[MetadataRecord]:
    out: list[MetadataRecord] = [FeatureLevelRecord(name, level)
                                 for name, level in sorted(image.features.items())]
    for b in sorted(image.brokers.values(), key=lambda b: b.broker_id):
        out.append(RegisterBrokerRecord(
            broker_id=b.broker_id, incarnation_id=b.incarnation_id, broker_epoch=b.epoch,
            end_points=list(b.endpoints), rack=b.rack, fenced=b.fenced,
            in_controlled_shutdown=b.in_controlled_shutdown))
    live = set(image.topics_by_id)
    for topic_id in sorted(image.removed_topic_ids - live):
        # the name is gone with the topic; only the id matters (and must not clash)
        out += [TopicRecord(f"__removed-{topic_id}", topic_id), RemoveTopicRecord(topic_id)]
    for name, topic in sorted(image.topics_by_name.items()):
        out.append(TopicRecord(name, topic.topic_id))
        for index, p in sorted(topic.partitions.items()):
            out.append(PartitionRecord(
                partition_id=index, topic_id=topic.topic_id, replicas=list(p.replicas),
                isr=list(p.isr), removing_replicas=list(p.removing_replicas),
                adding_replicas=list(p.adding_replicas), leader=p.leader,
                leader_epoch=p.leader_epoch, partition_epoch=p.partition_epoch))
    for (resource_type, resource_name), values in sorted(image.configs.items()):
        for key, value in sorted(values.items()):
            out.append(ConfigRecord(resource_type, resource_name, key, value))
    if image.next_producer_id:
        out.append(ProducerIdsRecord(-1, -1, image.next_producer_id))
    return out


class ImageFollower:
    """A commit listener that keeps the committed image, and the quorum's snapshot source.

    For a node without a metadata publisher: `quorum.add_commit_listener(follower)` then
    `quorum.set_snapshot_source(follower.snapshot_records)`. A publisher that keeps the image
    anyway is the better source (one replay, not two)."""

    def __init__(self, cluster_id: str | None) -> None:
        self.cluster_id = cluster_id
        self.image = MetadataImage(cluster_id=cluster_id)

    def __call__(self, batch: list[tuple[int, Any]]) -> None:
        records = []
        for offset, item in batch:
            if isinstance(item, SnapshotLoaded):
                self.image = MetadataImage(cluster_id=self.cluster_id).apply(item.records, offset)
            else:
                records.append(item)
        if records:
            self.image = self.image.apply(records, batch[-1][0])

    def snapshot_records(self) -> list[MetadataRecord]:
        return image_records(self.image)
