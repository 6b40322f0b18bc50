"""Opening a log's segments at start-up: trust what was flushed, scan only what was not.

`recovery-point-offset-checkpoint` says, per log, below which offset everything reached the
disk (an fsync, then the checkpoint). Below it a segment is loaded from its indexes alone
(they are sanity-checked, and the few batches after the last index entry are walked to find
the segment's end, as Kafka's readNextOffset does). From the recovery point on, batches are
CRC-checked and indexed again, and a torn or corrupt tail is cut.

The segment holding the recovery point is not rescanned from its start: its index entries
below the recovery point are kept (they were flushed with the batches they point at), the
walk starts at the last of them, and the CRC scan at the recovery point itself. A start
after kill -9 thus reads what lies past the recovery point, plus at most one
`index.interval.bytes` of batch headers before it. After a clean shutdown the recovery point
is the log end offset and nothing is scanned.

`bytes_read` counts the `.log` bytes the scans covered, for the start-up line and the tests
that prove a clean start reads no batches.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from odradek.protocol.records import (
    H_BASE,
    H_LAST_DELTA,
    H_LENGTH,
    H_MAX_TS,
    LOG_OVERHEAD,
    batch_crc_ok,
)
from odradek.storage.config import LogConfig
from odradek.storage.index import CorruptIndex
from odradek.storage.segment import (
    INT32_MAX,
    NO_TIMESTAMP,
    Segment,
    SegmentDamaged,
)

log = logging.getLogger(__name__)

OnEpoch = Callable[[int, int], None]


class LogDamaged(Exception):
    """Recovery found damage below the offset the caller knows to be durable; nothing was cut."""

    def __init__(self, message: str, path: Path, offset: int) -> None:
        super().__init__(message)
        self.path = path
        self.offset = offset


@dataclass
class LoadResult:
    segments: list[Segment]
    # some segment was scanned (its files may have changed: flush them before trusting them)
    recovered: bool = False
    rebuilt: list[Segment] = field(default_factory=list)
    # `.log` bytes walked by the scans past the recovery point (CRC-checked)
    bytes_recovered: int = 0
    # `.log` bytes walked below it: index checks and the lead-in to the recovery point
    bytes_checked: int = 0


def _tail_after_index(seg: Segment) -> int:
    """The bytes `Segment.load_clean` walks: from its last index entry to the end."""
    return seg.size - seg.offset_index.last_position()


def recover_from(
    seg: Segment, recovery_point: int, on_epoch: OnEpoch | None
) -> tuple[bool, int, int, bool] | None:
    """Recover `seg`, which holds `recovery_point` above its base, from there on: keep its
    index entries below the recovery point, walk the headers from the last of them to the
    recovery point, CRC-scan and index the rest. Returns (cut, bytes below, bytes past the
    recovery point) or None when the segment's indexes or its batches before the recovery
    point do not hold together (the caller then recovers it whole)."""
    try:
        seg.offset_index.load(seg.size, INT32_MAX)
        seg.time_index.load(INT32_MAX)
    except CorruptIndex as exc:
        seg.unclean_reason = str(exc)
        return None
    rel = recovery_point - seg.base_offset
    oi = seg.offset_index
    keep = bisect.bisect_left(oi.rel_offsets, rel)
    start = oi.positions[keep - 1] if keep else 0
    time_keep = bisect.bisect_left(seg.time_index.rel_offsets, rel)
    if start > 0 and time_keep == 0:
        seg.unclean_reason = f"{seg.time_index.path}: no entry for a segment with batches"
        return None
    if start >= seg.size:
        seg.unclean_reason = f"{oi.path}: entry points past the log"
        return None
    # Walk the flushed batches from the last kept index entry to the recovery point: an
    # index interval at most.
    max_ts = NO_TIMESTAMP
    max_ts_offset = -1
    first_ts: int | None = None
    position = -1
    walked_end, walked_next = start, seg.base_offset
    indexed_last = seg.base_offset + oi.rel_offsets[keep - 1] if keep else None
    for pos, h in seg.headers(start):
        base = h[H_BASE]
        last = base + h[H_LAST_DELTA]
        if pos == start and indexed_last is not None:
            ok = last == indexed_last  # the batch the kept entry points at
        else:
            # offsets run on (gapless unless compacted); the CRC does not cover them
            ok = base >= walked_next and (base == walked_next or not seg.contiguous)
        if not ok:
            seg.unclean_reason = f"{seg.log_path}: batch at byte {pos} is out of sequence"
            return None
        if pos == 0:
            first_ts = h[H_MAX_TS]
        if last >= recovery_point:
            if base < recovery_point:
                seg.unclean_reason = (
                    f"{seg.log_path}: the recovery point {recovery_point} falls inside a batch"
                )
                return None
            position = pos
            break
        size = h[H_LENGTH] + LOG_OVERHEAD
        # The lead-in is where a clean load checks too (after the last index entry): an
        # index interval of batches, CRC-checked, so damage there is cut as it always was.
        if pos + size > seg.size or not batch_crc_ok(seg.read_bytes(pos, size)):
            seg.unclean_reason = f"{seg.log_path}: batch at byte {pos} of {seg.size} fails its checks"
            return None
        if h[H_MAX_TS] > max_ts:
            max_ts, max_ts_offset = h[H_MAX_TS], last
        walked_end, walked_next = pos + size, last + 1
    if position < 0:
        # no batch at or past the recovery point: the segment must end exactly there
        if walked_end != seg.size or walked_next != recovery_point:
            seg.unclean_reason = (
                f"{seg.log_path}: its batches end at offset {walked_next}, byte {walked_end} "
                f"of {seg.size}, not at the recovery point {recovery_point}"
            )
            return None
        position = walked_end
    # Forget the index entries at or past the recovery point: they are rebuilt by the scan.
    changed = keep < len(oi) or time_keep < len(seg.time_index)
    if keep < len(oi):
        oi.truncate_to_position(oi.positions[keep])
    seg.time_index.truncate_to_rel_offset(rel)
    last_time = seg.time_index.last_entry()
    seg.max_timestamp, seg.offset_of_max_timestamp = NO_TIMESTAMP, -1
    if last_time is not None:
        seg.max_timestamp, seg.offset_of_max_timestamp = last_time[0], seg.base_offset + last_time[1]
    if max_ts > seg.max_timestamp:
        seg.max_timestamp, seg.offset_of_max_timestamp = max_ts, max_ts_offset
    # Segment._index counts the bytes since the last index entry written.
    seg.bytes_since_last_index = position - start
    seg.next_offset = recovery_point
    end, next_offset, _ = seg._scan(position, True, rebuild=True, on_epoch=on_epoch)
    seg.next_offset = next_offset
    cut = end != seg.size
    if cut:
        os.ftruncate(seg.fd, end)
        seg.size = end
    if start == 0 or first_ts is not None:
        seg.first_batch_timestamp = first_ts
    else:
        seg._load_first_timestamp()  # one header (the segment's first), for segment.ms
    return cut, position - start, end - position, changed


def index_last_batch(seg: Segment) -> None:
    """Give the segment's last batch an offset index entry (at roll and at shutdown), so the
    next start walks and checks that one batch rather than everything after the last
    interval entry (the first batch of a segment is never indexed, and a segment of a few
    large batches may have no entry at all)."""
    start = seg.offset_index.last_position()
    last_pos, last_h = -1, None
    for pos, h in seg.headers(start):
        last_pos, last_h = pos, h
    if last_h is None or (len(seg.offset_index) and last_pos <= start):
        return
    if seg.offset_index.is_full:
        return
    seg.offset_index.append(last_h[H_BASE] + last_h[H_LAST_DELTA] - seg.base_offset, last_pos)


def load_segments(
    directory: Path,
    bases: list[int],
    config: LogConfig,
    now_ms: int,
    recovery_point: int,
    allow_gaps: bool,
    on_epoch: OnEpoch,
    protect_below: int | None = None,
) -> LoadResult:
    """Open the segments at `bases` (sorted), trusting those below the recovery point and
    recovering the rest (see the module's docstring). A torn or corrupt batch cuts its segment
    there and deletes the segments after it; below `protect_below` it raises LogDamaged
    instead and leaves every file as it was."""
    segments = [Segment(directory, base, config, now_ms) for base in bases]
    if allow_gaps:
        for seg in segments:
            seg.contiguous = False
    result = LoadResult(segments)
    # The segment holding the recovery point and all after it may hold unflushed data.
    first_dirty = max(0, bisect.bisect_right(bases, recovery_point) - 1) if bases else 0
    i = 0
    while i < len(segments):
        seg = segments[i]
        is_last = i == len(segments) - 1
        reason = ""
        ok = False
        if i < first_dirty:
            ok = seg.load_clean(check_crc=False)
            reason = seg.unclean_reason
            result.bytes_checked += _tail_after_index(seg) if ok else 0
        elif i == first_dirty and is_last and (
            protect_below is not None or recovery_point <= seg.base_offset
        ):
            # Shut down cleanly (or flushed to the end): indexes are checked, the batches
            # after the last index entry CRC-checked, and the end must be the recovery point.
            ok = seg.load_clean(check_crc=True)
            reason = seg.unclean_reason
            if ok and seg.next_offset == recovery_point:
                result.bytes_checked += _tail_after_index(seg)
            else:
                ok = False
        size_before = seg.size
        cut = False
        if not ok and not reason and i == first_dirty and protect_below is None \
                and recovery_point > seg.base_offset:
            # the segment holding the recovery point: a clean shutdown ends exactly there
            partial = recover_from(seg, recovery_point, on_epoch)
            if partial is not None:
                ok = True
                cut, below, past, changed = partial
                result.bytes_checked += below
                result.bytes_recovered += past
                if cut or past or changed:
                    result.recovered = True
                    result.rebuilt.append(seg)
            else:
                reason = seg.unclean_reason
        if not ok:
            result.recovered = True
            result.rebuilt.append(seg)
            size_before = seg.size
            try:
                cut = seg.recover(on_epoch, protect_below)
            except SegmentDamaged as exc:
                for other in segments:
                    other.close()
                raise LogDamaged(
                    f"{exc}, below offset {protect_below} known to be flushed",
                    exc.path, exc.offset,
                ) from exc
            if i < first_dirty:
                result.bytes_checked += size_before
            else:
                result.bytes_recovered += size_before
            if reason:
                # a segment below the recovery point (or a clean one) had to be rebuilt
                log.warning("%s; rebuilt the indexes of segment %d of %s from its batches",
                            reason, seg.base_offset, directory.name)
            elif protect_below is None:
                # (the metadata log, opened with a floor, is scanned whole at every start)
                log.info("%s: recovering unflushed segment %d (recovery point %d)",
                         directory, seg.base_offset, recovery_point)
        if cut:
            log.warning(
                "%s: segment %d has a torn or corrupt batch at byte %d (offset %d); "
                "cut %d bytes there",
                directory, seg.base_offset, seg.size, seg.next_offset, size_before - seg.size,
            )
            for dropped in segments[i + 1 :]:
                log.warning("%s: deleted segment %d, which followed the corruption",
                            directory, dropped.base_offset)
                dropped.close()
                dropped.delete_files()
            del segments[i + 1 :]
        if i < len(segments) - 1:
            if seg in result.rebuilt:
                index_last_batch(seg)  # as the roll that made it inactive did
            seg.on_become_inactive()
        i += 1
    return result


def remove_orphan_indexes(directory: Path, orphans: list[int]) -> None:
    """Index files without their .log are leftovers of a deleted segment."""
    for orphan in orphans:
        log.info("%s: removing the index files of segment %d, whose .log is gone",
                 directory, orphan)
        for suffix in (".index", ".timeindex"):
            with contextlib.suppress(FileNotFoundError):
                (directory / f"{orphan:020d}{suffix}").unlink()

