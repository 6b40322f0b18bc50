"""The aborted-transaction index: `<segment base>.txnindex` files in Kafka's format.

Each entry (34 bytes, big-endian) is version int16 (0), producer id int64, first offset
int64, last offset int64 (the abort marker) and last stable offset int64, appended to the
file of the segment that was active when the marker was written. The entries are also
kept in memory, in marker order, for read_committed fetches: a fetch returns the aborted
transactions that overlap the range it reads, so the client can drop their records.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import re
import struct
from pathlib import Path
from typing import NamedTuple

log = logging.getLogger(__name__)

_ENTRY = struct.Struct(">hqqqq")
_FILE = re.compile(r"^(\d{20})\.txnindex$")


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def index_path(directory: Path, base_offset: int) -> Path:
    return directory / f"{base_offset:020d}.txnindex"


class TxnIndex:
    def __init__(self, directory: Path) -> None:
        self.dir = Path(directory)
        # (segment base, entry) in marker order; last offsets grow
        self.entries: list[tuple[int, AbortedTxn]] = []
        self._last_offsets: list[int] = []
        # the longest transaction seen: bounds how far back an overlap search must look
        self._max_span = 0

    @classmethod
    def load(cls, directory: Path) -> TxnIndex:
        idx = cls(directory)
        bases = []
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(directory):
                m = _FILE.match(entry.name)
                if m is None:
                    continue
                base = int(m.group(1))
                if not (Path(directory) / f"{base:020d}.log").exists():
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry.path)  # a deleted segment's leftover
                    continue
                bases.append(base)
        for base in sorted(bases):
            data = index_path(idx.dir, base).read_bytes()
            whole = len(data) - len(data) % _ENTRY.size
            for version, pid, first, last, lso in _ENTRY.iter_unpack(data[:whole]):
                if version != 0:
                    log.warning("%s: txnindex %d has an entry of version %d; ignoring the rest",
                                directory, base, version)
                    break
                idx._add(base, AbortedTxn(pid, first, last, lso))
        return idx

    def _add(self, base: int, entry: AbortedTxn) -> None:
        self.entries.append((base, entry))
        self._last_offsets.append(entry.last_offset)
        self._max_span = max(self._max_span, entry.last_offset - entry.first_offset)

    def append(self, segment_base: int, entry: AbortedTxn) -> None:
        if self._last_offsets and entry.last_offset <= self._last_offsets[-1]:
            return  # already indexed (a rebuild after recovery met it again)
        self._add(segment_base, entry)
        with open(index_path(self.dir, segment_base), "ab") as f:
            f.write(_ENTRY.pack(0, *entry))

    def truncate_from(self, offset: int) -> None:
        """Forget entries whose marker is at or after `offset` (the log is cut there)."""
        keep = bisect.bisect_left(self._last_offsets, offset)
        if keep == len(self.entries):
            return
        dropped = {b for b, _ in self.entries[keep:]}
        self.entries = self.entries[:keep]
        self._last_offsets = self._last_offsets[:keep]
        for base in dropped:
            data = b"".join(_ENTRY.pack(0, *e) for b, e in self.entries if b == base)
            path = index_path(self.dir, base)
            if data:
                path.write_bytes(data)
            else:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()

    def collect(self, start: int, end: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions overlapping
        [start, end): what a read_committed fetch of that range must be told."""
        lo = bisect.bisect_left(self._last_offsets, start)
        out = []
        for _, e in self.entries[lo:]:
            if e.first_offset >= end:
                if e.last_offset - self._max_span >= end:
                    break
                continue
            out.append((e.producer_id, e.first_offset))
        return out
