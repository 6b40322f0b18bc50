from __future__ import annotations

import os
import uuid

from odradek.metadata.controller import load_image
from odradek.metadata.image import MetadataDelta, MetadataImage
from odradek.metadata.quorum import COMMIT_MARKER, METADATA_LOG_DIR, MetadataQuorum
from odradek.metadata.records import (
    RESOURCE_TOPIC,
    ConfigRecord,
    FeatureLevelRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)


def _topic_records(name, topic_id, partitions=2):
    return [TopicRecord(name, topic_id)] + [
        PartitionRecord(p, topic_id, [1], [1], leader=1, leader_epoch=0, partition_epoch=0)
        for p in range(partitions)
    ]


def test_append_returns_offsets_and_replay_survives_reopen(tmp_path):
    quorum = MetadataQuorum.open(tmp_path, node_id=1)
    first_epoch = quorum.leader_epoch
    a, b = uuid.uuid4(), uuid.uuid4()
    assert quorum.append(_topic_records("a", a)) == 2
    assert quorum.append([ConfigRecord(RESOURCE_TOPIC, "a", "retention.ms", "1000")]) == 3
    assert quorum.append(_topic_records("b", b, 1)) == 5
    assert quorum.append([PartitionChangeRecord(0, a, leader=-1)]) == 6
    assert quorum.append([RemoveTopicRecord(b), FeatureLevelRecord("metadata.version", 21)]) == 8
    assert quorum.commit_offset == 8
    quorum.close()
    assert (tmp_path / METADATA_LOG_DIR).is_dir()

    quorum = MetadataQuorum.open(tmp_path, node_id=1)
    assert quorum.leader_epoch > first_epoch
    image = load_image(quorum, "cluster")
    assert image.offset == 8
    assert image.cluster_id == "cluster"
    assert set(image.topics_by_name) == {"a"}
    assert set(image.topics_by_id) == {a}
    p0 = image.partition("a", 0)
    assert (p0.leader, p0.leader_epoch, p0.partition_epoch, p0.isr) == (-1, 1, 1, (1,))
    assert image.partition("a", 1).leader == 1
    assert image.topic_configs("a") == {"retention.ms": "1000"}
    assert image.features == {"metadata.version": 21}
    # appends continue after the replayed records
    assert quorum.append([ConfigRecord(RESOURCE_TOPIC, "a", "retention.ms", None)]) == 9
    quorum.close()


def test_torn_tail_is_dropped_whole(tmp_path):
    quorum = MetadataQuorum.open(tmp_path, node_id=1)
    quorum.append(_topic_records("a", uuid.uuid4()))
    marker = tmp_path / METADATA_LOG_DIR / COMMIT_MARKER
    committed = marker.read_bytes()
    quorum.append(_topic_records("b", uuid.uuid4()))
    quorum.close()
    # the second batch was never committed: the crash came before its fsync and marker
    marker.write_bytes(committed)
    log_file = next((tmp_path / METADATA_LOG_DIR).glob("*.log"))
    size = log_file.stat().st_size
    with open(log_file, "r+b") as fh:
        fh.truncate(size - 5)  # a crash in the middle of the second batch
        os.fsync(fh.fileno())
    quorum = MetadataQuorum.open(tmp_path, node_id=1)
    image = load_image(quorum, None)
    assert set(image.topics_by_name) == {"a"}  # nothing half-applied
    quorum.close()


def test_delta_reports_changes():
    t = uuid.uuid4()
    image = MetadataImage("c").apply(_topic_records("t", t, 1))
    delta = MetadataDelta(image)
    delta.replay(PartitionRecord(1, t, [1], [1], leader=1, leader_epoch=0, partition_epoch=0))
    delta.replay(PartitionChangeRecord(0, t, isr=[1], leader=1))
    delta.replay(ConfigRecord(RESOURCE_TOPIC, "t", "segment.bytes", "1000"))
    new = delta.apply()
    assert delta.created_partitions == {("t", 1)}
    assert delta.changed_partitions == {("t", 0)}
    assert delta.changed_configs == {(RESOURCE_TOPIC, "t")}
    assert not delta.created_topics
    assert new.partition("t", 0).leader_epoch == 1
    # the old image is untouched
    assert image.partition("t", 1) is None
    assert image.topic_configs("t") == {}

    delta = MetadataDelta(new)
    delta.replay(RemoveTopicRecord(t))
    after = delta.apply()
    assert set(delta.deleted_topics) == {"t"}
    assert delta.deleted_topics["t"].topic_id == t
    assert after.topics_by_name == {}
    assert after.topic_configs("t") == {}
