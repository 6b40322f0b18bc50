"""Finding records by timestamp in a log's segments (ListOffsets by time, and the max-timestamp
lookup): the time index narrows the scan to a position, then batch headers are skipped by their
max timestamp, and only the one batch the answer lies in is decoded."""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.protocol.records import BatchHeader, decode_records
from odradek.storage.log_lock import locked
from odradek.storage.segment import H_BASE, H_LAST_DELTA, H_LENGTH, H_MAX_TS, NO_TIMESTAMP, Segment

__all__ = ["TimestampLookup"]


class TimestampLookup:
    """The by-timestamp lookups of a Log (mixed into it; they take the log's lock)."""

    if TYPE_CHECKING:
        import threading

        lock: threading.RLock
        _segments: list[Segment]
        _log_start_offset: int

    @locked
    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the earliest record whose timestamp is >= `timestamp`, at or
        after the log start offset; None when there is none."""
        lso = self._log_start_offset
        for seg in self._segments:
            if seg.max_timestamp < timestamp or seg.next_offset <= lso:
                continue
            found = self._find_in_segment(seg, timestamp, lso)
            if found is not None:
                return found
        return None

    def _find_in_segment(
        self, seg: Segment, timestamp: int, min_offset: int
    ) -> tuple[int, int] | None:
        start = 0
        rel = seg.time_index.lookup_below(timestamp)
        if rel is not None:
            start = seg.offset_index.lookup(rel)
        if min_offset > seg.base_offset:
            start = max(start, seg.offset_index.lookup(min_offset - seg.base_offset))
        for pos, h in seg.headers(start):
            if h[H_BASE] + h[H_LAST_DELTA] < min_offset or h[H_MAX_TS] < timestamp:
                continue
            header, data = self._read_batch(seg, pos, h)
            for record in decode_records(header, data):
                if record.offset >= min_offset and record.timestamp >= timestamp:
                    return record.offset, record.timestamp
        return None

    @locked
    def max_timestamp_offset(self) -> tuple[int, int]:
        """(offset, timestamp) of the record with the largest timestamp (the first such);
        (-1, -1) for a log without timestamps."""
        best: Segment | None = None
        for seg in self._segments:
            if seg.max_timestamp > NO_TIMESTAMP and (
                best is None or seg.max_timestamp > best.max_timestamp
            ):
                best = seg
        if best is None:
            return -1, -1
        ts = best.max_timestamp
        hit = best.find_batch(best.offset_of_max_timestamp)
        if hit is not None and hit[1][H_MAX_TS] == ts:
            header, data = self._read_batch(best, hit[0], hit[1])
            for record in decode_records(header, data):
                if record.timestamp == ts:
                    return record.offset, ts
        return best.offset_of_max_timestamp, ts


    def _read_batch(self, seg: Segment, position: int, h: tuple) -> tuple[BatchHeader, bytes]:
        data = seg.read_bytes(position, h[H_LENGTH] + 12)
        return BatchHeader.parse(data), data
