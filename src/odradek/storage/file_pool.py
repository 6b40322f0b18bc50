"""A bounded pool of open files: inactive segments borrow an fd and give it back.

A node with thousands of partitions cannot keep every segment file open (issue 22: each
partition held three fds, and a fresh node wedged at about 6,600 partitions). Segments that
are not taking appends hold a `PooledFile` instead of an fd; the pool opens it on demand and
keeps at most `max_open` of them open, closing the least recently used.

An fd in use must never be closed under its user: a pending sendfile of a fetch response
would otherwise read whatever file reuses the number. `PooledFile.pinned_fd()` returns a
`PinnedFd`, an `int` that holds a pin on its file for as long as the object lives. It is
passed wherever an fd number goes (`os.pread`, `os.sendfile`, a `FileRegion`), and the pin
goes when the last reference does (CPython frees it at once), so an fd held by a response
being sent stays open until the response is gone. Eviction skips pinned files; the pool may
then run over `max_open` for a while, never closing what is in use. A file closed (its
segment deleted) while pinned is closed by its last unpin.

Odradek-specific: the pool size is the broker config `log.open.files.max` (Kafka keeps every
segment file open, mmap'ing its indexes). The pool is process-wide (`DEFAULT_POOL`), because
the limit it protects, RLIMIT_NOFILE, is.
"""

from __future__ import annotations

import errno
import os
import threading
from collections import OrderedDict
from pathlib import Path

DEFAULT_MAX_OPEN = 256


class PinnedFd(int):
    """An fd number that keeps its file open (pinned in its pool) while this object lives."""

    _file: PooledFile | None

    def __new__(cls, fd: int, file: PooledFile) -> PinnedFd:
        obj = super().__new__(cls, fd)
        obj._file = file
        return obj

    def __del__(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            file.pool._unpin(file)


class PooledFile:
    """One file the pool may open and close: its path (renames follow it), its open flags."""

    __slots__ = ("__weakref__", "closed", "fd", "flags", "path", "pins", "pool")

    def __init__(self, pool: FilePool, path: Path, flags: int) -> None:
        self.pool = pool
        self.path = path
        self.flags = flags
        self.fd = -1  # open only while in the pool's LRU (or pinned)
        self.pins = 0
        self.closed = False

    def pinned_fd(self) -> PinnedFd:
        """The open fd, pinned until the returned object is dropped."""
        return self.pool._pin(self)

    def close(self) -> None:
        """For good (the segment is closed or deleted); a pinned fd closes at its last unpin."""
        self.pool._close(self)

    def __repr__(self) -> str:
        return f"PooledFile({self.path}, fd={self.fd}, pins={self.pins})"


class FilePool:
    """Open files not in use wait in an LRU of at most `max_open`; pinned files (in use) are
    outside it, so eviction only ever looks at the LRU's cold end."""

    def __init__(self, max_open: int = DEFAULT_MAX_OPEN) -> None:
        self.max_open = max(1, max_open)
        # open and unpinned, least recently used first
        self._lru: OrderedDict[int, PooledFile] = OrderedDict()
        self._pinned_open = 0  # open files with pins (not in the LRU)
        # a PinnedFd may die (unpin) inside a locked call: reentrant. Flushes and the cleaner
        # borrow fds from worker threads while the event loop reads.
        self._lock = threading.RLock()
        self.opens = 0  # files opened so far (a reopen after eviction counts), for tests/bench

    def file(self, path: Path, flags: int = os.O_RDWR) -> PooledFile:
        """A file of this pool, not opened yet."""
        return PooledFile(self, path, flags)

    @property
    def open_count(self) -> int:
        return len(self._lru) + self._pinned_open

    def resize(self, max_open: int) -> None:
        with self._lock:
            self.max_open = max(1, max_open)
            self._evict()

    def _pin(self, f: PooledFile) -> PinnedFd:
        with self._lock:
            if f.closed:
                raise OSError(errno.EBADF, f"{f.path}: file closed")
            if f.pins == 0:
                if f.fd < 0:
                    # opened under the lock: a second borrower must not open it twice
                    f.fd = os.open(f.path, f.flags, 0o644)
                    self.opens += 1
                else:
                    del self._lru[id(f)]
                self._pinned_open += 1
            f.pins += 1
            return PinnedFd(f.fd, f)

    def _unpin(self, f: PooledFile) -> None:
        with self._lock:
            f.pins -= 1
            if f.pins > 0:
                return
            self._pinned_open -= 1
            if f.closed:
                self._drop(f)
                return
            self._lru[id(f)] = f
            self._evict()

    def _close(self, f: PooledFile) -> None:
        with self._lock:
            f.closed = True
            if f.pins == 0:
                self._lru.pop(id(f), None)
                self._drop(f)

    @staticmethod
    def _drop(f: PooledFile) -> None:
        if f.fd >= 0:
            fd, f.fd = f.fd, -1
            os.close(fd)

    def _evict(self) -> None:
        """Close least recently used files until at most max_open wait unused."""
        lru = self._lru
        while len(lru) > self.max_open:
            _, f = lru.popitem(last=False)
            self._drop(f)

    def close_all(self) -> None:
        """Close every unpinned file (tests, shutdown); the files can be opened again."""
        with self._lock:
            while self._lru:
                _, f = self._lru.popitem(last=False)
                self._drop(f)


DEFAULT_POOL = FilePool()


# ---------------------------------------------------------------- the fd budget

# fds a node holds besides its partitions, the pool and its connections: listening sockets,
# the metadata log, the data-dir lock, checkpoint files being rewritten, the event loop's own
# (epoll, wake-up pipe), stdio and the log file.
BASE_FDS = 64
# Connections counted when `max.connections` is left at Kafka's default (Integer.MAX_VALUE),
# which is no figure to budget with.
UNBOUNDED_CONNECTION_RESERVE = 256
_INT_MAX = 2**31 - 1


def fds_needed(partitions: int, pool_size: int, max_connections: int) -> int:
    """The fds a node needs at worst: one per partition (its active segment's .log, once
    written), the pool's files, its connections and its fixed ones."""
    connections = (
        UNBOUNDED_CONNECTION_RESERVE if max_connections >= _INT_MAX else max(0, max_connections)
    )
    return partitions + pool_size + connections + BASE_FDS


def soft_fd_limit() -> int:
    """This process's RLIMIT_NOFILE soft limit (a large number when unlimited)."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return _INT_MAX if soft == resource.RLIM_INFINITY else soft


def raise_fd_limit() -> tuple[int, int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit, as far as the kernel allows; returns
    (soft before, soft now, hard)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    new = soft
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or hard > soft):
        for target in (hard, 1 << 20):  # an unlimited hard limit: the kernel's nr_open cap
            if target == resource.RLIM_INFINITY:
                continue
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            except (ValueError, OSError):
                continue
            new = target
            break
    return soft, new, hard


class FdBudget:
    """Partitions counted against the fd limit, for a CreateTopics or CreatePartitions: each
    `take` either counts its partitions or says why they do not fit (Kafka has no such check;
    it runs out of fds)."""

    def __init__(self, partitions: int, pool_size: int, max_connections: int) -> None:
        self.partitions = partitions
        self.pool_size = pool_size
        self.max_connections = max_connections
        self.limit = soft_fd_limit()

    def take(self, partitions: int) -> str | None:
        needed = fds_needed(self.partitions + partitions, self.pool_size, self.max_connections)
        if needed > self.limit:
            return (
                f"Creating {partitions} partition(s) would take this node to {needed} file "
                f"descriptors, over its limit (RLIMIT_NOFILE) of {self.limit}: one per partition "
                f"({self.partitions} now), log.open.files.max ({self.pool_size}), connections "
                f"(max.connections) and its own. Raise the limit or delete topics."
            )
        self.partitions += partitions
        return None
