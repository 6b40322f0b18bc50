from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol.errors import ErrorCode, KafkaError, OffsetOutOfRange
from odradek.protocol.records import Compression, decode_records, iter_batches
from odradek.storage.log import Log
from tests.unit.storage.support import append_values, make_batch, open_log, read_all, small_config


def test_append_assigns_contiguous_offsets_and_reads_back(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=1 << 20))
    sent = []
    for n in (1, 3, 1, 5, 2):
        values = [f"v{len(sent)}-{i}".encode() for i in range(n)]
        info = append_values(log, values, epoch=7)
        sent.append((info.first_offset, info.last_offset, values))
    assert [(f, last) for f, last, _ in sent] == [(0, 0), (1, 3), (4, 4), (5, 9), (10, 11)]
    assert log.log_end_offset == 12
    got = read_all(log)
    assert [(h.base_offset, h.last_offset) for h, _ in got] == [(f, last) for f, last, _ in sent]
    for (h, raw), (_, _, values) in zip(got, sent, strict=True):
        assert h.partition_leader_epoch == 7
        assert [r.value for r in decode_records(h, raw)] == values


def test_stored_batch_is_the_received_one_with_patched_prefix(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append_values(log, [b"a"])
    batch, header = make_batch([b"x", b"y"], compression=Compression.GZIP)
    log.append(batch, header, 3)
    (_, _first), (h, stored) = read_all(log)
    assert stored[16:] == bytes(batch[16:])
    assert struct.unpack(">qii", stored[:16]) == (1, header.batch_length, 3)
    assert [r.offset for r in decode_records(h, stored)] == [1, 2]


def test_read_starts_at_batch_containing_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=1 << 20))
    append_values(log, [b"a", b"b", b"c"])
    append_values(log, [b"d", b"e"])
    r = log.read(4, 1 << 20, log.log_end_offset)
    assert r.first_batch_offset == 3
    r = log.read(2, 1 << 20, log.log_end_offset)
    assert r.first_batch_offset == 0
    assert [h.base_offset for h, _ in iter_batches(log.read_bytes(r.region))] == [0, 3]


def test_read_bounds(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=1 << 20, index_interval_bytes=1))
    sizes = []
    for i in range(10):
        batch, header = make_batch([b"x" * (10 + i)])
        log.append(batch, header, 0)
        sizes.append(header.size)
    leo = log.log_end_offset
    # max_offset (high watermark) excludes batches whose last offset is >= it
    r = log.read(0, 1 << 20, 4)
    assert [h.base_offset for h, _ in iter_batches(log.read_bytes(r.region))] == [0, 1, 2, 3]
    assert log.read(4, 1 << 20, 4).region is None
    # max_bytes: whole batches only
    r = log.read(0, sizes[0] + sizes[1] + 5, leo)
    assert r.region.size == sizes[0] + sizes[1]
    # at least one batch even when it is larger than max_bytes
    r = log.read(2, 1, leo)
    assert r.region.size == sizes[2]
    assert log.read(2, 1, leo, min_one_batch=False).region is None
    # at the end: empty; past it or below the start: out of range
    assert log.read(leo, 100, leo).region is None
    with pytest.raises(OffsetOutOfRange):
        log.read(leo + 1, 100, leo)
    with pytest.raises(OffsetOutOfRange):
        log.read(-1, 100, leo)


def test_segments_roll_on_segment_bytes_and_reads_cross_them(tmp_path: Path) -> None:
    cfg = small_config(segment_bytes=600, index_interval_bytes=100)
    log = open_log(tmp_path, cfg)
    values = [os.urandom(30 + (i * 37) % 90) for i in range(60)]
    for v in values:
        append_values(log, [v])
    segs = log.segments
    assert len(segs) > 5
    for seg in segs:
        assert seg.size <= 600
        assert seg.log_path.name == f"{seg.base_offset:020d}.log"
    assert [s.base_offset for s in segs[1:]] == [s.next_offset for s in segs[:-1]]
    # one read never spans two segments
    first = log.read(0, 1 << 20, log.log_end_offset)
    assert first.region.size == segs[0].size
    got = read_all(log)
    assert [decode_records(h, raw)[0].value for h, raw in got] == values
    # a read from the middle of any segment
    for offset in range(0, 60, 7):
        got = read_all(log, start=offset)
        assert got[0][0].base_offset == offset


def test_batch_limits_and_a_batch_that_only_fits_a_fresh_segment(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=300, max_message_bytes=290))
    append_values(log, [b"a"])
    append_values(log, [b"x" * 200])  # fits max.message.bytes, not what is left of segment 0
    append_values(log, [b"b"])
    assert [s.base_offset for s in log.segments] == [0, 1, 2]
    with pytest.raises(KafkaError) as too_big:
        append_values(log, [b"x" * 220])
    assert too_big.value.code == ErrorCode.message_too_large
    log.update_config(small_config(segment_bytes=300, max_message_bytes=10_000))
    with pytest.raises(KafkaError) as too_big:
        append_values(log, [b"x" * 400])
    assert too_big.value.code == ErrorCode.record_list_too_large
    assert log.log_end_offset == 3 and len(read_all(log)) == 3


def test_roll_on_segment_ms_uses_record_time(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=1 << 20, segment_ms=10_000))
    append_values(log, [b"a"], [1_000_000])
    append_values(log, [b"b"], [1_005_000])
    assert len(log.segments) == 1
    append_values(log, [b"c"], [1_010_001])
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_roll_when_index_is_full(tmp_path: Path) -> None:
    # 24 bytes: 3 offset index entries, 2 time index entries
    log = open_log(
        tmp_path,
        small_config(segment_bytes=1 << 20, index_interval_bytes=1, segment_index_bytes=24),
    )
    for i in range(12):
        append_values(log, [b"v"], [1000 + i])
    assert len(log.segments) > 2
    for seg in log.segments:
        assert len(seg.time_index) <= 3  # 2 + the final entry written when it rolled
        assert len(seg.offset_index) <= 3
    assert len(read_all(log)) == 12


def _read_index_files(seg) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    idx = seg.offset_index.path.read_bytes()
    tix = seg.time_index.path.read_bytes()
    assert len(idx) % 8 == 0 and len(tix) % 12 == 0
    return list(struct.iter_unpack(">ii", idx)), list(struct.iter_unpack(">qi", tix))


def test_index_files_are_valid_kafka_indexes(tmp_path: Path) -> None:
    cfg = small_config(segment_bytes=4000, index_interval_bytes=150)
    log = open_log(tmp_path, cfg)
    ts = 5000
    for i in range(80):
        ts += -30 if i % 5 == 0 else 17
        append_values(log, [b"v" * (i % 40), b"w"], [ts, ts - 3])
    log.close()
    log = open_log(tmp_path, cfg, recovery_point=80 * 2)
    assert len(log.segments) > 2
    for seg in log.segments:
        index, timeindex = _read_index_files(seg)
        assert index, "expected sparse entries"
        batches = {}
        data = seg.read_bytes(0, seg.size)
        pos = 0
        for h, _ in iter_batches(data, strict=True):
            batches[pos] = h
            pos += h.size
        for rel, position in index:
            assert position in batches
            assert batches[position].last_offset == seg.base_offset + rel
        assert [r for r, _ in index] == sorted({r for r, _ in index})
        stamps = [t for t, _ in timeindex]
        assert stamps == sorted(set(stamps))
        # the last time index entry is the segment's max timestamp, at the batch holding it
        max_ts = max(h.max_timestamp for h in batches.values())
        assert timeindex[-1][0] == max_ts
        holder = next(h for h in batches.values() if h.max_timestamp == max_ts)
        assert timeindex[-1][1] + seg.base_offset == holder.last_offset
        # every entry is (max timestamp so far, an offset holding it)
        for t, rel in timeindex:
            upto = [h for h in batches.values() if h.last_offset <= seg.base_offset + rel]
            assert max(h.max_timestamp for h in upto) == t


def _brute_offset_for_timestamp(log: Log, target: int) -> tuple[int, int] | None:
    for h, raw in read_all(log):
        for r in decode_records(h, raw):
            if r.timestamp >= target and r.offset >= log.log_start_offset:
                return r.offset, r.timestamp
    return None


def test_offset_for_timestamp_across_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=500, index_interval_bytes=60))
    ts = 10_000
    for i in range(70):
        ts += 7 if i % 4 else -20
        append_values(log, [b"a" * (i % 13), b"b"], [ts, ts + (5 if i % 3 else -9)])
    assert len(log.segments) > 3
    for target in range(9_000, ts + 30, 11):
        assert log.offset_for_timestamp(target) == _brute_offset_for_timestamp(log, target), target
    assert log.offset_for_timestamp(ts + 100) is None
    log.delete_records_before(45)
    for target in range(9_000, ts + 30, 13):
        assert log.offset_for_timestamp(target) == _brute_offset_for_timestamp(log, target), target


def test_max_timestamp_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=300))
    assert log.max_timestamp_offset() == (-1, -1)
    for i in range(20):
        stamps = [100 + i, 100 + i] if i != 7 else [50, 9_999, 60]
        append_values(log, [b"x"] * len(stamps), stamps)
    # batch 7 starts at offset 14; its record with the max timestamp is the second one
    assert log.max_timestamp_offset() == (15, 9_999)


def test_truncate_to(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=400))
    for i in range(30):
        append_values(log, [b"v%d" % i, b"w"], epoch=i // 10)
    assert log.epochs.entries == [(0, 0), (1, 20), (2, 40)]
    log.truncate_to(25)  # mid-batch: the batch [24, 25] goes
    assert log.log_end_offset == 24
    assert log.epochs.entries == [(0, 0), (1, 20)]
    got = read_all(log)
    assert got[-1][0].last_offset == 23
    info = append_values(log, [b"new"], epoch=3)
    assert info.first_offset == 24
    assert read_all(log)[-1][0].base_offset == 24
    log.truncate_to(0)
    assert log.log_end_offset == 0 and read_all(log) == []
    assert append_values(log, [b"again"]).first_offset == 0


def test_delete_records_before(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=300))
    for i in range(40):
        append_values(log, [b"v%d" % i], epoch=i // 10)
    bases = [s.base_offset for s in log.segments]
    cut = bases[3] + 1
    assert log.delete_records_before(cut) == cut
    assert log.log_start_offset == cut
    assert log.segments[0].base_offset == bases[3]
    for base in bases[:3]:
        assert not (log.dir / f"{base:020d}.log").exists()
    with pytest.raises(OffsetOutOfRange):
        log.read(cut - 1, 100, log.log_end_offset)
    assert read_all(log)[0][0].base_offset == cut
    assert log.epochs.entries[0][1] == cut
    with pytest.raises(OffsetOutOfRange):
        log.delete_records_before(41)
    # all of it: the active segment stays, reads at the end are empty
    log.delete_records_before(40)
    assert log.log_start_offset == 40 and log.read(40, 100).region is None
    log.close()
    log = open_log(
        tmp_path, small_config(segment_bytes=300), recovery_point=40, log_start_offset=40
    )
    assert (log.log_start_offset, log.log_end_offset) == (40, 40)


def test_retention_bytes_deletes_oldest_segments(tmp_path: Path) -> None:
    # retention.ms off: these records are stamped in 1970, so time retention would take all
    log = open_log(tmp_path, small_config(segment_bytes=300, retention_bytes=700, retention_ms=-1))
    for i in range(40):
        append_values(log, [b"v%d" % i])
    n = len(log.segments)
    deleted = log.delete_retention_breached()
    assert deleted > 0 and len(log.segments) == n - deleted
    assert log.size_bytes - log.segments[0].size < 700
    assert log.log_start_offset == log.segments[0].base_offset


def test_partition_metadata_and_topic_id(tmp_path: Path) -> None:
    import uuid

    tid = uuid.UUID("c07e1f5a-6a39-4c73-9c1b-0e1b5b8e2f11")
    log = Log.open(tmp_path / "orders-3", small_config(), topic_id=tid)
    assert (log.topic, log.partition, log.topic_id) == ("orders", 3, tid)
    text = (tmp_path / "orders-3" / "partition.metadata").read_text()
    assert text == "version: 0\ntopic_id: wH4fWmo5THOcGw4bW44vEQ"
    log.close()
    assert Log.open(tmp_path / "orders-3", small_config()).topic_id == tid


def test_flush_moves_recovery_point_and_flush_messages(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append_values(log, [b"a", b"b"])
    assert log.recovery_point == 0
    log.flush()
    assert log.recovery_point == 2
    log2 = open_log(tmp_path / "x", small_config(flush_messages=3))
    append_values(log2, [b"a"])
    assert log2.recovery_point == 0
    append_values(log2, [b"a", b"b"])
    assert log2.recovery_point == 3


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    batches=st.lists(st.tuples(st.integers(1, 4), st.integers(0, 120)), min_size=1, max_size=30),
    segment_bytes=st.integers(800, 2500),
    interval=st.integers(1, 400),
    reads=st.lists(
        st.tuples(st.floats(0, 1), st.integers(0, 1200), st.floats(0, 1), st.booleans()),
        max_size=15,
    ),
)
def test_property_reads_match_a_model(
    tmp_path_factory, batches, segment_bytes, interval, reads
) -> None:
    log = Log.open(
        tmp_path_factory.mktemp("r") / "t-0",
        small_config(segment_bytes=segment_bytes, index_interval_bytes=interval),
    )
    model = []  # (base, last, size, segment base)
    for count, size in batches:
        batch, header = make_batch([b"x" * size] * count)
        info = log.append(batch, header, 0)
        model.append((info.first_offset, info.last_offset, header.size))
    seg_of = {}
    for seg in log.segments:
        for base, _last, _ in model:
            if seg.base_offset <= base < seg.next_offset:
                seg_of[base] = seg.base_offset
    leo = log.log_end_offset
    for off_f, max_bytes, hw_f, min_one in reads:
        offset = int(off_f * leo)
        hw = int(hw_f * leo)
        result = log.read(offset, max_bytes, hw, min_one)
        first = (
            next(i for i, (_, last, _) in enumerate(model) if last >= offset)
            if offset < leo
            else None
        )
        expected: list[int] = []
        if first is not None:
            total = 0
            for base, last, size in model[first:]:
                if last >= hw or seg_of[base] != seg_of[model[first][0]]:
                    break
                if total + size > max_bytes and not (min_one and not expected):
                    break
                expected.append(base)
                total += size
        got = (
            []
            if result.region is None
            else [
                h.base_offset for h, _ in iter_batches(log.read_bytes(result.region), strict=True)
            ]
        )
        assert got == expected, (offset, max_bytes, hw, min_one)
        if expected:
            assert result.first_batch_offset == expected[0]
    log.close()


def test_roll_and_append_many(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=1 << 20))
    log.roll()  # empty active segment: nothing to roll
    assert len(log.segments) == 1
    info = log.append_many([make_batch([b"a", b"b"]), make_batch([b"c"])], leader_epoch=4)
    assert (info.first_offset, info.last_offset) == (0, 2)
    log.roll()
    assert [s.base_offset for s in log.segments] == [0, 3]
    # a follower copies its leader's batches unchanged, offsets and epochs included
    leader = open_log(tmp_path / "leader", small_config(segment_bytes=1 << 20))
    for i in range(5):
        append_values(leader, [b"v%d" % i], epoch=2 + i // 3)
    follower = open_log(tmp_path / "follower", small_config(segment_bytes=1 << 20))
    copied = [(memoryview(raw), h) for h, raw in read_all(leader)]
    follower.append_many(copied, assign_offsets=False)
    assert read_all(follower) == read_all(leader)
    assert follower.epochs.entries == leader.epochs.entries == [(2, 0), (3, 3)]
    with pytest.raises(KafkaError):
        follower.append_many(copied[:1], assign_offsets=False)  # below the log end offset
