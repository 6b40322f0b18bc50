"""An independent reader and checker of Kafka's on-disk partition layout.

Written from Kafka's file formats, not from odradek's storage code, so that the crash tests
check the files against the format rather than against the writer:
- `<base>.log`: magic-2 record batches back to back (61-byte header, CRC32C over
  attributes..end);
- `<base>.index`: 8-byte entries (offset relative to the segment base: int32, byte position
  in the .log: int32), possibly zero-padded at the end while the segment is active;
- `<base>.timeindex`: 12-byte entries (timestamp: int64, relative offset: int32), likewise.
"""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass
from pathlib import Path

import crc32c

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61


@dataclass(frozen=True)
class Batch:
    position: int
    base_offset: int
    last_offset: int
    size: int
    magic: int
    crc_ok: bool
    max_timestamp: int
    records: int


def read_batches(path: Path) -> tuple[list[Batch], int]:
    """The batches of a .log file and the number of trailing bytes that are not a whole batch."""
    data = path.read_bytes()
    pos = 0
    out: list[Batch] = []
    while pos + 12 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        if length < HEADER_SIZE - 12 or pos + 12 + length > len(data):
            break
        (_, _, _, magic, crc, _attrs, last_delta, _base_ts, max_ts, _pid, _pe, _seq,
         count) = HEADER.unpack_from(data, pos)
        ok = crc32c.crc32c(data[pos + 21:pos + 12 + length]) == crc
        out.append(Batch(pos, base, base + last_delta, 12 + length, magic, ok, max_ts, count))
        pos += 12 + length
    return out, len(data) - pos


def read_entries(path: Path, fmt: str) -> list[tuple[int, int]]:
    """Index entries with zero padding at the tail dropped (an entry of all zeros after the first)."""
    st = struct.Struct(fmt)
    data = path.read_bytes()
    entries = [st.unpack_from(data, i) for i in range(0, len(data) - len(data) % st.size, st.size)]
    end = len(entries)
    while end > 1 and entries[end - 1] == (0, 0):
        end -= 1
    if end == 1 and entries and entries[0] == (0, 0) and fmt == ">qi":
        end = 0  # a time index whose only entry is zero is an empty, preallocated file
    return [tuple(e) for e in entries[:end]]  # type: ignore[misc]


def check_partition_dir(d: Path) -> list[Batch]:
    """Assert that the segments of one partition are sound; return all batches in order."""
    logs = sorted(d.glob("*.log"), key=lambda p: int(p.stem))
    assert logs, f"{d}: no segments"
    all_batches: list[Batch] = []
    for n, log in enumerate(logs):
        base = int(log.stem)
        assert log.stem == f"{base:020d}", f"{log.name}: not a 20-digit base offset"
        batches, tail = read_batches(log)
        assert tail == 0, f"{log}: {tail} trailing bytes that are not a whole batch"
        for b in batches:
            assert b.magic == 2, f"{log}@{b.position}: magic {b.magic}"
            assert b.crc_ok, f"{log}@{b.position}: CRC mismatch"
        if batches:
            assert batches[0].base_offset >= base, f"{log}: first batch below the segment base"
            if all_batches:
                assert batches[0].base_offset == all_batches[-1].last_offset + 1, (
                    f"{log}: gap or overlap with the previous segment")
        elif n != len(logs) - 1:
            raise AssertionError(f"{log}: empty segment that is not the active one")
        for prev, b in itertools.pairwise(batches):
            assert b.base_offset == prev.last_offset + 1, f"{log}@{b.position}: offsets not contiguous"
        check_offset_index(log.with_suffix(".index"), base, batches)
        check_time_index(log.with_suffix(".timeindex"), base, batches)
        all_batches += batches
    return all_batches


def check_offset_index(path: Path, base: int, batches: list[Batch]) -> None:
    if not path.exists():
        return  # Kafka recreates a missing index; an absent file is not a wrong one
    entries = read_entries(path, ">ii")
    if not batches:
        assert all(e == (0, 0) for e in entries), f"{path}: entries for an empty segment"
        return
    by_pos = {b.position: b for b in batches}
    last = (-1, -1)
    for rel, pos in entries:
        offset = base + rel
        assert rel >= 0 and pos >= 0, f"{path}: negative entry {(rel, pos)}"
        assert (offset, pos) > last and offset > last[0] and pos > last[1], (
            f"{path}: entries not strictly increasing at {(rel, pos)} after {last}")
        last = (offset, pos)
        b = by_pos.get(pos)
        assert b is not None, f"{path}: entry {(rel, pos)} does not point at a batch boundary"
        assert b.base_offset <= offset <= b.last_offset, (
            f"{path}: entry offset {offset} is not in the batch at {pos} "
            f"({b.base_offset}..{b.last_offset})")


def check_time_index(path: Path, base: int, batches: list[Batch]) -> None:
    if not path.exists():
        return
    last_ts, last_off = -1, -1
    for ts, rel in read_entries(path, ">qi"):
        offset = base + rel
        assert ts >= last_ts and offset >= last_off, (
            f"{path}: time index not monotonic at {(ts, offset)} after {(last_ts, last_off)}")
        last_ts, last_off = ts, offset
        holder = [b for b in batches if b.base_offset <= offset <= b.last_offset]
        assert holder, f"{path}: entry {(ts, offset)} names an offset outside the segment"
        (b,) = holder
        assert b.max_timestamp >= ts, f"{path}: entry {(ts, offset)} claims a later time than its batch"
        # Kafka indexes (max timestamp so far, offset of the batch that first reached it): a
        # lookup for ts then starts at that batch, so no earlier batch of the segment may hold ts.
        late = [x for x in batches if x.last_offset < b.base_offset and x.max_timestamp >= ts]
        assert not late, (f"{path}: entry {(ts, offset)} but the earlier batch at offset "
                          f"{late[0].base_offset} already has timestamp {late[0].max_timestamp}")
