"""The bounded pool of open files behind inactive segments (issue 22: fds are a budget)."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import pytest

from odradek.protocol.fetch import FileRegion
from odradek.storage.config import LogConfig
from odradek.storage.file_pool import DEFAULT_POOL, FilePool, fds_needed
from odradek.storage.segment import Segment


def make_files(tmp_path: Path, n: int) -> list[Path]:
    paths = []
    for i in range(n):
        p = tmp_path / f"f{i}"
        p.write_bytes(b"file %d" % i)
        paths.append(p)
    return paths


def is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def test_least_recently_used_is_evicted_past_max_open(tmp_path: Path) -> None:
    pool = FilePool(max_open=2)
    files = [pool.file(p) for p in make_files(tmp_path, 3)]
    fds = [int(f.pinned_fd()) for f in files[:2]]
    assert pool.open_count == 2
    files[0].pinned_fd()  # f0 is now the most recently used
    files[2].pinned_fd()
    assert pool.open_count == 2
    assert files[1].fd == -1 and files[0].fd == fds[0] and files[2].fd >= 0
    assert not is_open(fds[1]) or fds[1] in (files[0].fd, files[2].fd)


def test_a_pinned_file_is_never_evicted(tmp_path: Path) -> None:
    pool = FilePool(max_open=1)
    a, b, c = (pool.file(p) for p in make_files(tmp_path, 3))
    held = a.pinned_fd()
    b_fd = b.pinned_fd()
    c.pinned_fd()
    # a is pinned: it stays open with its bytes, the pool runs over max_open meanwhile
    assert a.fd == held and os.pread(held, 6, 0) == b"file 0"
    assert os.pread(b_fd, 6, 0) == b"file 1"
    del held, b_fd
    gc.collect()
    assert pool.open_count == 1  # the unpins brought it back to max_open


def test_reopen_after_eviction_reads_the_same_file(tmp_path: Path) -> None:
    pool = FilePool(max_open=1)
    a, b = (pool.file(p) for p in make_files(tmp_path, 2))
    assert os.pread(a.pinned_fd(), 6, 0) == b"file 0"
    assert os.pread(b.pinned_fd(), 6, 0) == b"file 1"
    assert a.fd == -1
    opens = pool.opens
    assert os.pread(a.pinned_fd(), 6, 0) == b"file 0"
    assert pool.opens == opens + 1


def test_a_rename_is_followed_on_reopen(tmp_path: Path) -> None:
    pool = FilePool(max_open=1)
    a, b = (pool.file(p) for p in make_files(tmp_path, 2))
    a.pinned_fd()
    b.pinned_fd()  # evicts a
    target = a.path.with_name("f0.deleted")
    os.replace(a.path, target)
    a.path = target
    assert os.pread(a.pinned_fd(), 6, 0) == b"file 0"


def test_a_closed_file_stays_open_until_its_last_pin_goes(tmp_path: Path) -> None:
    pool = FilePool(max_open=4)
    (f,) = (pool.file(p) for p in make_files(tmp_path, 1))
    pin = f.pinned_fd()
    fd = int(pin)
    f.close()
    assert is_open(fd) and os.pread(pin, 6, 0) == b"file 0"
    with pytest.raises(OSError):
        f.pinned_fd()
    del pin
    assert not is_open(fd) and pool.open_count == 0


def test_an_inactive_segments_region_survives_eviction(tmp_path: Path) -> None:
    """A FileRegion handed to a fetch keeps its segment's file open while the pool churns."""
    config = LogConfig()
    seg = Segment(tmp_path, 0, config, 0)
    batch = bytearray(80)
    os.write(seg.fd, bytes(batch))  # raw bytes: this test reads them back, nothing parses them
    region = FileRegion(seg.fd, 0, 80)
    old = DEFAULT_POOL.max_open
    try:
        DEFAULT_POOL.resize(1)
        others = [Segment(tmp_path, 1000 * (i + 1), config, 0) for i in range(3)]
        assert os.pread(region.fd, 80, 0) == bytes(batch)
        assert seg._file.fd == region.fd  # still open: pinned by the region
        del region
        gc.collect()
        for o in others:
            o.fd  # noqa: B018 - borrowing churns the pool
        assert seg._file.fd == -1  # evicted once unpinned
        assert seg.fd >= 0 and os.fstat(seg.fd).st_size == 80  # and opened again on demand
        for o in others:
            o.close()
        seg.close()
        assert seg.fd == -1
    finally:
        DEFAULT_POOL.resize(old)


def test_the_budget_counts_partitions_pool_reads_connections_and_the_nodes_own() -> None:
    unbounded = 2**31 - 1
    assert fds_needed(100, 256, 1000, max_writers=5000) == 100 + 256 + 256 + 1000 + 64
    # Kafka's default max.connections is no figure: a fixed reserve stands for it
    assert fds_needed(100, 256, unbounded, max_writers=5000) < 1024
    # past the pool's write pins, partitions take turns: no more fds
    assert fds_needed(20_000, 256, unbounded, max_writers=500) == fds_needed(
        500, 256, unbounded, max_writers=500)


def test_the_active_segments_fd_survives_a_roll_while_a_region_holds_it(tmp_path: Path) -> None:
    config = LogConfig()
    seg = Segment(tmp_path, 0, config, 0)
    prefix, batch = bytes(16), memoryview(bytes(64))
    seg.append(prefix, batch, 64, 0, 1)  # activates: the segment pins its fd
    region = FileRegion(seg.fd, 0, 64)
    old = DEFAULT_POOL.max_open
    try:
        DEFAULT_POOL.resize(1)
        seg.on_become_inactive()  # rolled: the segment's own pin goes, the region's stays
        others = [Segment(tmp_path, 1000 * (i + 1), config, 0) for i in range(3)]
        assert seg._file.fd == region.fd and os.fstat(region.fd).st_size == 64
        del region
        gc.collect()
        for o in others:
            o.fd  # noqa: B018
            o.close()
        assert seg._file.fd == -1
    finally:
        DEFAULT_POOL.resize(old)
        seg.close()


def test_an_idle_active_segment_gives_its_fds_back(tmp_path: Path) -> None:
    config = LogConfig(index_interval_bytes=0)  # an index entry each append: index fds open
    seg = Segment(tmp_path, 0, config, 0)
    prefix, batch = bytes(16), memoryview(bytes(64))
    seg.append(prefix, batch, 64, 0, 1)
    seg.append(prefix, batch, 64, 1, 2)
    assert seg._fd >= 0 and len(seg.offset_index) == 1
    assert not seg.release_if_idle()  # appended since activation: kept
    assert seg.release_if_idle()  # nothing since the last check: back to the pool
    assert seg._fd == -1
    seg.append(prefix, batch, 64, 2, 3)  # takes it back
    assert seg._fd >= 0 and seg.next_offset == 3 and seg.size == 192
    seg.close()
