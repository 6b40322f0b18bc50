"""FileRaftLog and KRaftQuorum on files, no sockets: Kafka's format on disk, what a follower
copies, epochs, truncation, snapshots, issue 22's rules, and old data directories."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from odradek.metadata.quorum import (
    COMMIT_MARKER,
    METADATA_LOG_DIR,
    CommitMarker,
    MetadataLogDamaged,
    MetadataQuorum,
    SnapshotLoaded,
)
from odradek.metadata.raft.control import decode_leader_change
from odradek.metadata.raft.file_log import FileRaftLog
from odradek.metadata.raft.kraft import KRaftQuorum
from odradek.metadata.raft.log import MemoryRaftLog, SnapshotId
from odradek.metadata.records import ProducerIdsRecord, TopicRecord, decode_record
from odradek.metadata.snapshot import SnapshotDamaged, SnapshotStore, decode_snapshot
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import (
    ControlRecordType,
    decode_control_record,
    decode_records,
    iter_batches,
)


def _open(path: Path) -> FileRaftLog:
    return FileRaftLog.open(path)


def _topic(name: str) -> list[TopicRecord]:
    return [TopicRecord(name, uuid.uuid4())]


def test_batches_are_kafkas_and_a_follower_copies_them_byte_for_byte(tmp_path: Path) -> None:
    leader, follower = _open(tmp_path / "a"), _open(tmp_path / "b")
    assert leader.append_as_leader(1, [b"lc"], control=True) == 0
    assert leader.append_as_leader(1, [b"x", b"y"]) == 2
    assert leader.append_as_leader(3, [b"z"]) == 3
    data = leader.read(0)
    headers = [h for h, _ in iter_batches(data)]
    # one batch per proposal; the raft epoch is each batch's partition leader epoch
    assert [(h.base_offset, h.last_offset, h.partition_leader_epoch, h.is_control)
            for h in headers] == [(0, 0, 1, True), (1, 2, 1, False), (3, 3, 3, False)]
    assert follower.append_as_follower(data[: len(data) - 5]) == 3  # a cut last batch waits
    assert follower.append_as_follower(leader.read(3)) == 1
    assert follower.read(0) == data
    assert follower.append_as_follower(leader.read(1)) == 0  # not at our end: ignored
    spoilt = bytearray(leader.read(3))
    spoilt[-1] ^= 1
    other = _open(tmp_path / "c")
    other.append_as_follower(leader.read(0)[: len(data) - len(spoilt)])
    assert other.append_as_follower(bytes(spoilt)) == 0  # fails its CRC: not appended
    assert (follower.last_epoch(), follower.end_offset()) == (3, 4)
    for log in (leader, follower, other):
        log.close()


def test_epoch_lookups_match_the_memory_log(tmp_path: Path) -> None:
    disk, mem = _open(tmp_path), MemoryRaftLog()
    for epoch, n in ((1, 2), (1, 1), (2, 3), (5, 1)):
        for log in (disk, mem):
            log.append_as_leader(epoch, [b"p"] * n)
    for epoch in range(7):
        assert disk.end_offset_for_epoch(epoch) == mem.end_offset_for_epoch(epoch), epoch
    for offset in range(disk.end_offset()):
        assert disk.epoch_at(offset) == mem.epoch_at(offset)
    # raft truncates at batch (epoch) boundaries: a batch is never split
    disk.truncate_to(3)
    mem.truncate_to(3)
    assert disk.end_offset_for_epoch(5) == mem.end_offset_for_epoch(5) == (1, 3)
    assert disk.last_epoch() == mem.last_epoch() == 1
    disk.close()


def test_leader_change_is_kafkas_control_record(tmp_path: Path) -> None:
    q = KRaftQuorum.open(tmp_path, 1)
    data = q.raft_log.read(0)
    [(header, batch)] = list(iter_batches(data))
    [rec] = decode_records(header, batch)
    assert header.is_control and decode_control_record(rec).type == ControlRecordType.LEADER_CHANGE
    assert decode_leader_change(rec.value) == (1, [1], [1])
    q.close()


def test_snapshot_download_in_chunks_installs_and_restarts_the_log(tmp_path: Path) -> None:
    leader = _open(tmp_path / "a")
    for _ in range(5):
        leader.append_as_leader(2, [b"r"])
    sid = SnapshotId(5, 2)
    records = [TopicRecord(f"t{i}", uuid.uuid4()) for i in range(3000)]
    leader.snapshots.write(sid, records)
    leader.snapshot_taken(sid)
    assert leader.start_offset() == 5 and leader.latest_snapshot() == sid
    follower = _open(tmp_path / "b")
    follower.append_as_leader(1, [b"old", b"old"])  # another history: thrown away
    position, done = 0, False
    while not done:
        chunk, size = leader.read_snapshot(sid, position, 4096)  # type: ignore[misc]
        done = follower.write_snapshot_chunk(sid, position, chunk, size)
        position += len(chunk)
    assert (follower.start_offset(), follower.end_offset(), follower.last_epoch()) == (5, 5, 2)
    assert follower.end_offset_for_epoch(2) == (2, 5)
    assert follower.snapshots.load(sid) == records
    follower.close()
    reopened = _open(tmp_path / "b")
    assert (reopened.start_offset(), reopened.end_offset(), reopened.latest_snapshot()) == (5, 5, sid)
    reopened.close()
    leader.close()


def test_a_damaged_snapshot_is_refused(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path)
    sid = SnapshotId(10, 1)
    store.write(sid, _topic("a"))
    data = bytearray(store.path(sid).read_bytes())
    data[80] ^= 0x20
    with pytest.raises(SnapshotDamaged):
        decode_snapshot(bytes(data))
    whole = store.path(sid).read_bytes()
    with pytest.raises(SnapshotDamaged, match="truncated"):
        decode_snapshot(whole[:-40])
    last = list(iter_batches(whole))[-1][1]
    with pytest.raises(SnapshotDamaged, match="footer"):
        decode_snapshot(whole[: len(whole) - len(last)])
    other = SnapshotStore(tmp_path / "x")
    (tmp_path / "x").mkdir()
    with pytest.raises(SnapshotDamaged):
        other.write_chunk(sid, 0, bytes(data), len(data))
    assert other.latest() is None and not list((tmp_path / "x").iterdir())


def test_quorum_marker_follows_the_high_watermark_and_listeners_hear_each_batch(
        tmp_path: Path) -> None:
    q = KRaftQuorum.open(tmp_path, 1)
    heard: list[list[tuple[int, object]]] = []
    q.add_commit_listener(heard.append)
    assert q.append(_topic("a")) == 1
    assert q.append(_topic("b") + _topic("c")) == 3
    marker = CommitMarker.read(tmp_path / METADATA_LOG_DIR / COMMIT_MARKER)
    assert marker is not None and marker[1] == 4 == q.high_watermark
    assert [[o for o, _ in b] for b in heard] == [[1], [2, 3]]
    assert q.is_leader and q.describe().voters[0].log_end_offset == 4
    late: list[list[tuple[int, object]]] = []
    q.add_commit_listener(late.append)  # a late listener hears the history first
    assert [[o for o, _ in b] for b in late] == [[1], [2, 3]]
    q.close()


def test_start_from_a_snapshot_scans_and_replays_only_what_follows(tmp_path: Path) -> None:
    q = KRaftQuorum.open(tmp_path, 1)
    for i in range(50):
        q.append(_topic(f"t{i}"))
    sid = SnapshotId(q.high_watermark, q.leader_epoch)
    q.raft_log.snapshots.write(sid, [TopicRecord(f"t{i}", uuid.uuid4()) for i in range(50)])
    q.raft_log.snapshot_taken(sid)
    q.close()
    q = KRaftQuorum.open(tmp_path, 1)
    # recovery CRC-checked nothing below the snapshot but the batch that ends there
    [seg] = sorted((tmp_path / METADATA_LOG_DIR).glob("*.log"))
    assert q.raft_log.log.bytes_checked_at_open < 200 < seg.stat().st_size // 10
    assert q.raft_log.start_offset() == sid.end_offset
    q.append(_topic("after"))
    seen: list[tuple[int, object]] = []
    q.replay(lambda offset, record: seen.append((offset, record)))
    assert [o for o, _ in seen[:50]] == [sid.end_offset - 1] * 50
    assert [r.name for _, r in seen] == [f"t{i}" for i in range(50)] + ["after"]  # type: ignore[attr-defined]
    heard: list[list[tuple[int, object]]] = []
    q.add_commit_listener(heard.append)
    first = heard[0][0][1]
    assert isinstance(first, SnapshotLoaded) and first.end_offset == sid.end_offset
    assert len(first.records) == 50
    assert [r.name for _, r in heard[-1]] == ["after"]  # type: ignore[attr-defined]
    q.close()


def test_a_data_dir_of_the_single_voter_metadata_quorum_loads(tmp_path: Path) -> None:
    old = MetadataQuorum.open(tmp_path, node_id=1)
    for name in "abc":
        old.append(_topic(name))
    old.append([ProducerIdsRecord(1, 0, 1000)])
    old_epoch, old_end = old.leader_epoch, old.end_offset
    old.close()
    q = KRaftQuorum.open(tmp_path, 1)
    assert q.leader_epoch > old_epoch and q.is_leader
    seen: list[object] = []
    q.replay(lambda offset, record: seen.append(record))
    assert [getattr(r, "name", None) for r in seen] == ["a", "b", "c", None]
    assert q.append(_topic("d")) > old_end  # after the new epoch's LeaderChange
    q.close()


def test_flipped_byte_below_the_marker_stops_and_a_torn_tail_is_cut(tmp_path: Path) -> None:
    q = KRaftQuorum.open(tmp_path, 1)
    for name in "abcdef":
        q.append(_topic(name))
    end = q.end_offset
    q.close()
    [seg] = sorted((tmp_path / METADATA_LOG_DIR).glob("*.log"))
    good = seg.read_bytes()
    with open(seg, "ab") as f:  # a torn write nobody flushed or committed
        f.write(good[-30:])
    q = KRaftQuorum.open(tmp_path, 1)
    assert q.raft_log.end_offset() >= end  # the torn bytes cut, a new epoch begun
    names = []
    q.replay(lambda offset, record: names.append(record.name))  # type: ignore[attr-defined]
    assert names == list("abcdef")
    q.close()
    data = bytearray(seg.read_bytes())
    data[200] ^= 0x04
    seg.write_bytes(bytes(data))
    with pytest.raises(MetadataLogDamaged, match="quorum-commit"):
        KRaftQuorum.open(tmp_path, 1)


def test_a_follower_cannot_append_and_records_decode(tmp_path: Path) -> None:
    q = KRaftQuorum.open(tmp_path, 2, {1: ("127.0.0.1", 1), 2: ("127.0.0.1", 2)})
    assert not q.is_leader and q.leader_id is None
    with pytest.raises(KafkaError) as err:
        q.append(_topic("x"))
    assert err.value.code == ErrorCode.not_controller
    q.close()
    single = KRaftQuorum.open(tmp_path / "s", 1)
    single.append(_topic("y"))
    for header, batch in iter_batches(single.raft_log.read(0)):
        if not header.is_control:
            [rec] = decode_records(header, batch)
            assert decode_record(rec.value).name == "y"  # type: ignore[arg-type, attr-defined]
    single.close()


def test_a_started_single_voter_snapshots_by_size_and_restarts_from_it(tmp_path: Path) -> None:
    import asyncio

    from odradek.metadata.snapshot_image import ImageFollower

    async def run(names: list[str]) -> tuple[KRaftQuorum, ImageFollower]:
        q = await asyncio.to_thread(KRaftQuorum.open, tmp_path, 1, None, cluster_id="c",
                                    snapshot_bytes=2000)
        await q.start()
        follower = ImageFollower("c")
        q.add_commit_listener(follower)
        q.set_snapshot_source(follower.snapshot_records)
        assert q.is_leader  # the listener heard the history as it was added
        for name in names:
            await asyncio.to_thread(q.append, _topic(name))
        for _ in range(200):  # the snapshot is written in a thread
            if q.raft_log.latest_snapshot() is not None or not names:
                break
            await asyncio.sleep(0.02)
        await q.stop()
        q.close()
        return q, follower

    first, follower = asyncio.run(run([f"t{i}" for i in range(40)]))
    snap = first.raft_log.latest_snapshot()
    assert snap is not None and snap.end_offset > 0
    again, follower2 = asyncio.run(run([]))
    assert again.raft_log.start_offset() == snap.end_offset
    assert sorted(follower2.image.topics_by_name) == sorted(follower.image.topics_by_name)


def test_a_failed_quorum_task_fails_its_waiting_appends_and_still_stops(
        tmp_path: Path) -> None:
    # finding 11: the raft task died on the commit marker's EIO while a controller call in a
    # worker thread waited for its append's commit (holding the controller's lock); it waited
    # forever, every other controller call queued behind it, the executor filled, and the
    # node's shutdown (a checkpoint in a worker thread) never ran. stop() then re-raised the
    # task's error before failing the waiters.
    import asyncio
    import errno

    async def run() -> None:
        q = await asyncio.to_thread(KRaftQuorum.open, tmp_path, 1, None, cluster_id="c")
        await q.start()
        assert q.is_leader
        waiting: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        q._waiters.append((10**9, q.client.epoch, waiting))  # an append not yet committed

        def broken(now: int) -> None:
            raise OSError(errno.EIO, "Input/output error")

        q.client.poll = broken  # type: ignore[method-assign,assignment]
        assert q._wake is not None
        q._wake.set()
        with pytest.raises(KafkaError) as err:
            await asyncio.wait_for(waiting, 60)
        assert err.value.code == ErrorCode.not_controller
        assert "the metadata quorum failed" in str(err.value)
        await q.stop()  # the task's error is logged, not raised: the stop finishes
        q.close()

    asyncio.run(run())
