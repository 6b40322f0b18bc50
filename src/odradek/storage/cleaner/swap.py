"""File suffixes of the cleaner's segment swap, and their recovery at log open (Kafka's scheme).

A cleaned segment is written as `<base>.log.cleaned` (+ `.index.cleaned`, `.timeindex.cleaned`)
and fsynced; renaming its log file to `.swap` is the commit point. Then the segments it replaces
are renamed to `.deleted` (removed after `file.delete.delay.ms`) and the `.swap` files lose their
suffix. A crash at any step leaves one of these states, which `recover_swaps` resolves:

- `.cleaned` files: the swap never committed, the old segments are whole: drop them.
- `<base>.log.swap`: committed. Old segments whose base offset falls in the swap segment's
  offset range may or may not still be there: remove them, then rename the swap into place.
  Index files of that range are removed too and rebuilt by the log's recovery.
- `.deleted` files: leftovers of a swap or of retention: remove (done by the log's loader).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import struct
from pathlib import Path

log = logging.getLogger(__name__)

CLEANED = ".cleaned"
SWAP = ".swap"
DELETED = ".deleted"

SEGMENT_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex")
_SWAP_LOG = re.compile(r"^(\d{20})\.log\.swap$")
_SEGMENT_FILE = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex)$")
# base offset (int64), batch length (int32): enough to walk batches
_FRAME = struct.Struct(">qi")
_MIN_BATCH = 61
_LAST_DELTA_AT = 23


def stem(base_offset: int) -> str:
    return f"{base_offset:020d}"


def next_offset_of(path: Path, base_offset: int) -> int:
    """The offset after the last whole batch of a segment file (its base when it has none)."""
    nxt = base_offset
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        pos = 0
        while pos + _MIN_BATCH <= size:
            f.seek(pos)
            head = f.read(_MIN_BATCH)
            if len(head) < _MIN_BATCH:
                break
            base, length = _FRAME.unpack_from(head, 0)
            total = length + 12
            if total < _MIN_BATCH or pos + total > size:
                break
            (delta,) = struct.unpack_from(">i", head, _LAST_DELTA_AT)
            nxt = max(nxt, base + delta + 1)
            pos += total
    return nxt


def recover_swaps(directory: Path) -> list[int]:
    """Resolve an interrupted cleaner swap in a log directory (before its segments load).
    Returns the base offsets of the swap segments put in place."""
    names = os.listdir(directory)
    swaps: list[int] = []
    for name in names:
        path = directory / name
        if name.endswith(CLEANED):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        elif name.endswith(SWAP):
            m = _SWAP_LOG.match(name)
            if m:
                swaps.append(int(m.group(1)))
            else:  # index files of a swap: rebuilt from the log instead
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
    if not swaps:
        return []
    segments: dict[int, list[str]] = {}
    for name in os.listdir(directory):
        m = _SEGMENT_FILE.match(name)
        if m:
            segments.setdefault(int(m.group(1)), []).append(name)
    for base in sorted(swaps):
        swap_path = directory / f"{stem(base)}.log{SWAP}"
        # An empty cleaned segment still replaces the old one at its own base offset.
        end = max(next_offset_of(swap_path, base), base + 1)
        for old_base, files in sorted(segments.items()):
            if base <= old_base < end:
                for name in files:
                    with contextlib.suppress(FileNotFoundError):
                        (directory / name).unlink()
                del segments[old_base]
        os.replace(swap_path, directory / f"{stem(base)}.log")
        log.warning("%s: completed an interrupted cleaner swap of segment %d", directory, base)
    return sorted(swaps)
