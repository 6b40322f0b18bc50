"""A failed write never leaves a torn batch and never costs an appended record (issue 22).

The storage modules reach the disk through `os`; `FailingOs` stands in for it in one module
and fails the calls a test picks, after really writing part of the data where a real full disk
would (a partial writev, a short write). Everything else goes to the real file system.
"""

from __future__ import annotations

import errno
import logging
import os
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import BatchHeader, batch_crc_ok
from odradek.storage import checkpoints, index, segment
from odradek.storage.log import Log
from odradek.storage.log_dir_failure import (
    RESUME_AFTER_ENOSPC_BYTES,
    LogDirFailureChannel,
    channel_for,
)
from tests.unit.storage.support import (
    append_values,
    assert_indexes_valid,
    make_batch,
    open_log,
    read_all,
    small_config,
)


class FailingOs(types.SimpleNamespace):
    """`os` for one module, with some calls replaced by failing ones."""

    def __init__(self, **overrides: Callable[..., Any]) -> None:
        super().__init__(**overrides)

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)


def partial_writev(keep: int, err: int = errno.ENOSPC) -> Callable[..., int]:
    """A writev that writes its first `keep` bytes for real, then fails as a full disk does."""

    def writev(fd: int, buffers: Any) -> int:
        data = b"".join(bytes(b) for b in buffers)
        os.write(fd, data[:keep])
        raise OSError(err, os.strerror(err))

    return writev


def short_writev(keep: int) -> Callable[..., int]:
    def writev(fd: int, buffers: Any) -> int:
        data = b"".join(bytes(b) for b in buffers)
        return os.write(fd, data[:keep])

    return writev


def storage_error(exc: pytest.ExceptionInfo[KafkaError]) -> bool:
    return exc.value.code == ErrorCode.kafka_storage_error


def reopen_and_check(log: Log, expected_leo: int) -> None:
    directory = log.dir
    log.close()
    again = Log.open(directory, small_config(segment_bytes=1 << 20))
    assert again.log_end_offset == expected_leo
    batches = read_all(again)
    assert all(batch_crc_ok(data) for _, data in batches)
    assert sum(h.last_offset_delta + 1 for h, _ in batches) == expected_leo
    assert_indexes_valid(again)
    again.close()


@pytest.mark.parametrize("fault", ["partial-then-enospc", "short-write", "eio"])
def test_a_failed_append_is_cut_back_and_the_next_one_lands_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=1 << 20))
    for i in range(5):
        append_values(log, [b"v%d" % i] * 3)
    size, leo = log.active_segment.size, log.log_end_offset
    failing = {
        "partial-then-enospc": partial_writev(40),
        "short-write": short_writev(70),
        "eio": partial_writev(0, errno.EIO),
    }[fault]
    monkeypatch.setattr(segment, "os", FailingOs(writev=failing))
    with pytest.raises(KafkaError) as exc:
        append_values(log, [b"lost"] * 3)
    assert storage_error(exc)
    seg = log.active_segment
    assert (seg.size, log.log_end_offset) == (size, leo)
    assert os.path.getsize(seg.log_path) == size  # the torn bytes are gone
    monkeypatch.undo()
    info = append_values(log, [b"after"] * 2)
    assert info.first_offset == leo  # no offset skipped, none reused
    assert len(read_all(log)) == 6
    assert not log.dir_state.offline
    reopen_and_check(log, leo + 2)


def test_a_failed_index_write_takes_back_the_batch_and_the_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=1 << 20, index_interval_bytes=1))
    append_values(log, [b"a"])
    append_values(log, [b"b"])  # indexed: more than index.interval.bytes since the last entry
    seg = log.active_segment
    entries = (list(seg.offset_index.rel_offsets), list(seg.time_index.timestamps))
    files = (seg.offset_index.path.read_bytes(), seg.time_index.path.read_bytes())
    size, leo, max_ts = seg.size, log.log_end_offset, seg.max_timestamp

    def write(fd: int, data: Any) -> int:
        os.write(fd, bytes(data)[:3])  # a torn index entry, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(index, "os", FailingOs(write=write))
    with pytest.raises(KafkaError) as exc:
        append_values(log, [b"c"], timestamps=[99_999])
    assert storage_error(exc)
    monkeypatch.undo()
    assert (seg.size, log.log_end_offset, seg.max_timestamp) == (size, leo, max_ts)
    assert (list(seg.offset_index.rel_offsets), list(seg.time_index.timestamps)) == entries
    assert (seg.offset_index.path.read_bytes(), seg.time_index.path.read_bytes()) == files
    append_values(log, [b"d"])
    assert_indexes_valid(log)
    reopen_and_check(log, leo + 1)


def test_a_cut_back_that_fails_takes_the_directory_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=1 << 20))
    append_values(log, [b"kept"])
    heard: list[tuple[Path, str]] = []
    log.dir_state.add_offline_listener(lambda d, why: heard.append((d, why)))

    def ftruncate(fd: int, length: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(segment, "os", FailingOs(writev=partial_writev(30), ftruncate=ftruncate))
    with caplog.at_level(logging.ERROR), pytest.raises(KafkaError) as exc:
        append_values(log, [b"torn"])
    assert storage_error(exc)
    monkeypatch.undo()
    assert log.dir_state.offline and len(heard) == 1 and heard[0][0] == tmp_path
    assert "offline" in caplog.text
    # every later produce and fetch of the directory is refused, none lands after torn bytes
    with pytest.raises(KafkaError) as exc:
        append_values(log, [b"refused"])
    assert storage_error(exc)
    with pytest.raises(KafkaError) as exc:
        log.read(0, 1 << 20)
    assert storage_error(exc)
    # a restart recovers what is on disk: the torn tail is cut, the kept record stays
    log.close()
    again = Log.open(tmp_path / "t-0", small_config(segment_bytes=1 << 20))
    assert again.log_end_offset == 1
    again.close()


def test_a_failed_fsync_takes_the_directory_offline_and_keeps_the_recovery_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=1 << 20))
    append_values(log, [b"a"])
    log.flush()
    append_values(log, [b"b"])
    heard: list[str] = []
    log.dir_state.add_offline_listener(lambda d, why: heard.append(why))

    def fsync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(segment, "os", FailingOs(fsync=fsync))
    with pytest.raises(KafkaError) as exc:
        log.flush()
    assert storage_error(exc)
    monkeypatch.undo()
    assert log.recovery_point == 1  # the unsynced batch is not claimed durable
    assert len(heard) == 1 and "fsync" in heard[0]
    log.flush()  # offline: nothing more is claimed, nothing raised
    assert log.recovery_point == 1
    with pytest.raises(KafkaError) as exc:
        append_values(log, [b"c"])
    assert storage_error(exc)
    log.close()  # an offline log closes without writing
    again = Log.open(tmp_path / "t-0", small_config(segment_bytes=1 << 20), recovery_point=1)
    assert again.log_end_offset == 2
    again.close()


def test_the_free_space_floor_refuses_produces_but_not_reads_and_resumes(
    tmp_path: Path,
) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=1 << 20))
    internal = Log.open(tmp_path / "__consumer_offsets-0", small_config())
    append_values(log, [b"a"])
    state = log.dir_state
    assert state is channel_for(tmp_path) and internal.dir_state is state
    state.min_free_bytes = 1 << 62  # more than any disk has
    assert state.check_space() and state.refusing
    with pytest.raises(KafkaError) as exc:
        append_values(log, [b"b"])
    assert storage_error(exc)
    assert exc.value.code == ErrorCode.kafka_storage_error
    append_values(internal, [b"commit"])  # offset commits go on while space is freed
    assert len(read_all(log)) == 1  # reads go on
    assert log.delete_records_before(1) == 1  # so do deletes
    state.min_free_bytes = 0
    assert not state.check_space() and not state.refusing
    assert append_values(log, [b"c"]).first_offset == 1
    log.close()
    internal.close()


def test_the_auto_floor_is_the_smaller_of_256_mib_and_5_percent(tmp_path: Path) -> None:
    state = LogDirFailureChannel(tmp_path)
    assert state.floor_bytes(64 << 20) == int((64 << 20) * 0.05)
    assert state.floor_bytes(1 << 40) == 256 << 20
    state.min_free_bytes = 123
    assert state.floor_bytes(1 << 40) == 123


def test_the_monitor_lets_produces_through_once_space_is_back(tmp_path: Path) -> None:
    state = LogDirFailureChannel(tmp_path, min_free_bytes=1 << 62)
    state.check_interval_s = 0.01
    state.start_monitor()
    try:
        assert state.refusing
        state.min_free_bytes = 0
        # the monitor thread's next statvfs clears it; wait for that, without a time bound
        # tighter than the test run's own
        for _ in range(100_000):
            if not state.refusing:
                break
            state._stop.wait(0.01)
        assert not state.refusing
    finally:
        state.stop_monitor()


def test_after_an_enospc_produces_wait_for_a_margin_not_just_any_free_byte(
    tmp_path: Path,
) -> None:
    """With no floor (0), a write that failed for space refuses produces until a megabyte is
    free: a disk left a few KiB after the cut-back must not take one batch per check and fail
    it again."""
    state = LogDirFailureChannel(tmp_path, min_free_bytes=0)
    free = [4096]
    state.free_bytes = lambda: (free[0], 64 << 20)  # type: ignore[method-assign]
    assert not state.check_space()  # 4 KiB free and no floor: produces go on
    state._monitor = object()  # type: ignore[assignment]  # what start_monitor sets
    state.write_failed("t-0", OSError(errno.ENOSPC, "No space left on device"), torn=False)
    assert state.refusing
    assert state.check_space() and state.refusing  # 4 KiB is not enough to resume
    free[0] = RESUME_AFTER_ENOSPC_BYTES - 1
    assert state.check_space() and state.refusing
    free[0] = RESUME_AFTER_ENOSPC_BYTES
    assert not state.check_space() and not state.refusing
    free[0] = 4096  # the margin was for the failed write's recovery, not a new floor
    assert not state.check_space() and not state.refusing
    state._monitor = None


def test_repeated_write_failures_log_one_line_per_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=1 << 20))
    append_values(log, [b"a"])
    monkeypatch.setattr(segment, "os", FailingOs(writev=partial_writev(10)))
    with caplog.at_level(logging.WARNING):
        for _ in range(50):
            with pytest.raises(KafkaError):
                append_values(log, [b"x"])
    monkeypatch.undo()
    lines = [r for r in caplog.records if "cut back" in r.getMessage()]
    assert len(lines) == 1
    message = lines[0].getMessage()
    assert str(tmp_path) in message and "free" in message and not lines[0].exc_info
    assert log.log_end_offset == 1
    log.close()


def test_a_checkpoint_write_that_fails_is_retried_logged_once_and_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / checkpoints.RECOVERY_POINT_CHECKPOINT
    assert checkpoints.write_offsets(path, {("t", 0): 5})
    calls = []

    def fsync(fd: int) -> None:
        calls.append(fd)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(checkpoints, "os", FailingOs(fsync=fsync))
    with caplog.at_level(logging.WARNING):
        for _ in range(20):
            assert not checkpoints.write_offsets(path, {("t", 0): 9})
    monkeypatch.undo()
    assert len(calls) == 20 * checkpoints.WRITE_ATTEMPTS  # each write was tried again
    assert checkpoints.read_offsets(path) == {("t", 0): 5}  # the old content stands
    assert not list(tmp_path.glob("*.tmp"))
    lines = [r for r in caplog.records if "checkpoint" in r.getMessage()]
    assert len(lines) == 1 and not lines[0].exc_info
    # the next write after the disk recovers succeeds
    assert checkpoints.write_offsets(path, {("t", 0): 9})
    assert checkpoints.read_offsets(path) == {("t", 0): 9}


def test_a_follower_append_is_cut_back_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=1 << 20))
    append_values(log, [b"a"])
    batch, _ = make_batch([b"b"])
    raw = bytearray(batch)
    raw[0:8] = (1).to_bytes(8, "big")
    view = memoryview(bytes(raw))

    monkeypatch.setattr(segment, "os", FailingOs(writev=partial_writev(20)))
    with pytest.raises(KafkaError) as exc:
        log.append_many([(view, BatchHeader.parse(view))], assign_offsets=False)
    assert storage_error(exc)
    monkeypatch.undo()
    assert log.log_end_offset == 1
    log.append_many([(view, BatchHeader.parse(view))], assign_offsets=False)
    reopen_and_check(log, 2)


def test_a_failed_index_fsync_is_not_retried_by_path_but_takes_the_directory_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Linux reports a lost writeback once: a second fsync by path would succeed over lost pages
    log = open_log(tmp_path, small_config(segment_bytes=1 << 20, index_interval_bytes=1))
    for v in (b"a", b"b", b"c"):
        append_values(log, [v])
    calls = []

    def fsync(fd: int) -> None:
        calls.append(fd)
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(index, "os", FailingOs(fsync=fsync))
    with pytest.raises(KafkaError) as exc:
        log.flush()
    monkeypatch.undo()
    assert storage_error(exc)
    assert len(calls) == 1 and log.dir_state.offline
    assert log.recovery_point == 0
    log.close()


def test_failed_producer_snapshots_log_one_line_without_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=1 << 20))
    batch, header = make_batch([b"a"])
    log.append(batch, header, 0)
    state = log.producer_state
    state._had_snapshots = True  # as a log with producers that has snapshotted before

    def fsync(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(checkpoints, "os", FailingOs(fsync=fsync))
    with caplog.at_level(logging.WARNING):
        for offset in range(100, 130):
            assert state.take_snapshot(offset) is None
    monkeypatch.undo()
    lines = [r for r in caplog.records if "snapshot" in r.getMessage()]
    assert len(lines) == 1 and not lines[0].exc_info
    assert not list(tmp_path.glob("t-0/*.tmp"))
    log.close()


def test_retention_frees_space_even_when_the_roll_it_needs_cannot_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=300, retention_ms=1000))
    for i in range(12):
        append_values(log, [b"%d" % i * 20], timestamps=[1_000 + i])
    assert len(log.segments) > 2
    leo, active = log.log_end_offset, log.active_segment

    def write(fd: int, data: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(index, "os", FailingOs(write=write))
    deleted = log.delete_retention_breached(now_ms=10**12)  # everything has expired
    monkeypatch.undo()
    assert deleted > 0 and log.segments == [active]  # all but the active segment went
    assert log.log_start_offset == active.base_offset and log.log_end_offset == leo
    append_values(log, [b"after"])
    assert_indexes_valid(log)
    log.close()
