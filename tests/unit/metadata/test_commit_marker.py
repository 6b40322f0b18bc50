"""The metadata log is never cut below what was committed (no processes: files only)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from odradek.metadata.config.broker_configs import BrokerConfig
from odradek.metadata.controller import Controller, load_image
from odradek.metadata.image import MetadataImage
from odradek.metadata.log_verify import verify_data_dir
from odradek.metadata.quorum import (
    COMMIT_MARKER,
    METADATA_LOG_DIR,
    CommitMarker,
    MetadataLogDamaged,
    MetadataQuorum,
)
from odradek.metadata.records import (
    PartitionRecord,
    ProducerIdsRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from odradek.storage.verify import scan_segment


def _topic(name: str, topic_id: uuid.UUID) -> list:
    return [TopicRecord(name, topic_id),
            PartitionRecord(0, topic_id, [1], [1], leader=1, leader_epoch=0, partition_epoch=0)]


def _segment(data_dir: Path) -> Path:
    [seg] = sorted((data_dir / METADATA_LOG_DIR).glob("*.log"))
    return seg


def _controller(data_dir: Path) -> tuple[MetadataQuorum, Controller]:
    quorum = MetadataQuorum.open(data_dir, node_id=1)
    controller = Controller(quorum, load_image(quorum, "c"), BrokerConfig.from_properties({}))
    return quorum, controller


def test_marker_follows_every_commit(tmp_path: Path) -> None:
    quorum = MetadataQuorum.open(tmp_path, node_id=1)
    marker = tmp_path / METADATA_LOG_DIR / COMMIT_MARKER
    assert quorum.append(_topic("a", uuid.uuid4())) == 1
    assert CommitMarker.read(marker)[1] == 2
    assert quorum.append(_topic("b", uuid.uuid4())) == 3
    assert CommitMarker.read(marker)[1] == 4
    quorum.close()


def test_one_torn_slot_falls_back_to_the_other(tmp_path: Path) -> None:
    quorum = MetadataQuorum.open(tmp_path, node_id=1)
    quorum.append(_topic("a", uuid.uuid4()))
    quorum.append(_topic("b", uuid.uuid4()))  # sequence 2: slot 0
    quorum.close()
    marker = tmp_path / METADATA_LOG_DIR / COMMIT_MARKER
    data = bytearray(marker.read_bytes())
    data[10] ^= 0xFF  # spoil slot 0: slot 1 (one commit older) remains
    marker.write_bytes(bytes(data))
    assert CommitMarker.read(marker)[1] == 2
    data[512 + 10] ^= 0xFF  # both spoilt: what was committed is unknown
    marker.write_bytes(bytes(data))
    with pytest.raises(MetadataLogDamaged, match=COMMIT_MARKER):
        MetadataQuorum.open(tmp_path, node_id=1)


def test_flipped_byte_below_the_commit_stops_and_cuts_nothing(tmp_path: Path) -> None:
    quorum = MetadataQuorum.open(tmp_path, node_id=1)
    for name in "abcdef":
        quorum.append(_topic(name, uuid.uuid4()))
    quorum.close()
    seg = _segment(tmp_path)
    scan = scan_segment(seg, 0)
    data = bytearray(seg.read_bytes())
    data[scan.positions[2] + 65] ^= 0x10
    seg.write_bytes(bytes(data))
    before = {p.name: p.read_bytes() for p in seg.parent.iterdir()}
    with pytest.raises(MetadataLogDamaged) as exc:
        MetadataQuorum.open(tmp_path, node_id=1)
    assert {p.name: p.read_bytes() for p in seg.parent.iterdir()} == before  # untouched
    text = str(exc.value)
    assert str(seg) in text and f"byte {scan.positions[2]}" in text and "offset 4" in text
    assert "Restore" in text and "storage verify" in text
    assert seg.read_bytes() == bytes(data)
    report = verify_data_dir(tmp_path)
    assert any("fails its CRC" in d for d in report.damage)
    assert any("below the committed offset 12" in d for d in report.damage)


def test_torn_tail_past_the_commit_is_cut_and_producer_ids_stay_unique(tmp_path: Path) -> None:
    quorum, controller = _controller(tmp_path)
    handed_out = controller.allocate_producer_ids(1)
    marker = tmp_path / METADATA_LOG_DIR / COMMIT_MARKER
    committed = marker.read_bytes()
    # the next block is written but the node dies before its fsync and marker: its ids were
    # never handed out
    quorum.log.append(*_batch_of(quorum, ProducerIdsRecord(1, -1, 5000)))
    quorum.log.flush()
    quorum.close()
    marker.write_bytes(committed)
    seg = _segment(tmp_path)
    with open(seg, "r+b") as f:
        f.truncate(seg.stat().st_size - 3)  # torn
    report = verify_data_dir(tmp_path)
    assert any("is torn" in d for d in report.damage), report.damage
    assert any("past the committed offset" in n for n in report.notes), report.notes

    quorum, controller = _controller(tmp_path)
    first, size = controller.allocate_producer_ids(1)
    assert first >= handed_out[0] + handed_out[1], (handed_out, first)
    quorum.close()
    quorum, controller = _controller(tmp_path)  # and again after a clean reopen
    assert controller.allocate_producer_ids(1)[0] >= first + size
    quorum.close()


def test_cut_committed_tail_stops(tmp_path: Path) -> None:
    quorum, controller = _controller(tmp_path)
    controller.allocate_producer_ids(1)
    quorum.close()
    seg = _segment(tmp_path)
    scan = scan_segment(seg, 0)
    with open(seg, "r+b") as f:
        f.truncate(scan.positions[-1])  # the producer-id block, cut whole
    before = _kept_files(seg.parent)
    with pytest.raises(MetadataLogDamaged, match="ends at offset"):
        MetadataQuorum.open(tmp_path, node_id=1)
    assert _kept_files(seg.parent) == before


def _kept_files(directory: Path) -> dict[str, bytes]:
    """The files a refused start must leave as they were (indexes are derived: not these)."""
    return {p.name: p.read_bytes() for p in directory.iterdir()
            if p.suffix not in (".index", ".timeindex")}


def test_a_data_dir_without_a_marker_is_taken_as_committed(tmp_path: Path) -> None:
    quorum = MetadataQuorum.open(tmp_path, node_id=1)
    quorum.append(_topic("a", uuid.uuid4()))
    quorum.close()
    (tmp_path / METADATA_LOG_DIR / COMMIT_MARKER).unlink()
    quorum = MetadataQuorum.open(tmp_path, node_id=1)
    assert set(load_image(quorum, None).topics_by_name) == {"a"}
    quorum.close()
    assert CommitMarker.read(tmp_path / METADATA_LOG_DIR / COMMIT_MARKER)[1] == 2


def test_image_remembers_removed_topic_ids() -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    image = MetadataImage("c").apply(_topic("a", a) + _topic("b", b))
    image = image.apply([RemoveTopicRecord(a)])
    assert image.removed_topic_ids == {a}
    image = image.apply([RemoveTopicRecord(b)])
    assert image.removed_topic_ids == {a, b}
    assert not image.topics_by_name


def _batch_of(quorum: MetadataQuorum, record: object) -> tuple:
    from odradek.metadata.records import encode_record
    from odradek.protocol.records import BatchHeader, Record, build_batch

    batch = build_batch([Record(-1, -1, None, encode_record(record))],
                        partition_leader_epoch=quorum.leader_epoch)
    view = memoryview(batch)
    return view, BatchHeader.parse(view), quorum.leader_epoch


def test_a_failed_marker_write_takes_the_metadata_log_directory_offline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # finding 11: the marker's fdatasync EIO was raised into the raft loop (45 times) while
    # the directory stayed online; it must go offline like any log's failed fsync, which
    # stops the node (broker/log_dirs.watch_log_dirs)
    import errno
    import os

    from odradek.storage.log_dir_failure import channel_for

    data_dir = tmp_path / "data"
    (data_dir / METADATA_LOG_DIR).mkdir(parents=True)
    channel = channel_for(data_dir)
    heard: list[str] = []
    channel.add_offline_listener(lambda directory, why: heard.append(why))
    marker = CommitMarker(data_dir / METADATA_LOG_DIR / COMMIT_MARKER)
    marker.write(5, 1)
    assert not channel.offline

    def eio(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", eio)
    with pytest.raises(OSError):
        marker.write(9, 1)
    assert channel.offline
    assert heard and "metadata commit marker" in heard[0] and "Input/output error" in heard[0]
    assert marker.end_offset == 5  # not moved past what was made durable
    marker.close()
