"""A data directory belongs to one process: an exclusive OS lock on `<data-dir>/.lock`.

Kafka takes the same lock (`FileLock` on `.lock` in every log directory) so that two
brokers never append to the same segments. The lock is `flock(LOCK_EX | LOCK_NB)` on an
open descriptor: the kernel drops it when the holder exits, however it exits, so a crash
never leaves a stale lock behind. The holder's PID is written into the file only so that
a refused process can name it; the file's content is never trusted for the locking itself.

The file stays after a normal release (a later start reuses it). `release(remove=True)`
unlinks it while still holding the lock, for a start that failed and must leave the
directory as it found it; a process that locked the old inode in between notices that
the path no longer leads to the inode it holds, and tries again.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path
from types import TracebackType

__all__ = ["LOCK_FILE", "DataDirLock", "DataDirLocked", "acquire_data_dir_lock"]

LOCK_FILE = ".lock"
# a lock file unlinked under us is retried this often before giving up (a start/stop race)
_ATTEMPTS = 20


class DataDirLocked(Exception):
    """Another process holds the lock of `path`; `pid` is the holder's (None if unreadable)."""

    def __init__(self, path: Path, pid: int | None) -> None:
        self.path = Path(path)
        self.pid = pid
        holder = f"process {pid}" if pid is not None else "another process"
        super().__init__(f"data directory {self.path} is in use by {holder} "
                         f"(lock {self.path / LOCK_FILE})")


class DataDirLock:
    """The held lock of one data directory; release() or leave the `with` block to drop it."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = Path(path)
        self._fd: int | None = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self, remove: bool = False) -> None:
        """Drop the lock (idempotent); `remove` unlinks the lock file first, still locked."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if remove:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path / LOCK_FILE)
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def __enter__(self) -> DataDirLock:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"DataDirLock({str(self.path)!r}, held={self.held})"


def acquire_data_dir_lock(path: Path) -> DataDirLock:
    """Lock `path` (an existing directory) for this process, without waiting.

    Raises DataDirLocked when another process holds it, OSError when the lock file cannot
    be created or opened (a missing or unwritable directory).
    """
    path = Path(path)
    lock_path = path / LOCK_FILE
    for _ in range(_ATTEMPTS):
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            pid = _read_pid(fd)
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise DataDirLocked(path, pid) from None
            raise
        if not _same_file(fd, lock_path):
            # the holder removed the file before letting go: lock the file now at the path
            os.close(fd)
            continue
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            os.close(fd)
            raise
        return DataDirLock(path, fd)
    raise OSError(errno.EAGAIN, f"the lock file {lock_path} keeps being replaced")


def _same_file(fd: int, lock_path: Path) -> bool:
    try:
        on_path = os.stat(lock_path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (on_path.st_dev, on_path.st_ino) == (held.st_dev, held.st_ino)


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None
