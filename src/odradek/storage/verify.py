"""The checks behind `odradek storage verify --data-dir D`: a whole data directory, read-only.

Like `kafka-dump-log --deep-iteration`, for every log of the directory at once: every batch's
framing, offsets and CRC, the `.index` and `.timeindex` entries against the batches they point
at, each log's `partition.metadata`, `leader-epoch-checkpoint` and producer-state snapshots,
and the directory's checkpoint files. Strays and unfinished deletions are listed too. What a
log means above storage (the metadata log's records and its commit marker) is checked by the
package that knows it, through `LogChecks` (metadata/log_verify.py); the command line prints
the report.

Each finding is one line of the report: damage (a file fails its checks), or a note (nothing
is wrong, but an operator may want to know). The files are only read: repairs are the node's
job at its next start.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from odradek.protocol.records import (
    BATCH_HEADER,
    BATCH_HEADER_SIZE,
    H_BASE,
    H_LAST_DELTA,
    H_LENGTH,
    H_MAGIC,
    batch_crc_ok,
)
from odradek.storage.checkpoints import (
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CheckpointError,
    read_lines,
    read_offsets,
)
from odradek.storage.cleaner.log_cleaner import CHECKPOINT_FILE as CLEANER_CHECKPOINT
from odradek.storage.log_dir import PARTITION_METADATA, decode_topic_id, parse_log_dir_name
from odradek.storage.log_manager import DELETE_SUFFIX, STRAY_SUFFIX
from odradek.storage.producer_state import ProducerStateManager

__all__ = ["BatchCheck", "LogChecks", "Report", "SegmentScan", "check_offset_index",
           "check_time_index", "scan_segment", "verify_checkpoints", "verify_data_dir",
           "verify_log_dir"]

_LOG_OVERHEAD = 12
_INDEX_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_BLOCK = 8 * 1024 * 1024
_DIR_CHECKPOINTS = (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
                    REPLICATION_OFFSET_CHECKPOINT, CLEANER_CHECKPOINT)


@dataclass
class Report:
    damage: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    logs: int = 0
    segments: int = 0
    batches: int = 0
    # log dir name -> (first offset, end offset after the last good batch)
    ends: dict[str, tuple[int, int]] = field(default_factory=dict)

    def bad(self, text: str) -> None:
        self.damage.append(text)

    def note(self, text: str) -> None:
        self.notes.append(text)


# a look into one good batch (its bytes): a finding, or None
BatchCheck = Callable[[bytes], "str | None"]


@dataclass(frozen=True)
class LogChecks:
    """What a higher package adds for one log of the directory: a look into each batch, and a
    check of the log as a whole once its batches are scanned (`Report.ends` holds them)."""

    check_batch: BatchCheck | None = None
    after: Callable[[Path, Report], None] | None = None


@dataclass
class SegmentScan:
    """What one `.log` holds: batch positions and last offsets, where the good part ends."""

    base_offset: int
    size: int
    positions: list[int] = field(default_factory=list)
    last_offsets: list[int] = field(default_factory=list)
    good_end: int = 0  # byte position after the last good batch
    next_offset: int = -1
    problem: str | None = None  # why the scan stopped before the end of the file


def _blocks(fd: int, size: int) -> Iterator[tuple[int, bytes]]:
    pos = 0
    while pos < size:
        chunk = os.pread(fd, min(_BLOCK, size - pos), pos)
        if not chunk:
            return
        yield pos, chunk
        pos += len(chunk)


def scan_segment(path: Path, base_offset: int,
                 check_batch: BatchCheck | None = None) -> SegmentScan:
    """Walk every batch of a segment file with CRC checks (read-only); `check_batch` looks
    into each good batch too (a finding stops the scan there, as damage does)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        scan = SegmentScan(base_offset, size, next_offset=base_offset)
        pos = 0
        expected = base_offset
        while pos < size:
            left = size - pos
            if left < BATCH_HEADER_SIZE:
                scan.problem = f"the tail is torn: {left} bytes at the end, too short for a batch header"
                break
            head = os.pread(fd, BATCH_HEADER_SIZE, pos)
            h = BATCH_HEADER.unpack_from(head)
            base, length, magic, last_delta = h[H_BASE], h[H_LENGTH], h[H_MAGIC], h[H_LAST_DELTA]
            total = length + _LOG_OVERHEAD
            if magic != 2:
                scan.problem = f"batch at byte {pos} has magic {magic}, not 2"
                break
            if total < BATCH_HEADER_SIZE or last_delta < 0:
                scan.problem = f"batch at byte {pos} has a bad length or offset delta"
                break
            if total > left:
                scan.problem = (f"batch at byte {pos} (offset {base}) is torn: {total} bytes "
                                f"long, {left} left in the file")
                break
            if base < expected:
                scan.problem = (f"batch at byte {pos} has base offset {base}, below the "
                                f"next expected offset {expected}")
                break
            batch = head if total == BATCH_HEADER_SIZE else head + os.pread(
                fd, total - BATCH_HEADER_SIZE, pos + BATCH_HEADER_SIZE)
            if len(batch) != total or not batch_crc_ok(batch):
                scan.problem = f"batch at byte {pos} (offset {base}) fails its CRC"
                break
            if check_batch is not None:
                problem = check_batch(batch)
                if problem is not None:
                    scan.problem = f"batch at byte {pos} (offset {base}): {problem}"
                    break
            scan.positions.append(pos)
            scan.last_offsets.append(base + last_delta)
            expected = base + last_delta + 1
            scan.next_offset = expected
            pos += total
            scan.good_end = pos
        return scan
    finally:
        os.close(fd)


def check_offset_index(path: Path, scan: SegmentScan) -> str | None:
    """None when every entry points at a batch whose last offset it names."""
    if not path.exists():
        return "missing (the next start rebuilds it)"
    data = path.read_bytes()
    if len(data) % _INDEX_ENTRY.size:
        return f"size {len(data)} is not a multiple of {_INDEX_ENTRY.size}"
    by_position = dict(zip(scan.positions, scan.last_offsets, strict=True))
    prev = (-1, -1)
    for n, (rel, position) in enumerate(_INDEX_ENTRY.iter_unpack(data)):
        if (rel, position) <= prev or rel <= prev[0] or position <= prev[1]:
            return f"entry {n} ({rel}, {position}) is out of order"
        prev = (rel, position)
        last = by_position.get(position)
        if last is None:
            return f"entry {n} points at byte {position}, which is not a good batch's start"
        if last - scan.base_offset != rel:
            return (f"entry {n} says offset {scan.base_offset + rel} at byte {position}, "
                    f"the batch there ends at offset {last}")
    return None


def check_time_index(path: Path, scan: SegmentScan) -> str | None:
    if not path.exists():
        return "missing (the next start rebuilds it)"
    data = path.read_bytes()
    if len(data) % _TIME_ENTRY.size:
        return f"size {len(data)} is not a multiple of {_TIME_ENTRY.size}"
    prev_ts, prev_rel = -(2**63), -1
    for n, (ts, rel) in enumerate(_TIME_ENTRY.iter_unpack(data)):
        if ts <= prev_ts or rel < prev_rel:
            return f"entry {n} ({ts}, {rel}) is out of order"
        if scan.base_offset + rel >= max(scan.next_offset, scan.base_offset + 1):
            return f"entry {n} names offset {scan.base_offset + rel}, past the segment's end"
        prev_ts, prev_rel = ts, rel
    return None


def verify_log_dir(path: Path, report: Report, check_batch: BatchCheck | None = None) -> None:
    report.logs += 1
    name = path.name
    meta = path / PARTITION_METADATA
    if meta.exists():
        try:
            fields = dict(line.split(":", 1) for line in meta.read_text().splitlines()
                          if ":" in line)
            decode_topic_id(fields["topic_id"].strip())
        except (KeyError, ValueError, UnicodeDecodeError) as exc:
            report.bad(f"{meta}: unreadable ({exc}); the next start rewrites it")
    epochs = path / LEADER_EPOCH_CHECKPOINT
    if epochs.exists():
        try:
            read_lines(epochs, 2)
        except (CheckpointError, OSError) as exc:
            report.bad(f"{exc}; the next start rebuilds the epochs from the batches")
    bases = sorted(int(p.name[:20]) for p in path.glob("*.log")
                   if len(p.name) == 24 and p.name[:20].isdigit())
    first = bases[0] if bases else 0
    end = first
    for i, base in enumerate(bases):
        report.segments += 1
        seg = path / f"{base:020d}.log"
        scan = scan_segment(seg, base, check_batch)
        report.batches += len(scan.positions)
        if scan.problem is not None:
            report.bad(f"{seg}: {scan.problem}; {scan.size - scan.good_end} bytes from byte "
                       f"{scan.good_end} on fail their checks")
        for suffix, check in ((".index", check_offset_index), (".timeindex", check_time_index)):
            index_path = path / f"{base:020d}{suffix}"
            problem = check(index_path, scan)
            if problem is not None:
                (report.note if problem.startswith("missing") else report.bad)(
                    f"{index_path}: {problem}")
        end = scan.next_offset
        if scan.problem is not None:
            later = bases[i + 1:]
            if later:
                report.bad(f"{path}: {len(later)} segment(s) after the damage in {seg.name}")
            break
    report.ends[name] = (first, end)
    for snap in sorted(path.glob("*.snapshot")):
        try:
            ProducerStateManager(path).load_snapshot(snap.read_bytes())
        except (ValueError, OSError) as exc:
            report.bad(f"{snap}: producer state snapshot unreadable ({exc}); the next start "
                       "rebuilds the producer state from the batches")


def verify_checkpoints(data_dir: Path, report: Report) -> None:
    for name in _DIR_CHECKPOINTS:
        path = data_dir / name
        try:
            offsets = read_offsets(path)
        except (CheckpointError, OSError) as exc:
            report.bad(f"{path}: unreadable ({exc}); the next start ignores it")
            continue
        if name != RECOVERY_POINT_CHECKPOINT:
            continue
        for (topic, partition), offset in sorted(offsets.items()):
            span = report.ends.get(f"{topic}-{partition}")
            if span is not None and offset > span[1]:
                report.bad(f"{path}: recovery point {offset} of {topic}-{partition} is past "
                           f"its last good offset {span[1]}")


def verify_data_dir(data_dir: Path, special: Mapping[str, LogChecks] | None = None) -> Report:
    """Check every log of `data_dir` and its checkpoint files; `special` adds checks for the
    logs it names (the metadata package's for `__cluster_metadata-0`)."""
    report = Report()
    special = special or {}
    entries = sorted(p for p in data_dir.iterdir() if p.is_dir())
    for path in entries:
        extra = special.get(path.name)
        if path.name.endswith(STRAY_SUFFIX):
            report.note(f"{path}: stray log (not in the metadata), kept; remove it by hand "
                        "once its data is not needed")
            verify_log_dir(path, report)
        elif path.name.endswith(DELETE_SUFFIX):
            report.note(f"{path}: a deletion not finished; the next start removes it")
        elif extra is not None:
            verify_log_dir(path, report, extra.check_batch)
            if extra.after is not None:
                extra.after(path, report)
        elif parse_log_dir_name(path.name) is not None:
            verify_log_dir(path, report)
    verify_checkpoints(data_dir, report)
    return report
