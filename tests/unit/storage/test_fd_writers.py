"""Issue 22: the fd budget is honest. A written partition pins one fd (its active `.log`),
its index files borrow theirs per entry, and the pool bounds the write pins
(`max_writers`) as it bounds idle files (`max_open`): past that many writers, partitions take
turns instead of running the node out of fds."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.protocol.fetch import FileRegion
from odradek.storage.config import LogConfig
from odradek.storage.file_pool import DEFAULT_POOL
from odradek.storage.segment import Segment


def open_files_under(directory: Path) -> list[str]:
    """Paths of this process's open fds that lie under `directory`."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(directory)):
            out.append(target)
    return out


@pytest.fixture
def small_pool() -> Iterator[None]:
    old_open, old_given = DEFAULT_POOL.max_open, DEFAULT_POOL._writers_given
    DEFAULT_POOL.close_all()
    try:
        yield
    finally:
        DEFAULT_POOL._writers_given = old_given
        DEFAULT_POOL.resize(old_open)


def write(seg: Segment, n: int, start: int) -> None:
    prefix, batch = bytes(16), memoryview(bytes(100))
    for i in range(n):
        seg.append(prefix, batch, 100, start + i, 1 + start + i)


def test_a_written_segment_pins_one_fd_and_its_indexes_none(
    tmp_path: Path, small_pool: None
) -> None:
    DEFAULT_POOL.resize(1, max_writers=1000)
    config = LogConfig(index_interval_bytes=0)  # an index entry every append
    segs: list[Segment] = []
    for i in range(20):
        (tmp_path / str(i)).mkdir()
        segs.append(Segment(tmp_path / str(i), 0, config, 0))
        write(segs[-1], 5, 0)
    assert all(len(s.offset_index) >= 4 and len(s.time_index) >= 4 for s in segs)
    held = open_files_under(tmp_path)
    # 20 pinned .log files, and at most the pool's one idle file (an index just written)
    assert sum(p.endswith(".log") for p in held) == 20
    assert len(held) <= 20 + DEFAULT_POOL.max_open, held
    # before issue 22's fix the same segments held their .index and .timeindex too: 60 fds
    for s in segs:
        s.close()
    assert open_files_under(tmp_path) == []


def test_the_pool_bounds_write_pins_and_writers_take_turns(
    tmp_path: Path, small_pool: None
) -> None:
    DEFAULT_POOL.resize(4, max_writers=8)
    config = LogConfig(index_interval_bytes=0)
    evictions = DEFAULT_POOL.writer_evictions
    segs = []
    for i in range(50):
        d = tmp_path / str(i)
        d.mkdir()
        segs.append(Segment(d, 0, config, 0))
    peak = 0
    for round_ in range(3):  # round-robin over 50 partitions: every append past 8 evicts one
        for s in segs:
            write(s, 2, 2 * round_)
            peak = max(peak, len(open_files_under(tmp_path)))
    assert DEFAULT_POOL.writer_count <= 8
    assert peak <= 8 + 4 + 1, peak  # write pins + idle files + the file being opened
    assert DEFAULT_POOL.writer_evictions - evictions >= 50
    for s in segs:
        assert s.size == 600 and s.next_offset == 6
        # every batch landed where it belongs, whatever pin wrote it
        assert os.path.getsize(s.log_path) == 600
        assert s.read_bytes(0, 116)[16:116] == bytes(100)
    for s in segs:
        s.close()
    assert open_files_under(tmp_path) == []


def test_a_region_outlives_the_pool_taking_its_write_pin_back(
    tmp_path: Path, small_pool: None
) -> None:
    DEFAULT_POOL.resize(1, max_writers=1)
    config = LogConfig()
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    a_dir.mkdir()
    b_dir.mkdir()
    a, b = Segment(a_dir, 0, config, 0), Segment(b_dir, 0, config, 0)
    write(a, 1, 0)
    region = FileRegion(a.fd, 0, 100)  # a fetch response holding a's fd
    write(b, 1, 0)  # b takes the only write pin: a lets go of its own
    assert a._active_pin is None and b._active_pin is not None
    for extra in range(3):  # churn the pool: a's file must stay open for the region
        d = tmp_path / f"c{extra}"
        d.mkdir()
        c = Segment(d, 0, config, 0)
        write(c, 1, 0)
        c.close()
    assert os.readlink(f"/proc/self/fd/{region.fd}") == str(a.log_path)
    assert os.pread(region.fd, 16, 0) == bytes(16)
    del region
    gc.collect()
    write(a, 1, 1)  # a's next append takes a pin again
    assert a.size == 200 and os.path.getsize(a.log_path) == 200
    a.close()
    b.close()
