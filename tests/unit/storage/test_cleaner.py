"""The log cleaner against a model: latest value per key, original offsets, tombstones."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol.records import (
    ATTR_DELETE_HORIZON,
    BatchHeader,
    Compression,
    ControlRecordType,
    build_control_batch,
)
from odradek.storage.cleaner.log_cleaner import (
    CleanAborted,
    CleanerConfig,
    LogCleaner,
    cleanable_range,
)
from odradek.storage.cleaner.offset_map import OffsetMap
from odradek.storage.log import Log
from odradek.storage.log_manager import LogManager
from tests.unit.storage.compaction_support import (
    append_kv,
    batches_of,
    cleaner_for,
    compact_config,
    latest_by_key,
    open_compacted,
    records_of,
)
from tests.unit.storage.support import assert_indexes_valid

CODECS = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]

op = st.tuples(
    st.integers(0, 60),  # key
    st.one_of(st.none(), st.binary(min_size=0, max_size=12)),  # value (None: tombstone)
)
batch = st.tuples(
    st.lists(op, min_size=1, max_size=6),
    st.sampled_from(CODECS),
    st.booleans(),  # roll after this batch
)


def _check_against_model(log: Log, written: list[tuple[int, bytes, bytes | None]],
                         tombstones_expired: bool) -> None:
    by_offset = {o: (k, v) for o, k, v in written}
    latest = latest_by_key(written)
    seen: dict[bytes, tuple[int, bytes | None]] = {}
    last = -1
    for _, r in records_of(log):
        assert r.offset > last, "offsets must strictly increase"
        last = r.offset
        assert r.key is not None
        assert by_offset[r.offset] == (r.key, r.value), "a record moved or changed"
        assert r.key not in seen, f"key {r.key!r} appears twice after a full clean"
        seen[r.key] = (r.offset, r.value)
    expected = {k: ov for k, ov in latest.items() if not (tombstones_expired and ov[1] is None)}
    assert seen == expected


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(batch, min_size=1, max_size=25), buffer_slots=st.sampled_from([12, 40, 5000]))
def test_compaction_matches_the_model(tmp_path_factory, batches, buffer_slots) -> None:  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp("c")
    log = open_compacted(tmp, compact_config(segment_bytes=600))
    written: list[tuple[int, bytes, bytes | None]] = []
    for ops, codec, roll in batches:
        records = [(b"key-%d" % k, v) for k, v in ops]
        first = append_kv(log, records, compression=codec)
        written += [(first + i, k, v) for i, (k, v) in enumerate(records)]
        if roll:
            log.roll()
    log.roll()  # everything becomes cleanable
    clock = [50_000]
    cleaner = cleaner_for(log, tmp, buffer=buffer_slots * 24, clock_ms=clock)
    # passes until the offset map has covered the whole dirty section
    for _ in range(200):
        stats = cleaner.clean_log(log)
        if stats.end_offset >= log.active_segment.base_offset:
            break
    _check_against_model(log, written, tombstones_expired=False)
    assert_indexes_valid(log)
    # after delete.retention.ms, one more pass removes the tombstones
    clock[0] += log.config.delete_retention_ms + 1
    cleaner.clean_log(log)
    _check_against_model(log, written, tombstones_expired=True)
    assert_indexes_valid(log)
    # and the cleaned log reopens to the same records
    before = [(r.offset, r.key, r.value) for _, r in records_of(log)]
    log.close()
    log = open_compacted(tmp, compact_config(segment_bytes=600))
    assert [(r.offset, r.key, r.value) for _, r in records_of(log)] == before
    assert_indexes_valid(log)
    log.close()


def test_batches_keep_codec_offsets_and_producer_fields(tmp_path: Path) -> None:
    log = open_compacted(tmp_path)
    for codec in CODECS:
        append_kv(log, [(b"a", b"1"), (b"b", b"2"), (b"a", b"3"), (b"c", b"4")], compression=codec,
                  producer_id=7)
    log.roll()
    before = {h.base_offset: h for h, _ in batches_of(log)}
    cleaner_for(log, tmp_path).clean_log(log)
    after = batches_of(log)
    for h, _ in after:
        orig = before[h.base_offset]
        assert h.compression == orig.compression
        assert h.last_offset_delta == orig.last_offset_delta
        assert (h.producer_id, h.producer_epoch, h.base_sequence) == (7, 0, 0)
    kept = [(r.offset, r.key, r.value) for _, r in records_of(log)]
    assert kept == [(17, b"b", b"2"), (18, b"a", b"3"), (19, b"c", b"4")]


def test_active_segment_and_min_compaction_lag(tmp_path: Path) -> None:
    log = open_compacted(tmp_path, compact_config(min_compaction_lag_ms=5_000))
    append_kv(log, [(b"k", b"old")], ts=1_000)
    log.roll()
    append_kv(log, [(b"k", b"mid")], ts=9_000)
    log.roll()
    append_kv(log, [(b"k", b"new")], ts=9_500)  # active segment: never cleaned
    clock = [10_000]
    cleaner = cleaner_for(log, tmp_path, clock_ms=clock)
    ltc = cleanable_range(log, None, clock[0])
    assert (ltc.first_dirty, ltc.first_uncleanable) == (0, 1)  # segment 1 is too young
    cleaner.clean_log(log)
    assert [r.value for _, r in records_of(log)] == [b"old", b"mid", b"new"]
    clock[0] = 20_000
    cleaner.clean_log(log)
    assert [r.value for _, r in records_of(log)] == [b"mid", b"new"]
    assert log.log_end_offset == 3


def test_max_compaction_lag_forces_a_pass_below_the_ratio(tmp_path: Path) -> None:
    log = open_compacted(tmp_path, compact_config(min_cleanable_dirty_ratio=0.99,
                                                  max_compaction_lag_ms=1_000))
    append_kv(log, [(b"k", b"1"), (b"k", b"2")], ts=1_000)
    log.roll()
    clock = [1_500]
    cleaner = cleaner_for(log, tmp_path, clock_ms=clock)
    # the dirty ratio is 1.0 > 0.99 only when there is no clean part: make a clean part first
    cleaner.clean_log(log)
    append_kv(log, [(b"k", b"3")], ts=1_600)
    log.roll()
    assert cleaner.grab_filthiest(1_700) is None
    assert cleaner.grab_filthiest(3_000) is not None
    assert cleaner.clean_once(3_000) is not None
    assert [r.value for _, r in records_of(log)] == [b"3"]


def test_tombstone_kept_for_delete_retention_then_dropped(tmp_path: Path) -> None:
    log = open_compacted(tmp_path, compact_config(delete_retention_ms=5_000))
    append_kv(log, [(b"a", b"1"), (b"b", b"1")])
    append_kv(log, [(b"a", None)])
    log.roll()
    clock = [100_000]
    cleaner = cleaner_for(log, tmp_path, clock_ms=clock)
    cleaner.clean_log(log)
    got = records_of(log)
    assert [(r.key, r.value) for _, r in got] == [(b"b", b"1"), (b"a", None)]
    tomb_header = got[1][0]
    assert tomb_header.attributes & ATTR_DELETE_HORIZON
    assert tomb_header.base_timestamp == 105_000
    assert got[1][1].timestamp == 1_000  # the record's own timestamp survives the horizon
    clock[0] = 104_999
    assert cleaner.clean_once() is None  # nothing dirty, horizon not reached
    clock[0] = 105_000
    assert cleaner.clean_once() is not None  # the expired horizon makes the log eligible
    assert [(r.key, r.value) for _, r in records_of(log)] == [(b"b", b"1")]


def test_control_and_transactional_batches(tmp_path: Path) -> None:
    log = open_compacted(tmp_path)
    append_kv(log, [(b"t", b"txn-old")], transactional=True, producer_id=3)
    raw = memoryview(build_control_batch(ControlRecordType.COMMIT, producer_id=3, producer_epoch=0))
    log.append(raw, BatchHeader.parse(raw), 0)
    append_kv(log, [(b"u", b"txn-open-or-aborted")], transactional=True, producer_id=4)
    append_kv(log, [(b"t", b"plain-new"), (b"u", None), (None, b"keyless")])
    append_kv(log, [(b"v", None)], transactional=True, producer_id=5)
    log.roll()
    cleaner_for(log, tmp_path).clean_log(log)
    got = records_of(log)
    # the control batch stays; the superseded transactional records go; the keyless record
    # goes; the transactional tombstone stays (its batch may be aborted)
    assert [(h.is_control, r.key, r.value) for h, r in got] == [
        (True, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00"),
        (False, b"t", b"plain-new"),
        (False, b"u", None),
        (False, b"v", None),
    ]
    assert got[0][1].offset == 1


def test_transactional_records_do_not_supersede(tmp_path: Path) -> None:
    log = open_compacted(tmp_path)
    append_kv(log, [(b"k", b"plain")])
    append_kv(log, [(b"k", b"maybe-aborted")], transactional=True, producer_id=9)
    log.roll()
    cleaner_for(log, tmp_path).clean_log(log)
    assert [r.value for _, r in records_of(log)] == [b"plain", b"maybe-aborted"]


def test_small_offset_map_cleans_in_several_passes(tmp_path: Path) -> None:
    log = open_compacted(tmp_path)
    for round_ in range(3):
        for i in range(0, 300, 10):
            append_kv(log, [(b"k%03d" % (i + j), b"v%d" % round_) for j in range(10)])
        log.roll()
    cleaner = LogCleaner(tmp_path, lambda: [log], CleanerConfig(dedupe_buffer_size=2_400))
    ends = []
    while not ends or ends[-1] < log.active_segment.base_offset:
        ends.append(cleaner.clean_log(log).end_offset)
    assert len(ends) > 3 and ends == sorted(ends)
    got = records_of(log)
    assert len(got) == 300 and {r.value for _, r in got} == {b"v2"}
    assert cleaner.checkpoint_of("c", 0) == log.active_segment.base_offset


def test_offset_map_is_bounded_and_exact() -> None:
    m = OffsetMap(24 * 100, load_factor=0.5)
    assert m.memory_bytes == 2400 and m.max_entries == 50
    for i in range(50):
        assert m.put(b"key-%d" % i, i)
    assert m.put(b"key-3", 99)  # an update needs no new slot
    assert not m.put(b"another", 1)
    assert m.get(b"key-3") == 99 and m.get(b"key-49") == 49 and m.get(b"nope") == -1
    assert m.latest_offset == 99


def test_dirtiest_log_is_chosen(tmp_path: Path) -> None:
    logs = []
    for name, dup in (("a-0", 2), ("b-0", 6)):
        lg = Log.open(tmp_path / name, compact_config(min_cleanable_dirty_ratio=0.1))
        for _ in range(dup):
            append_kv(lg, [(b"x", b"y" * 50)])
        lg.roll()
        logs.append(lg)
    cleaner = LogCleaner(tmp_path, lambda: logs)
    first = cleaner.clean_once()
    assert first is not None and first.topic == "a"  # both fully dirty: tie -> first; now b
    second = cleaner.clean_once()
    assert second is not None and second.topic == "b"
    assert cleaner.clean_once() is None  # nothing dirty left


def test_delete_policy_logs_are_left_alone(tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "d-0", compact_config(cleanup_policy="delete"))
    append_kv(lg, [(b"x", b"1"), (b"x", b"2")])
    lg.roll()
    assert LogCleaner(tmp_path, lambda: [lg]).clean_once() is None


def test_reader_of_an_old_region_survives_the_swap(tmp_path: Path) -> None:
    log = open_compacted(tmp_path)
    for i in range(20):
        append_kv(log, [(b"k", b"value-%d" % i)])
    log.roll()
    region = log.read(0, 1 << 20).region
    assert region is not None
    before = log.read_bytes(region)
    cleaner_for(log, tmp_path).clean_log(log)
    assert os.pread(region.fd, region.size, region.position) == before
    assert [r.value for _, r in records_of(log)] == [b"value-19"]
    # the old files wait under .deleted for file.delete.delay.ms
    assert any(p.name.endswith(".log.deleted") for p in log.dir.iterdir())
    log.close_retired(force=True)
    assert not any(p.name.endswith(".deleted") for p in log.dir.iterdir())


def test_pass_aborts_when_retention_removed_a_segment(tmp_path: Path) -> None:
    log = open_compacted(tmp_path, compact_config(cleanup_policy="compact,delete",
                                                  retention_bytes=150, retention_ms=-1))
    for i in range(4):
        append_kv(log, [(b"k", b"%d" % i)])
        log.roll()
    cleaner = cleaner_for(log, tmp_path)
    ltc = cleanable_range(log, None, 10_000)
    assert log.delete_retention_breached(now_ms=10_000) > 0
    left = [r.value for _, r in records_of(log)]
    assert left[-1] == b"3" and len(left) < 4
    with pytest.raises(CleanAborted):
        cleaner.clean(ltc, 10_000)
    assert not any(p.name.endswith((".cleaned", ".swap")) for p in log.dir.iterdir())
    assert [r.value for _, r in records_of(log)] == left
    assert cleaner.clean_log(log).end_offset == 4


def test_log_appends_and_reads_continue_after_cleaning(tmp_path: Path) -> None:
    log = open_compacted(tmp_path, compact_config(segment_bytes=400))
    for i in range(60):
        append_kv(log, [(b"k%d" % (i % 7), b"v%d" % i)])
    cleaner = cleaner_for(log, tmp_path)
    cleaner.clean_log(log)
    n = log.log_end_offset
    assert append_kv(log, [(b"k1", b"after")]) == n
    got = records_of(log)
    assert got[-1][1].value == b"after" and got[-1][1].offset == n
    assert len({r.key for _, r in got}) == 7


def test_cleaner_thread_alongside_appends_and_reads(tmp_path: Path) -> None:
    """The cleaner thread swaps segments while this thread appends and reads from the start:
    every read sees increasing offsets, each record the one appended at its offset."""
    log = open_compacted(tmp_path, compact_config(segment_bytes=2_000))
    cleaner = LogCleaner(tmp_path, lambda: [log], CleanerConfig(backoff_ms=1))
    cleaner.start()
    written: dict[int, tuple[bytes, bytes | None]] = {}
    try:
        for i in range(1_500):
            key, value = b"k%d" % (i % 13), b"v%d" % i
            written[append_kv(log, [(key, value)])] = (key, value)
            if i % 100 == 99:
                last = -1
                for _, r in records_of(log):
                    assert r.offset > last and written[r.offset] == (r.key, r.value)
                    last = r.offset
    finally:
        cleaner.stop()
    assert cleaner.passes > 0
    final = {r.key: r.value for _, r in records_of(log)}
    assert final == {k: v for k, v in written.values()}
    assert_indexes_valid(log)


def test_compacted_log_survives_a_switch_to_delete_and_a_restart(tmp_path: Path) -> None:
    """Offsets with gaps are valid whatever the policy: recovery must not cut at a gap. The
    cleaner's checkpoint names the logs it rewrote; the log manager opens those with gaps
    allowed even when their topic is no longer compacted."""
    lm = LogManager(tmp_path, compact_config())
    log = lm.create("c", 0)
    for i in range(50):
        append_kv(log, [(b"k%d" % (i % 5), b"v%d" % i)])
    log.roll()
    append_kv(log, [(b"x", b"y")])
    LogCleaner(tmp_path, lambda: [log]).clean_log(log)
    before = [(r.offset, r.value) for _, r in records_of(log)]
    assert [o for o, _ in before] == [45, 46, 47, 48, 49, 50]
    leo = log.log_end_offset
    lm.close()
    for full_scan in (False, True):  # clean shutdown, then a recovery from offset 0
        if full_scan:
            (tmp_path / "recovery-point-offset-checkpoint").unlink()
        lm = LogManager(tmp_path, compact_config(cleanup_policy="delete"))
        log = lm.load()[("c", 0)]
        assert [(r.offset, r.value) for _, r in records_of(log)] == before
        assert log.log_end_offset == leo
        lm.close()


def test_last_batch_of_a_producer_is_kept_empty(tmp_path: Path) -> None:
    """Kafka keeps the last batch of a producer, emptied, when compaction removes all its
    records: the producer's sequence state must survive a rebuild from the log."""
    log = open_compacted(tmp_path)
    now = int(time.time() * 1000)  # producers idle past producer.id.expiration.ms are forgotten
    append_kv(log, [(b"a", b"1")], ts=now, producer_id=11)
    append_kv(log, [(b"b", b"1"), (b"c", b"1")], ts=now, compression=Compression.LZ4,
              producer_id=11)
    append_kv(log, [(b"a", b"2"), (b"b", b"2"), (b"c", b"2")], ts=now)
    log.roll()
    cleaner_for(log, tmp_path).clean_log(log)
    batches = [h for h, _ in batches_of(log)]
    last_of_11 = [h for h in batches if h.producer_id == 11]
    assert [(h.base_offset, h.last_offset, h.records_count) for h in last_of_11] == [(1, 2, 0)]
    assert last_of_11[0].compression == Compression.NONE
    assert [(r.key, r.value) for _, r in records_of(log)] == [(b"a", b"2"), (b"b", b"2"),
                                                             (b"c", b"2")]
    log.close()
    log = open_compacted(tmp_path, recovery_point=0)  # a full recovery scan accepts it
    assert [h.records_count for h, _ in batches_of(log)] == [0, 3]


def test_reconfigure_ends_a_long_backoff_and_stop_is_prompt(tmp_path: Path) -> None:
    """Dynamic log.cleaner.*: a cleaner asleep for an hour takes new settings and looks for
    work at once when reconfigured; stop() does not wait out a back-off either."""
    logs: list[Log] = []
    looked = threading.Event()

    def current() -> list[Log]:
        looked.set()
        return list(logs)

    cleaner = LogCleaner(tmp_path, current, CleanerConfig(backoff_ms=3_600_000))
    cleaner.start()
    thread = cleaner._thread
    assert thread is not None
    try:
        if not looked.wait(60):
            pytest.fail("the cleaner thread never looked for logs")
        # its first pass found nothing: it sleeps an hour (or is about to)
        lg = Log.open(tmp_path / "r-0", compact_config(min_cleanable_dirty_ratio=0.1))
        for _ in range(4):
            append_kv(lg, [(b"x", b"y" * 50)])
        lg.roll()
        logs.append(lg)
        cleaner.reconfigure(CleanerConfig(backoff_ms=3_600_000, dedupe_buffer_size=1 << 20))
        assert cleaner.config.dedupe_buffer_size == 1 << 20
        deadline = time.monotonic() + 60
        while cleaner.passes == 0:
            if time.monotonic() > deadline:
                pytest.fail("the reconfigured cleaner never ran a pass")
            time.sleep(0.01)
    finally:
        cleaner.stop(timeout=60)
    assert not thread.is_alive()  # woken from its hour-long back-off
    assert [r.value for _, r in records_of(lg)] == [b"y" * 50]
