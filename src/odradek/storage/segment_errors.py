"""What a segment raises when its bytes or a write to it fail."""

from __future__ import annotations

from pathlib import Path

__all__ = ["SegmentDamaged", "SegmentTorn", "SegmentWriteError"]


class SegmentDamaged(Exception):
    """A segment whose batches fail their checks below an offset known to be durable."""

    def __init__(self, path: Path, position: int, offset: int, size: int) -> None:
        super().__init__(
            f"{path}: damaged batch at byte {position} of {size} (offset {offset})"
        )
        self.path = path
        self.position = position
        self.offset = offset
        self.size = size


class SegmentWriteError(OSError):
    """An append failed and was undone: the segment ends where it did before."""

    def __init__(self, path: Path, position: int, cause: OSError) -> None:
        super().__init__(cause.errno, f"{cause.strerror or cause} (cut back to byte {position})")
        self.path = path
        self.position = position
        self.cause = cause


class SegmentTorn(SegmentWriteError):
    """An append failed and cutting it back failed too: the file may hold torn bytes."""

    def __init__(
        self, path: Path, position: int, cause: OSError, truncate_error: OSError
    ) -> None:
        super().__init__(path, position, cause)
        self.truncate_error = truncate_error
