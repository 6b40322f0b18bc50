"""JBOD (issue 20): placement across log directories, the replica-move state machine, and
the log manager over several directories (sans-I/O beyond tmp dirs)."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pytest

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.replication.alter_log_dirs import copy_chunk
from odradek.storage.checkpoints import read_offsets
from odradek.storage.log_dir_failure import channel_for
from odradek.storage.log_manager import DuplicateLogDirs, LogManager
from odradek.storage.log_move import (
    Copy,
    IoThrottle,
    LogMove,
    MoveState,
    RestartAt,
    Swap,
    TruncateFuture,
)
from odradek.storage.log_placement import NoOnlineLogDir, choose_log_dir
from tests.unit.storage.support import append_values, read_all, small_config

A, B, C = Path("/a"), Path("/b"), Path("/c")


# ----------------------------------------------------------------- placement


def test_a_new_log_goes_to_the_directory_with_fewest_logs() -> None:
    assert choose_log_dir([A, B, C], {A: 2, B: 1, C: 3}) == B
    assert choose_log_dir([A, B, C], {}) == A  # ties: the first listed
    assert choose_log_dir([A, B, C], {A: 1, B: 1, C: 1}) == A
    assert choose_log_dir([A, B, C], {A: 1}) == B


def test_offline_directories_take_no_new_log() -> None:
    assert choose_log_dir([A, B, C], {A: 0, B: 5, C: 9}, offline={A}) == B
    with pytest.raises(NoOnlineLogDir):
        choose_log_dir([A, B], {}, offline={A, B})


def test_a_preferred_directory_wins_while_online() -> None:
    assert choose_log_dir([A, B, C], {C: 9}, preferred=C) == C
    assert choose_log_dir([A, B, C], {A: 1}, offline={C}, preferred=C) == B


# -------------------------------------------------------- the move state machine


def test_a_move_copies_until_caught_up_then_swaps() -> None:
    move = LogMove("t", 0, A, B)
    assert move.next_step(0, 100, 0, 0) == Copy(0)
    assert move.lag == 100
    assert move.next_step(0, 120, 0, 60) == Copy(60)  # appends go on meanwhile
    assert move.next_step(0, 120, 0, 120) == Swap()
    move.done()
    assert move.state is MoveState.DONE and move.lag == 0
    with pytest.raises(RuntimeError):
        move.next_step(0, 120, 0, 120)


def test_a_truncated_current_log_cuts_the_future_back() -> None:
    move = LogMove("t", 0, A, B)
    assert move.next_step(0, 90, 0, 80, truncated_to=70) == TruncateFuture(70)
    # a truncation above what the future holds changes nothing it has
    assert move.next_step(0, 90, 0, 70, truncated_to=85) == Copy(70)
    # a future ahead of the current log (a truncation not heard of) is cut back too
    assert move.next_step(0, 50, 0, 70) == TruncateFuture(50)
    # cut below the future's start: start over
    assert move.next_step(10, 20, 30, 40, truncated_to=5) == RestartAt(10)


def test_retention_past_the_copy_restarts_it_at_the_log_start() -> None:
    move = LogMove("t", 0, A, B)
    assert move.next_step(500, 900, 0, 300) == RestartAt(500)
    # restarted at the batch holding a log start inside it: copy from the log start
    move.restarted(480, 500)
    assert move.next_step(500, 900, 480, 480) == Copy(500)
    # once the future holds offsets past the start the copy goes on as usual
    assert move.next_step(500, 900, 480, 600) == Copy(600)


def test_a_failed_move_stops() -> None:
    move = LogMove("t", 0, A, B)
    move.failed("log directory /b is offline")
    assert move.state is MoveState.FAILED and "offline" in move.reason
    with pytest.raises(RuntimeError):
        move.next_step(0, 1, 0, 0)


# ------------------------------------------------ the log manager over several dirs


def _dirs(tmp_path: Path, n: int = 3) -> list[Path]:
    return [tmp_path / f"d{i}" for i in range(n)]


def test_logs_spread_over_directories_and_reload_from_each(tmp_path: Path) -> None:
    d = _dirs(tmp_path)
    lm = LogManager(d[0], small_config(), log_dirs=d[1:])
    lm.load()
    tid = uuid.uuid4()
    logs = [lm.create("t", i, tid) for i in range(6)]
    assert [lg.dir.parent for lg in logs] == [d[0], d[1], d[2], d[0], d[1], d[2]]
    for i, lg in enumerate(logs):
        append_values(lg, [b"v%d" % i] * (i + 1))
    lm.close()
    for i, directory in enumerate(d):  # each directory has its own checkpoints
        assert set(read_offsets(directory / "recovery-point-offset-checkpoint")) == {
            ("t", i), ("t", i + 3)}
    lm = LogManager(d[0], small_config(), log_dirs=d[1:])
    assert {k: lg.log_end_offset for k, lg in lm.load().items()} == {
        ("t", i): i + 1 for i in range(6)}
    assert lm.get("t", 4).dir.parent == d[1]
    lm.close()


def test_a_partition_in_two_directories_refuses_the_start(tmp_path: Path) -> None:
    d = _dirs(tmp_path, 2)
    lm = LogManager(d[0], small_config(), log_dirs=d[1:])
    lm.load()
    append_values(lm.create("t", 0, uuid.uuid4()), [b"x"])
    lm.close()
    shutil.copytree(d[0] / "t-0", d[1] / "t-0")
    with pytest.raises(DuplicateLogDirs, match="Duplicate log directories for t-0"):
        LogManager(d[0], small_config(), log_dirs=d[1:]).load()


def test_a_move_copies_while_appending_and_swaps_without_loss(tmp_path: Path) -> None:
    d = _dirs(tmp_path, 2)
    lm = LogManager(d[0], small_config(segment_bytes=600), log_dirs=d[1:])
    lm.load()
    tid = uuid.uuid4()
    current = lm.create("t", 0, tid)
    assert current.dir.parent == d[0]
    for i in range(40):
        append_values(current, [b"before-%d" % i])
    future = lm.create_future("t", 0, d[1])
    assert future.dir.name.endswith("-future") and future.dir.parent == d[1]
    move = LogMove("t", 0, d[0], d[1])
    n = 40
    while True:
        step = move.next_step(current.log_start_offset, current.log_end_offset,
                              future.log_start_offset, future.log_end_offset,
                              current.take_truncation())
        if isinstance(step, Swap):
            break
        assert isinstance(step, Copy)
        copy_chunk(current, future, step.offset)
        if n < 60:  # the partition keeps taking appends while it is copied
            append_values(current, [b"during-%d" % n])
            n += 1
    assert n == 60
    before = [(h.base_offset, v) for h, v in read_all(current)]
    new = lm.swap_future("t", 0)
    assert new.dir == d[1] / "t-0" and new.topic_id == tid
    assert [(h.base_offset, v) for h, v in read_all(new)] == before
    assert not (d[0] / "t-0").exists() and lm.futures == {}
    append_values(new, [b"after"])
    lm.close()
    lm = LogManager(d[0], small_config(segment_bytes=600), log_dirs=d[1:])
    assert lm.load()[("t", 0)].log_end_offset == 61
    lm.close()


def test_a_future_log_is_found_again_after_a_restart(tmp_path: Path) -> None:
    d = _dirs(tmp_path, 2)
    lm = LogManager(d[0], small_config(), log_dirs=d[1:])
    lm.load()
    current = lm.create("t", 0, uuid.uuid4())
    append_values(current, [b"a", b"b"])
    future = lm.create_future("t", 0, d[1])
    copy_chunk(current, future, 0)
    lm.close()
    lm = LogManager(d[0], small_config(), log_dirs=d[1:])
    lm.load()
    assert lm.get("t", 0).dir.parent == d[0]
    assert lm.futures[("t", 0)].dir.parent == d[1]
    assert lm.futures[("t", 0)].log_end_offset == 2
    # the metadata no longer has the partition: its copy goes with it
    lm.reconcile({}, set())
    assert lm.futures == {}
    lm.close()


def test_a_failed_directory_goes_offline_alone(tmp_path: Path) -> None:
    d = _dirs(tmp_path, 2)
    lm = LogManager(d[0], small_config(), log_dirs=d[1:])
    lm.load()
    tid = uuid.uuid4()
    keep, lose = lm.create("t", 0, tid), lm.create("t", 1, tid)
    assert lose.dir.parent == d[1]
    lm.checkpoint()
    append_values(keep, [b"x"])
    append_values(lose, [b"y"])
    # the disk goes away under the node: the directory's path is a file now
    os.rename(d[1], tmp_path / "gone")
    d[1].write_bytes(b"")
    lm.checkpoint()
    assert channel_for(d[1]).offline and not channel_for(d[0]).offline
    assert lm.offline_dirs() == {d[1]}
    assert read_offsets(d[0] / "recovery-point-offset-checkpoint") == {("t", 0): 1}
    with pytest.raises(KafkaError) as err:
        append_values(lose, [b"z"])
    assert err.value.code == ErrorCode.kafka_storage_error
    append_values(keep, [b"still"])  # the other directory serves on
    assert [v for _, v in read_all(keep)]
    # no log for a partition that existed before while a directory is offline (its log
    # may be on it); a partition just created goes to an online directory (Kafka's isNew)
    with pytest.raises(KafkaError) as err:
        lm.create("u", 0, uuid.uuid4(), is_new=False)
    assert err.value.code == ErrorCode.kafka_storage_error
    assert lm.create("v", 0, uuid.uuid4()).dir.parent == d[0]
    lm.close()


# ----------------------------------------------------------------- the io quota


def test_the_io_quota_paces_moves_to_its_rate() -> None:
    throttle = IoThrottle(window_s=1.0)
    unlimited = 2**63 - 1
    assert throttle.delay(0.0, 10_000_000, unlimited) == 0.0
    # 1 MB/s: 2 MB copied at once waits 2 s
    assert throttle.delay(10.0, 2_000_000, 1_000_000) == pytest.approx(2.0)
    # after the wait, the next chunk starts a new budget
    assert throttle.delay(12.0, 500_000, 1_000_000) == pytest.approx(0.5)
    # within one budget, chunks add up
    assert throttle.delay(12.2, 500_000, 1_000_000) == pytest.approx(0.8)
    # 0 holds the moves: nothing copied, look again after a window
    assert throttle.delay(20.0, 0, 0) == 1.0
