"""The follower's rules without sockets: batches appended as the leader wrote them, the HW
from the leader, truncation of a divergent tail by leader epoch (KIP-101/279), the fetch state
machine's answers to errors, and producer state that a follower turned leader continues."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import BatchHeader, ControlRecordType, build_control_batch
from odradek.replication.follower import (
    DELAYED,
    FENCED,
    FETCHING,
    TRUNCATING,
    FollowerFetchState,
    truncation_offset,
)

from .support import append, batch, follower_partition, leader_partition, now_ms, open_log, read_all


def test_follower_appends_batches_as_the_leader_wrote_them(tmp_path: Path) -> None:
    leader = leader_partition(open_log(tmp_path, "l-0"), epoch=3)
    append(leader, 2)
    append(leader, 3)
    follower = follower_partition(open_log(tmp_path, "f-0"), epoch=3)
    data = read_all(leader.log)
    assert follower.append_as_follower(data) == len(data)
    assert read_all(follower.log) == data  # same offsets, epochs, CRCs
    assert follower.log.epochs.entries == [(3, 0)]
    # a resent fetch is skipped, not appended twice
    assert follower.append_as_follower(data) == 0
    assert follower.log.log_end_offset == 5


def test_follower_hw_is_the_leaders_bounded_by_its_log_end(tmp_path: Path) -> None:
    leader = leader_partition(open_log(tmp_path, "l-0"))
    append(leader, 4)
    follower = follower_partition(open_log(tmp_path, "f-0"))
    follower.append_as_follower(read_all(leader.log))
    assert follower.update_follower_hw(2) and follower.high_watermark == 2
    assert follower.update_follower_hw(9) and follower.high_watermark == 4
    assert not follower.update_follower_hw(1) and follower.high_watermark == 4


def test_follower_refuses_a_corrupt_batch(tmp_path: Path) -> None:
    leader = leader_partition(open_log(tmp_path, "l-0"))
    append(leader, 2)
    data = bytearray(read_all(leader.log))
    data[-1] ^= 0xFF
    follower = follower_partition(open_log(tmp_path, "f-0"))
    with pytest.raises(Exception):  # noqa: B017 - CorruptRecord, a KafkaError
        follower.append_as_follower(bytes(data))
    assert follower.log.log_end_offset == 0


def _diverged(tmp_path: Path) -> tuple:
    """Leader: epoch 1 at 0 (5 records), epoch 3 at 5. Follower: the same epoch 1, then a
    tail of 3 records of its own epoch 2 (it led briefly and nobody copied it)."""
    leader = leader_partition(open_log(tmp_path, "l-0"), epoch=1)
    append(leader, 5)
    follower = follower_partition(open_log(tmp_path, "f-0"), epoch=1)
    follower.append_as_follower(read_all(leader.log))
    follower.make_leader(2, 1, [1, 2, 3], [2], now_ms())
    append(follower, 3)
    follower.make_follower(1, 3, 2, [1, 2, 3], [1, 2, 3])
    leader.make_leader(3, 2, [1, 2, 3], [1, 3], now_ms())
    append(leader, 2)
    return leader, follower


def test_divergent_tail_is_truncated_by_leader_epoch(tmp_path: Path) -> None:
    leader, follower = _diverged(tmp_path)
    assert follower.log.log_end_offset == 8
    state = FollowerFetchState(follower)
    assert state.state == TRUNCATING
    current, latest = state.epoch_request()  # type: ignore[misc]
    assert (current, latest) == (3, 2)
    epoch, end = leader.log.epochs.end_offset_for(latest)
    assert (epoch, end) == (1, 5)
    state.on_epoch_response(ErrorCode.none, epoch, end, now_ms(), 100)
    assert state.state == FETCHING and follower.log.log_end_offset == 5
    assert follower.log.epochs.entries == [(1, 0)]
    follower.append_as_follower(read_all(leader.log, 5))
    assert read_all(follower.log) == read_all(leader.log)


def _log_with_epochs(tmp_path: Path, name: str, runs: list[tuple[int, int]]) -> object:
    """A log whose batches carry these (epoch, records) runs, one record per batch."""
    log = open_log(tmp_path, name)
    for epoch, n in runs:
        for _ in range(n):
            b = batch()
            log.append(b, BatchHeader.parse(b), epoch)
    return log


def test_truncation_takes_several_rounds_when_epochs_differ(tmp_path: Path) -> None:
    # follower: epoch 1 at 0, epoch 3 at 5 (LEO 8); leader: 1 at 0, 2 at 4, 4 at 6
    flog = _log_with_epochs(tmp_path, "f-0", [(1, 5), (3, 3)])
    llog = _log_with_epochs(tmp_path, "l-0", [(1, 4), (2, 2), (4, 1)])
    follower = follower_partition(flog, epoch=4)  # type: ignore[arg-type]
    state = FollowerFetchState(follower)
    rounds = 0
    while state.state == TRUNCATING:
        rounds += 1
        req = state.epoch_request()
        assert req is not None
        epoch, end = llog.epochs.end_offset_for(req[1])  # type: ignore[attr-defined]
        state.on_epoch_response(ErrorCode.none, epoch, end, now_ms(), 100)
    # round 1: the leader's epoch 2 (ends at 6) is not ours: cut where our epoch 1 ends (5);
    # round 2: epoch 1 ends at 4 in the leader's log: cut there
    assert rounds == 2 and follower.log.log_end_offset == 4
    assert follower.log.epochs.entries == [(1, 0)]


def test_truncation_offsets(tmp_path: Path) -> None:
    _, follower = _diverged(tmp_path)  # follower epochs 1@0, 2@5, LEO 8
    # an epoch older than all of ours: nothing of ours is in it
    assert truncation_offset(follower, 0, 3) == (0, True)
    # an epoch we have, ending earlier in the leader's log
    assert truncation_offset(follower, 1, 4) == (4, True)
    # the leader's end is past where ours ends: cut where ours ends
    assert truncation_offset(follower, 1, 7) == (5, True)
    # no epoch at all on the leader's side: keep what is committed
    follower.high_watermark = 2
    assert truncation_offset(follower, -1, -1) == (2, True)


def test_no_local_epoch_truncates_to_the_hw(tmp_path: Path) -> None:
    follower = follower_partition(open_log(tmp_path))
    state = FollowerFetchState(follower)
    assert state.epoch_request() is None and state.state == FETCHING


def test_fetch_errors(tmp_path: Path) -> None:
    follower = follower_partition(open_log(tmp_path))
    state = FollowerFetchState(follower)
    state.state = FETCHING
    t = now_ms()
    state.on_fetch_response(ErrorCode.not_leader_or_follower, -1, -1, None, t, 100)
    assert state.state == DELAYED and not state.ready(t + 99)
    assert state.ready(t + 100) and state.state == TRUNCATING  # then truncate again
    state.on_fetch_response(ErrorCode.fenced_leader_epoch, -1, -1, None, t, 100)
    assert state.state == FENCED and not state.ready(t + 10_000)  # waits for the image
    state.restart()
    assert state.state == TRUNCATING
    # the leader's log starts beyond ours (retention): start afresh there
    state.state = FETCHING
    state.on_fetch_response(ErrorCode.offset_out_of_range, 10, 7, None, t, 100)
    assert follower.log.log_end_offset == 7 and follower.log.log_start_offset == 7
    # the leader's log is shorter than ours: truncate by epoch again
    state.on_fetch_response(ErrorCode.offset_out_of_range, 0, 0, None, t, 100)
    assert state.state == TRUNCATING


def test_follower_turned_leader_continues_idempotent_sequences(tmp_path: Path) -> None:
    leader = leader_partition(open_log(tmp_path, "l-0"))
    pid = 42
    append(leader, 3, producer_id=pid, producer_epoch=0, base_sequence=0)
    follower = follower_partition(open_log(tmp_path, "f-0"))
    follower.append_as_follower(read_all(leader.log))
    follower.make_leader(2, 1, [1, 2, 3], [2, 3], now_ms())
    # the retry of the batch the old leader took is a duplicate, not a second copy
    dup = append(follower, 3, producer_id=pid, producer_epoch=0, base_sequence=0)
    assert dup.duplicate and dup.first_offset == 0
    info = append(follower, 1, producer_id=pid, producer_epoch=0, base_sequence=3)
    assert info.first_offset == 3 and not info.duplicate
    with pytest.raises(Exception) as exc:
        append(follower, 1, producer_id=pid, producer_epoch=0, base_sequence=9)
    assert exc.value.code == ErrorCode.out_of_order_sequence_number  # type: ignore[attr-defined]


def test_transactions_and_markers_replicate_with_their_lso(tmp_path: Path) -> None:
    leader = leader_partition(open_log(tmp_path, "l-0"))
    pid = 7
    leader.log.producer_state.mark_verified(pid, 0)
    append(leader, 2, producer_id=pid, producer_epoch=0, base_sequence=0, transactional=True)
    follower = follower_partition(open_log(tmp_path, "f-0"))
    follower.append_as_follower(read_all(leader.log))
    follower.update_follower_hw(2)
    assert follower.last_stable_offset == 0  # the transaction is open on the follower too
    marker = memoryview(build_control_batch(ControlRecordType.ABORT, pid, 0))
    leader.append(marker, BatchHeader.parse(marker), None)
    follower.append_as_follower(read_all(leader.log, 2))
    follower.update_follower_hw(3)
    assert follower.last_stable_offset == 3
    assert follower.aborted_transactions(0, 3) == leader.aborted_transactions(0, 3)
    assert follower.aborted_transactions(0, 3)


def test_follower_refuses_client_appends(tmp_path: Path) -> None:
    follower = follower_partition(open_log(tmp_path))
    b = batch()
    with pytest.raises(Exception) as exc:
        follower.append(b, BatchHeader.parse(b), None)
    assert exc.value.code == ErrorCode.not_leader_or_follower  # type: ignore[attr-defined]


def test_a_leader_change_drops_transaction_verifications(tmp_path: Path) -> None:
    """Finding 14: a verification of one leadership is not the next one's (the marker of
    that transaction may have gone to another leader meanwhile)."""
    part = leader_partition(open_log(tmp_path, "l-0"))
    pid = 7
    part.log.producer_state.mark_verified(pid, 0)
    part.make_follower(2, part.leader_epoch + 1, part.partition_epoch + 1, [1, 2, 3], [1, 2, 3])
    part.make_leader(part.leader_epoch + 1, part.partition_epoch + 1, [1, 2, 3], [1, 2, 3],
                     now_ms())
    with pytest.raises(Exception) as exc:
        append(part, 1, producer_id=pid, producer_epoch=0, base_sequence=0, transactional=True)
    assert exc.value.code == ErrorCode.invalid_txn_state  # type: ignore[attr-defined]
    part.log.producer_state.mark_verified(pid, 0)
    part.make_leader(part.leader_epoch + 1, part.partition_epoch + 1, [1, 2, 3], [1, 2, 3],
                     now_ms())  # a new epoch of the same leader
    assert not part.log.producer_state.is_verified(pid, 0)
