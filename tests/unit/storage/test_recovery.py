from __future__ import annotations

import logging
import os
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol.records import decode_records
from odradek.storage.log import Log, LogDamaged
from tests.unit.storage.support import append_values, assert_indexes_valid, read_all, small_config

CFG = small_config(segment_bytes=700, index_interval_bytes=90)


def _fill(path: Path, n: int = 40) -> tuple[Log, list[bytes]]:
    log = Log.open(path, CFG)
    values = [b"value-%03d-" % i + b"z" * (i % 23) for i in range(n)]
    for i, v in enumerate(values):
        append_values(log, [v], [10_000 + i], epoch=1 + i // 15)
    return log, values


def _values(log: Log) -> list[bytes]:
    return [r.value for h, raw in read_all(log) for r in decode_records(h, raw)]


def _batch_starts(seg_path: Path) -> list[int]:
    data = seg_path.read_bytes()
    pos, starts = 0, []
    while pos < len(data):
        starts.append(pos)
        pos += struct.unpack_from(">i", data, pos + 8)[0] + 12
    return starts


def test_clean_reopen_needs_no_rebuild_and_continues_offsets(tmp_path: Path) -> None:
    log, values = _fill(tmp_path / "t-0")
    log.flush()
    leo = log.log_end_offset
    log.close()
    stamps = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "t-0").iterdir()}
    log = Log.open(tmp_path / "t-0", CFG, recovery_point=leo)
    assert log.log_end_offset == leo and log.recovery_point == leo
    assert _values(log) == values
    # nothing was rewritten: the indexes were only checked
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "t-0").iterdir()} == stamps
    assert append_values(log, [b"more"], [20_000], epoch=3).first_offset == leo
    assert log.epochs.entries == [(1, 0), (2, 15), (3, 30)]


def test_torn_tail_is_truncated_to_the_last_whole_batch(tmp_path: Path) -> None:
    log, values = _fill(tmp_path / "t-0")
    last = log.segments[-1]
    starts = _batch_starts(last.log_path)
    log.close()
    keep = len(starts) - 2
    with open(last.log_path, "r+b") as f:
        f.truncate(starts[-2] + 30)  # mid-batch: the second-to-last batch is torn
    log = Log.open(tmp_path / "t-0", CFG, recovery_point=0)
    assert log.log_end_offset == last.base_offset + keep
    assert _values(log) == values[: last.base_offset + keep]
    assert log.recovery_point == log.log_end_offset
    # the log keeps going from there
    assert append_values(log, [b"after"]).first_offset == log.log_end_offset - 1
    assert _values(log)[-1] == b"after"


def test_flipped_byte_cuts_the_batch_and_all_later_segments(tmp_path: Path) -> None:
    log, values = _fill(tmp_path / "t-0")
    segs = log.segments
    assert len(segs) >= 3
    victim = segs[1]
    starts = _batch_starts(victim.log_path)
    log.close()
    with open(victim.log_path, "r+b") as f:
        f.seek(starts[2] + 70)  # inside the records of the third batch
        b = f.read(1)
        f.seek(starts[2] + 70)
        f.write(bytes([b[0] ^ 0x40]))
    log = Log.open(tmp_path / "t-0", CFG, recovery_point=0)
    assert log.log_end_offset == victim.base_offset + 2
    assert _values(log) == values[: victim.base_offset + 2]
    assert [s.base_offset for s in log.segments] == [s.base_offset for s in segs[:2]]
    for s in segs[2:]:
        assert not s.log_path.exists() and not s.offset_index.path.exists()
    # epochs are cut back with the log: epoch 1 covers offsets [0, 15)
    assert log.epochs.entries == [
        (e, o) for e, o in [(1, 0), (2, 15), (3, 30)] if o < log.log_end_offset
    ]


def test_missing_or_garbage_indexes_are_rebuilt_even_below_the_recovery_point(
    tmp_path: Path,
) -> None:
    log, values = _fill(tmp_path / "t-0")
    log.flush()
    leo = log.log_end_offset
    segs = log.segments
    originals = {
        s.base_offset: (s.offset_index.path.read_bytes(), s.time_index.path.read_bytes())
        for s in segs
    }
    log.close()
    segs[0].offset_index.path.unlink()
    segs[1].time_index.path.write_bytes(b"\x00" * 7)
    segs[2].offset_index.path.write_bytes(struct.pack(">ii", 5, 10_000_000))
    log = Log.open(tmp_path / "t-0", CFG, recovery_point=leo)
    assert log.log_end_offset == leo
    assert _values(log) == values
    for s in log.segments[:3]:
        assert (s.offset_index.path.read_bytes(), s.time_index.path.read_bytes()) == originals[
            s.base_offset
        ]
    for target in (10_000, 10_013, 10_039):
        assert log.offset_for_timestamp(target) == (target - 10_000, target)


def test_recovery_point_below_end_rescans_unflushed_segments(tmp_path: Path) -> None:
    log, values = _fill(tmp_path / "t-0")
    log.close()
    # checkpoint says only 5 offsets were flushed; everything after is scanned and kept
    log = Log.open(tmp_path / "t-0", CFG, recovery_point=5)
    assert _values(log) == values
    assert log.recovery_point == log.log_end_offset


def test_garbage_after_the_last_batch_is_cut(tmp_path: Path) -> None:
    log, values = _fill(tmp_path / "t-0")
    path = log.segments[-1].log_path
    leo = log.log_end_offset
    log.close()
    with open(path, "ab") as f:
        f.write(b"\x00" * 100)  # a preallocated, never-written tail
    log = Log.open(tmp_path / "t-0", CFG, recovery_point=leo)
    assert log.log_end_offset == leo and _values(log) == values


def test_leader_epochs_are_rebuilt_from_batches_when_the_checkpoint_is_lost(tmp_path: Path) -> None:
    log, _ = _fill(tmp_path / "t-0")
    log.close()
    (tmp_path / "t-0" / "leader-epoch-checkpoint").unlink()
    log = Log.open(tmp_path / "t-0", CFG, recovery_point=0)
    assert log.epochs.entries == [(1, 0), (2, 15), (3, 30)]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=400), min_size=1, max_size=40),
    segment_bytes=st.integers(min_value=520, max_value=3000),
    interval=st.integers(min_value=1, max_value=600),
    cut_fraction=st.floats(min_value=0.0, max_value=1.0),
)
def test_property_round_trip_and_recovery_after_a_cut(
    tmp_path_factory, sizes: list[int], segment_bytes: int, interval: int, cut_fraction: float
) -> None:
    path = tmp_path_factory.mktemp("p") / "t-0"
    cfg = small_config(segment_bytes=segment_bytes, index_interval_bytes=interval)
    log = Log.open(path, cfg)
    values = [os.urandom(n) for n in sizes]
    for i, v in enumerate(values):
        append_values(log, [v, b"tail"], [1_000 + i * 3, 999 + i * 3])
    assert _values(log) == [x for v in values for x in (v, b"tail")]
    last = log.segments[-1]
    starts = _batch_starts(last.log_path)
    log.close()
    size = last.log_path.stat().st_size
    cut = int(size * cut_fraction)
    os.truncate(last.log_path, cut)
    whole = len(
        [i for i, s in enumerate(starts) if (starts[i + 1] if i + 1 < len(starts) else size) <= cut]
    )
    log = Log.open(path, cfg, recovery_point=0)
    kept = last.base_offset // 2 + whole
    assert log.log_end_offset == kept * 2
    assert _values(log) == [x for v in values[:kept] for x in (v, b"tail")]
    assert last.log_path.stat().st_size == (starts[whole] if whole < len(starts) else size)
    assert_indexes_valid(log)
    for i in range(kept):
        assert log.offset_for_timestamp(999 + i * 3) == (2 * i, 1_000 + i * 3)
    log.close()


@settings(max_examples=30, deadline=None)
@given(
    damage=st.lists(
        st.tuples(st.floats(min_value=0.0, max_value=1.0), st.binary(min_size=1, max_size=8)),
        min_size=1,
        max_size=4,
    ),
    recovery_point=st.sampled_from([0, 7, 40]),
)
def test_fuzz_damaged_segments_recover_to_a_prefix(
    tmp_path_factory, damage, recovery_point: int
) -> None:
    path = tmp_path_factory.mktemp("f") / "t-0"
    log, values = _fill(path)
    segs = log.segments
    log.close()
    victim = segs[len(segs) // 2] if recovery_point < 40 else segs[-1]
    size = victim.log_path.stat().st_size
    # A log loaded clean (recovery point = end) is only checked after its last index entry,
    # as in Kafka: flushed data is trusted. Damage goes where the checks are meant to look.
    lo = 0 if recovery_point < 40 else victim.offset_index.last_position()
    with open(victim.log_path, "r+b") as f:
        for where, junk in damage:
            f.seek(lo + int(where * (size - 1 - lo)))
            f.write(junk)
    log = Log.open(path, CFG, recovery_point=recovery_point)
    got = _values(log)
    assert got == values[: len(got)]
    assert log.log_end_offset == len(got)
    assert_indexes_valid(log)
    assert append_values(log, [b"next"]).first_offset == len(got)
    log.close()


# ---------------------------------------------------------------- repairs said out loud


def test_damage_below_protect_below_raises_and_cuts_nothing(tmp_path: Path) -> None:
    log, _ = _fill(tmp_path / "t-0")
    leo = log.log_end_offset
    first = log.segments[0].log_path
    log.close()
    size = first.stat().st_size
    data = bytearray(first.read_bytes())
    data[_batch_starts(first)[1] + 70] ^= 0x01  # inside the second batch's records
    first.write_bytes(bytes(data))
    with pytest.raises(LogDamaged) as exc:
        Log.open(tmp_path / "t-0", CFG, protect_below=leo)
    assert str(first) in str(exc.value) and "offset" in str(exc.value)
    assert first.stat().st_size == size
    assert len(list((tmp_path / "t-0").glob("*.log"))) > 1  # no later segment dropped


def test_torn_tail_past_protect_below_is_cut(tmp_path: Path, caplog) -> None:
    log, values = _fill(tmp_path / "t-0")
    leo = log.log_end_offset
    last = log.segments[-1].log_path
    log.close()
    with open(last, "ab") as f:
        f.write(b"\x00" * 7 + b"\x01" * 40)  # a torn write past the protected end
    with caplog.at_level(logging.INFO, logger="odradek.storage.log"):
        log = Log.open(tmp_path / "t-0", CFG, protect_below=leo)
    assert log.log_end_offset == leo and _values(log) == values
    cut = [r.getMessage() for r in caplog.records if "cut 47 bytes" in r.getMessage()]
    assert len(cut) == 1, [r.getMessage() for r in caplog.records]
    log.close()


def test_missing_segment_below_protect_below_raises(tmp_path: Path) -> None:
    log, _ = _fill(tmp_path / "t-0")
    leo = log.log_end_offset
    last = log.segments[-1]
    log.close()
    last.log_path.unlink()
    with pytest.raises(LogDamaged):
        Log.open(tmp_path / "t-0", CFG, protect_below=leo)


@pytest.mark.parametrize("damage", ["delete_index", "delete_timeindex", "garbage", "short"])
def test_index_repairs_are_logged_and_lose_nothing(tmp_path: Path, caplog, damage: str) -> None:
    log, values = _fill(tmp_path / "t-0")
    log.flush()
    leo = log.log_end_offset
    seg = log.segments[1]
    log.close()
    index, timeindex = seg.offset_index.path, seg.time_index.path
    if damage == "delete_index":
        index.unlink()
    elif damage == "delete_timeindex":
        timeindex.unlink()
    elif damage == "garbage":
        index.write_bytes(b"\xff" * 16)
    else:
        index.write_bytes(b"\x00" * 5)
    with caplog.at_level(logging.INFO, logger="odradek.storage.log"):
        log = Log.open(tmp_path / "t-0", CFG, recovery_point=leo)
    lines = [r.getMessage() for r in caplog.records if "rebuilt the indexes" in r.getMessage()]
    assert len(lines) == 1, [r.getMessage() for r in caplog.records]
    assert f"segment {seg.base_offset} " in lines[0]
    assert _values(log) == values
    assert_indexes_valid(log)
    log.close()


def test_clean_open_logs_nothing(tmp_path: Path, caplog) -> None:
    log, _ = _fill(tmp_path / "t-0")
    log.flush()
    leo = log.log_end_offset
    log.close()
    with caplog.at_level(logging.INFO, logger="odradek.storage.log"):
        Log.open(tmp_path / "t-0", CFG, recovery_point=leo).close()
    assert not caplog.records


def test_storage_verify_finds_what_recovery_would_repair(tmp_path: Path) -> None:
    from odradek.storage.verify import verify_data_dir

    log, values = _fill(tmp_path / "t-0")
    log.flush()
    segs = [s.log_path for s in log.segments]
    log.close()
    assert verify_data_dir(tmp_path).damage == []
    data = bytearray(segs[1].read_bytes())
    data[_batch_starts(segs[1])[0] + 66] ^= 0x04
    segs[1].write_bytes(bytes(data))
    segs[0].with_suffix(".timeindex").write_bytes(b"\x00" * 11)
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n3\nt 0 1\n")
    snap = tmp_path / "t-0" / f"{len(values):020d}.snapshot"
    snap.write_bytes(b"junk")
    (tmp_path / "u-0.0a1b-stray").mkdir()
    report = verify_data_dir(tmp_path)
    text = "\n".join(report.damage)
    assert f"{segs[1]}: batch at byte 0" in text and "fails its CRC" in text
    assert f"{segs[0].with_suffix('.timeindex')}: size 11" in text
    assert "recovery-point-offset-checkpoint: unreadable" in text
    assert "segment(s) after the damage" in text
    assert f"{snap}: producer state snapshot unreadable" in text
    assert any("u-0.0a1b-stray: stray log" in n for n in report.notes)
