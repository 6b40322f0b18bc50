from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path

import pytest

from odradek.protocol.records import decode_records
from odradek.storage.checkpoints import read_offsets
from odradek.storage.log import Log
from odradek.storage.log_manager import LogManager
from tests.unit.storage.support import append_values, read_all, small_config


def test_create_checkpoint_reload(tmp_path: Path) -> None:
    cfg = small_config(segment_bytes=500)
    lm = LogManager(tmp_path, cfg)
    assert lm.load() == {}
    tid = uuid.uuid4()
    a0 = lm.create("a", 0, tid)
    a1 = lm.create("a", 1, tid)
    assert lm.create("a", 0, tid) is a0
    for i in range(30):
        append_values(a0, [b"x%d" % i])
    append_values(a1, [b"y"])
    a0.delete_records_before(5)
    lm.close()
    assert read_offsets(tmp_path / "recovery-point-offset-checkpoint") == {
        ("a", 0): 30,
        ("a", 1): 1,
    }
    assert read_offsets(tmp_path / "log-start-offset-checkpoint") == {("a", 0): 5, ("a", 1): 0}

    lm = LogManager(tmp_path, cfg)
    logs = lm.load()
    assert set(logs) == {("a", 0), ("a", 1)}
    a0 = lm.get("a", 0)
    assert (a0.log_start_offset, a0.log_end_offset, a0.recovery_point, a0.topic_id) == (
        5,
        30,
        30,
        tid,
    )
    assert [h.base_offset for h, _ in read_all(a0)] == list(range(5, 30))
    lm.close()


def test_unflushed_logs_recover_from_their_checkpointed_point(tmp_path: Path) -> None:
    lm = LogManager(tmp_path, small_config())
    log = lm.create("t", 0)
    append_values(log, [b"a"])
    lm.checkpoint()
    append_values(log, [b"b"])
    # "crash": no close, no checkpoint; the OS still has the bytes
    lm2 = LogManager(tmp_path, small_config())
    again = lm2.load()[("t", 0)]
    assert again.log_end_offset == 2
    lm2.close()


def test_delete_and_leftovers(tmp_path: Path) -> None:
    lm = LogManager(tmp_path, small_config())
    lm.create("gone", 0)
    lm.create("kept", 0)
    lm.delete("gone", 0)
    assert not (tmp_path / "gone-0").exists()
    assert lm.get("gone", 0) is None
    lm.close()
    (tmp_path / "old-0.0123abcd-delete").mkdir()
    (tmp_path / "old-0.0123abcd-delete" / "00000000000000000000.log").write_bytes(b"x")
    meta = Log.open(tmp_path / "__cluster_metadata-0", small_config())
    meta.close()
    lm = LogManager(tmp_path, small_config())
    assert set(lm.load()) == {("kept", 0)}
    assert not (tmp_path / "old-0.0123abcd-delete").exists()
    assert (tmp_path / "__cluster_metadata-0").exists()


def test_a_region_handed_out_stays_readable_after_its_log_is_deleted(tmp_path: Path) -> None:
    lm = LogManager(tmp_path, small_config())
    log = lm.create("t", 0)
    append_values(log, [b"payload"])
    region = log.read(0, 1 << 20).region
    expected = log.read_bytes(region)
    lm.delete("t", 0)
    assert not (tmp_path / "t-0").exists()
    assert os.pread(region.fd, region.size, region.position) == expected
    lm.close()  # the region pins its fd (storage/file_pool.py): still open while held
    assert os.pread(region.fd, region.size, region.position) == expected
    fd = int(region.fd)
    del region  # the last pin goes: the file is closed
    with pytest.raises(OSError):
        os.fstat(fd)


def test_flush_dirty_logs_honours_flush_ms(tmp_path: Path) -> None:
    lm = LogManager(tmp_path, small_config(flush_ms=1000))
    log = lm.create("t", 0)
    append_values(log, [b"a"])
    now = log.last_flush_ms
    lm.flush_dirty_logs(now + 10)
    assert log.recovery_point == 0
    lm.flush_dirty_logs(now + 1000)
    assert log.recovery_point == 1
    lm.close()


def test_cleanup_applies_retention_ms(tmp_path: Path) -> None:
    lm = LogManager(tmp_path, small_config(segment_bytes=300, retention_ms=1000))
    log = lm.create("t", 0)
    for i in range(20):
        append_values(log, [b"v%d" % i], [10_000 + i * 100])
    n = len(log.segments)
    # at 12_000 a segment whose newest record is older than 11_000 is due
    deleted = lm.cleanup(now_ms=12_000)
    assert deleted > 0 and len(log.segments) == n - deleted
    assert all(s.max_timestamp >= 11_000 for s in log.segments[:-1])
    assert log.log_start_offset == log.segments[0].base_offset
    lm.close()


def test_reconcile_renames_strays_and_finishes_deletions(tmp_path: Path, caplog) -> None:
    known_id, other_id, removed_id, alien_id = (uuid.uuid4() for _ in range(4))
    lm = LogManager(tmp_path, small_config())
    append_values(lm.create("known", 0, known_id), [b"k"])
    append_values(lm.create("renamed", 0, other_id), [b"old data"])  # name reused by a new id
    append_values(lm.create("removed", 0, removed_id), [b"r"])
    append_values(lm.create("alien", 0, alien_id), [b"a1", b"a2"])
    lm.create("noid", 0)
    lm.close()

    lm = LogManager(tmp_path, small_config())
    lm.load()
    with caplog.at_level(logging.INFO, logger="odradek.storage.log_manager"):
        deleted, strays = lm.reconcile(
            {("known", 0): known_id, ("renamed", 0): uuid.uuid4()}, {removed_id})
    assert deleted == [("removed", 0)]
    assert set(lm.logs) == {("known", 0)}
    assert not (tmp_path / "removed-0").exists()
    assert sorted(p.name.split(".")[0] for p in strays) == ["alien-0", "noid-0", "renamed-0"]
    for stray in strays:
        assert stray.name.endswith("-stray") and stray.is_dir()
        assert not (tmp_path / stray.name.split(".")[0]).exists()
    messages = [r.getMessage() for r in caplog.records]
    assert sum("renamed to" in m for m in messages) == 3
    assert sum("finishing the deletion" in m for m in messages) == 1

    # a new topic of a stray's name gets a fresh directory; the stray keeps its data
    fresh = lm.create("alien", 0, uuid.uuid4())
    assert fresh.log_end_offset == 0
    alien = next(p for p in strays if p.name.startswith("alien-0."))
    old = Log.open(alien, small_config())
    assert [r.value for h, raw in read_all(old) for r in decode_records(h, raw)] == [b"a1", b"a2"]
    old.close()
    lm.close()

    # a restart reports the stray once and never loads or removes it
    caplog.clear()
    lm = LogManager(tmp_path, small_config())
    with caplog.at_level(logging.INFO, logger="odradek.storage.log_manager"):
        assert set(lm.load()) == {("known", 0), ("alien", 0)}
    assert sum("stray log kept" in r.getMessage() for r in caplog.records) == 3
    assert alien.is_dir()
    lm.close()


def test_an_unreadable_checkpoint_is_reported_and_recovered_from_zero(tmp_path: Path,
                                                                       caplog) -> None:
    lm = LogManager(tmp_path, small_config())
    append_values(lm.create("t", 0), [b"a", b"b"])
    lm.close()
    (tmp_path / "recovery-point-offset-checkpoint").write_bytes(b"0\n7\nt 0 2\n")
    lm = LogManager(tmp_path, small_config())
    with caplog.at_level(logging.INFO):
        assert lm.load()[("t", 0)].log_end_offset == 2
    lines = [r.getMessage() for r in caplog.records if "recovery-point-offset-checkpoint" in
             r.getMessage()]
    assert len(lines) == 1 and "recovered from offset 0" in lines[0], lines
    lm.close()
