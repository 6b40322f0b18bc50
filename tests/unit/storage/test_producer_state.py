"""Producer state: sequence checks, duplicates, epochs, snapshots and recovery with a Log."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import (
    BatchHeader,
    ControlRecordType,
    Record,
    build_batch,
    build_control_batch,
)
from odradek.storage.producer_state import (
    INT32_MAX,
    ProducerStateManager,
    control_marker,
    snapshot_path,
)
from tests.unit.storage.support import append_values, open_log, small_config


def batch(pid: int, epoch: int, seq: int, n: int = 3, txn: bool = False) -> tuple[memoryview, BatchHeader]:
    now = int(time.time() * 1000)
    raw = build_batch([Record(-1, now + i, b"k", b"v%d" % i, []) for i in range(n)],
                      producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=txn)
    view = memoryview(raw)
    return view, BatchHeader.parse(view)


def check(state: ProducerStateManager, h: BatchHeader) -> int | None:
    return state.check(h.producer_id, h.producer_epoch, h.base_sequence, h.last_offset_delta,
                       h.attributes)


def apply(state: ProducerStateManager, h: BatchHeader, first: int) -> None:
    state.on_append(h.producer_id, h.producer_epoch, h.base_sequence, h.last_offset_delta,
                    h.attributes, first, first + h.last_offset_delta, h.max_timestamp)


def error_of(state: ProducerStateManager, h: BatchHeader) -> ErrorCode:
    with pytest.raises(KafkaError) as exc:
        check(state, h)
    return exc.value.code


def test_sequences_duplicates_and_gaps(tmp_path: Path) -> None:
    s = ProducerStateManager(tmp_path)
    offset = 0
    for seq in range(0, 30, 3):
        _, h = batch(7, 0, seq)
        assert check(s, h) is None
        apply(s, h, offset)
        offset += 3
    # the last 5 batches are duplicates with their original offsets; older ones are not
    for back in range(1, 6):
        _, h = batch(7, 0, 30 - 3 * back)
        assert check(s, h) == offset - 3 * back
    _, old = batch(7, 0, 12)
    assert error_of(s, old) == ErrorCode.out_of_order_sequence_number
    _, gap = batch(7, 0, 31)
    assert error_of(s, gap) == ErrorCode.out_of_order_sequence_number
    _, nxt = batch(7, 0, 30)
    assert check(s, nxt) is None  # next in sequence


def test_epochs(tmp_path: Path) -> None:
    s = ProducerStateManager(tmp_path)
    _, h = batch(1, 3, 0)
    apply(s, h, 0)
    _, stale = batch(1, 2, 3)
    assert error_of(s, stale) == ErrorCode.invalid_producer_epoch
    _, bumped_bad = batch(1, 4, 5)
    assert error_of(s, bumped_bad) == ErrorCode.out_of_order_sequence_number
    _, bumped = batch(1, 4, 0)
    assert check(s, bumped) is None
    # an unknown producer may start anywhere (its state expired or was never here)
    _, fresh = batch(99, 0, 1234)
    assert check(s, fresh) is None


def test_sequence_wraps_at_int32_max(tmp_path: Path) -> None:
    s = ProducerStateManager(tmp_path)
    _, h = batch(5, 0, INT32_MAX - 2, n=3)
    apply(s, h, 0)
    _, nxt = batch(5, 0, 0, n=2)
    assert check(s, nxt) is None


def test_transactions_and_markers(tmp_path: Path) -> None:
    s = ProducerStateManager(tmp_path)
    _, h = batch(3, 0, 0, txn=True)
    apply(s, h, 10)
    assert s.first_unstable_offset() == 10
    _, plain = batch(3, 0, 3)
    assert error_of(s, plain) == ErrorCode.invalid_txn_state
    marker = build_control_batch(ControlRecordType.ABORT, producer_id=3, producer_epoch=0,
                                 coordinator_epoch=4)
    assert control_marker(marker) == (ControlRecordType.ABORT, 4)
    mh = BatchHeader.parse(marker)
    done = s.on_append(3, 0, -1, 0, mh.attributes, 13, 13, 1000, ControlRecordType.ABORT, 4)
    assert done is not None and done.is_aborted and (done.first_offset, done.last_offset) == (10, 13)
    assert s.first_unstable_offset() is None


def test_snapshot_round_trip(tmp_path: Path) -> None:
    s = ProducerStateManager(tmp_path)
    for pid in range(5):
        _, h = batch(pid, pid, 0, txn=pid == 2)
        apply(s, h, pid * 3)
    s.map_end_offset = 15
    assert s.take_snapshot() == snapshot_path(tmp_path, 15)
    t = ProducerStateManager(tmp_path)
    assert t.load_latest(15) == 15
    assert {p: (e.epoch, e.last_seq, e.last_offset) for p, e in t.producers.items()} == {
        p: (e.epoch, e.last_seq, e.last_offset) for p, e in s.producers.items()}
    assert t.ongoing == {2: 6}
    _, dup = batch(4, 4, 0)
    assert check(t, dup) == 12
    # a snapshot above the log end offset (a crash truncated the log) is dropped
    assert ProducerStateManager(tmp_path).load_latest(14) == 0
    assert not snapshot_path(tmp_path, 15).exists()


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_damaged_snapshots_are_refused_cleanly(data: bytes) -> None:
    s = ProducerStateManager(Path("/nonexistent"))
    try:
        s.load_snapshot(data)
    except ValueError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=120))
def test_control_marker_never_raises(data: bytes) -> None:
    ctype, _ = control_marker(b"\0" * 61 + data)
    assert isinstance(ctype, int)


def test_log_recovers_producer_state(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=400))
    seq = 0
    for _ in range(12):
        view, h = batch(42, 1, seq)
        log.append(view, h, 0)
        seq += 3
    assert len(log.segments) > 2
    assert list(log.dir.glob("*.snapshot"))
    leo = log.log_end_offset
    # a crash: no close, no final snapshot; the scan after the last roll snapshot rebuilds
    crashed = open_log(tmp_path, small_config(segment_bytes=400))
    entry = crashed.producer_state.producers[42]
    assert (entry.epoch, entry.last_seq, entry.last_offset) == (1, seq - 1, leo - 1)
    _, dup = batch(42, 1, seq - 3)
    assert check(crashed.producer_state, dup) == leo - 3
    crashed.close()
    assert snapshot_path(log.dir, leo).exists()
    clean = open_log(tmp_path, small_config(segment_bytes=400))
    assert clean.producer_state.producers[42].last_seq == seq - 1
    # truncation forgets the batches above the new end
    clean.truncate_to(leo - 6)
    assert clean.producer_state.producers[42].last_seq == seq - 7
    clean.close()
    log.close()


def test_idle_producers_expire(tmp_path: Path) -> None:
    s = ProducerStateManager(tmp_path, expiration_ms=1000)
    _, h = batch(8, 0, 0)
    apply(s, h, 0)
    assert s.remove_expired(now_ms=h.max_timestamp + 10) == 0
    assert s.remove_expired(now_ms=h.max_timestamp + 1000) == 1
    assert 8 not in s.producers


def test_txn_index_collect_truncate_and_reload(tmp_path: Path) -> None:
    from odradek.storage.txn_index import AbortedTxn, TxnIndex, index_path

    (tmp_path / f"{0:020d}.log").touch()
    (tmp_path / f"{100:020d}.log").touch()
    idx = TxnIndex(tmp_path)
    idx.append(0, AbortedTxn(1, 10, 20, 21))
    idx.append(0, AbortedTxn(2, 15, 40, 41))
    idx.append(100, AbortedTxn(3, 105, 110, 111))
    idx.append(100, AbortedTxn(3, 105, 110, 111))  # met again by a rebuild: ignored
    assert idx.collect(0, 12) == [(1, 10)]
    assert idx.collect(21, 200) == [(2, 15), (3, 105)]
    assert idx.collect(111, 200) == []
    # a torn tail (crash mid-append) is ignored on load
    with open(index_path(tmp_path, 100), "ab") as f:
        f.write(b"\0\0\0")
    again = TxnIndex.load(tmp_path)
    assert again.collect(0, 200) == [(1, 10), (2, 15), (3, 105)]
    again.truncate_from(40)
    assert again.collect(0, 200) == [(1, 10)]
    assert not index_path(tmp_path, 100).exists()
    # an index without its segment is a leftover
    (tmp_path / f"{0:020d}.log").unlink()
    assert TxnIndex.load(tmp_path).collect(0, 200) == []
    assert not index_path(tmp_path, 0).exists()


# ------------------------------------------------- snapshots of every log (issue 22)


def test_empty_state_is_snapshotted_and_restored(tmp_path: Path) -> None:
    s = ProducerStateManager(tmp_path)
    s.map_end_offset = 7
    assert s.take_snapshot() == snapshot_path(tmp_path, 7)  # no producer: still a snapshot
    assert s.take_snapshot() is None  # already there
    t = ProducerStateManager(tmp_path)
    assert t.load_latest(9) == 7 and t.producers == {} and t.ongoing == {}


def test_log_without_producers_snapshots_at_roll_and_close(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=400))
    for i in range(12):
        append_values(log, [b"v%03d" % i + b"." * 60])
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 2
    # one snapshot per roll, at the new segment's base offset, though no producer id was seen
    assert log.producer_state.snapshot_offsets() == bases[1:]
    leo = log.log_end_offset
    log.close()
    assert snapshot_path(log.dir, leo).exists()
    again = open_log(tmp_path, small_config(segment_bytes=400), recovery_point=leo)
    assert again.producer_state.scanned_batches == 0
    assert again.producer_state.scanned_bytes == 0
    again.close()


def test_clean_reopen_reads_no_batch_for_producer_state(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=400))
    seq = 0
    for _ in range(10):
        view, h = batch(42, 1, seq)
        log.append(view, h, 0)
        seq += 3
    leo = log.log_end_offset
    log.close()
    clean = open_log(tmp_path, small_config(segment_bytes=400), recovery_point=leo)
    state = clean.producer_state
    assert (state.scanned_batches, state.scanned_bytes) == (0, 0)
    entry = state.producers[42]
    assert (entry.epoch, entry.last_seq, entry.last_offset) == (1, seq - 1, leo - 1)
    _, dup = batch(42, 1, seq - 3)
    assert check(state, dup) == leo - 3  # the retried batch is still known as a duplicate
    clean.close()


def test_crash_reopen_scans_producers_only_after_the_newest_snapshot(tmp_path: Path) -> None:
    cfg = small_config(segment_bytes=100_000)
    log = open_log(tmp_path, cfg)
    seq = 0
    for _ in range(5):
        view, h = batch(7, 0, seq)
        log.append(view, h, 0)
        seq += 3
    first_leo = log.log_end_offset
    log.close()  # clean: snapshot at first_leo
    log = open_log(tmp_path, cfg, recovery_point=first_leo)
    tail = 0
    for _ in range(4):
        view, h = batch(7, 0, seq)
        log.append(view, h, 0)
        tail += len(view)
        seq += 3
    # kill -9: no close; the next start has the recovery point of the clean shutdown
    crashed = open_log(tmp_path, cfg, recovery_point=first_leo)
    state = crashed.producer_state
    assert (state.scanned_batches, state.scanned_bytes) == (4, tail)
    assert state.producers[7].last_seq == seq - 1
    assert crashed.bytes_recovered_at_open == tail
    crashed.close()
    log.close()


def test_roll_drops_snapshots_below_the_first_segment(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=400))
    for i in range(16):
        append_values(log, [b"v%03d" % i + b"." * 60])
    assert log.delete_records_before(log.segments[2].base_offset) > 0
    first = log.segments[0].base_offset
    log.roll()
    assert min(log.producer_state.snapshot_offsets()) >= first
    log.close()
