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

Writers are bounded too. The segment taking appends keeps its `.log` pinned (one pin, taken at
its first append, so the hot path makes no pool call), and it gives the pin back after ~10 s
with no append. That made a partition cost one fd while written, so 20,000 partitions written
within ten seconds needed 20,000 fds, more than this machine's limit with the node's own. The
pool therefore also keeps the holders of those long-lived pins in an LRU of at most
`max_writers` (`hold_writer`): one more asks the longest-held to let go (its next append
takes a pin again). An index file holds no pin at all: each entry (one per
`index.interval.bytes` of log) borrows its file for the write. So at any time the storage holds
at most `max_writers` write pins, `max_open` idle files, and the pins of reads in flight (a
fetch keeps a region's pin until the response is sent; reads of up to 32 KiB are copied at
once). `max_writers` defaults to what the soft limit leaves after the pool, a reserve for
connections and reads, and the node's own (`default_max_writers`).

Odradek-specific: the pool size is the broker config `log.open.files.max` (Kafka keeps every
segment file open, mmap'ing its indexes). The pool is process-wide (`DEFAULT_POOL`), because
the limit it protects, RLIMIT_NOFILE, is.
"""

from __future__ import annotations

import errno
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

DEFAULT_MAX_OPEN = 256
# fewest write pins the pool keeps, whatever the limit says (below this, appends to a handful
# of partitions would reopen their file each time)
MIN_WRITERS = 16


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

    def __init__(self, max_open: int = DEFAULT_MAX_OPEN, max_writers: int | None = None) -> None:
        self.max_open = max(1, max_open)
        # None: derived from the soft fd limit at each resize (the node raises the limit first)
        self._writers_given = max_writers
        self.max_writers = (
            max(1, max_writers) if max_writers is not None else default_max_writers(self.max_open)
        )
        # holders of long-lived write pins, the longest-held first: key -> let-go callback
        self._writers: OrderedDict[int, Callable[[], None]] = OrderedDict()
        self.writer_evictions = 0  # write pins taken back past max_writers, for tests/bench
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

    @property
    def writer_count(self) -> int:
        return len(self._writers)

    def resize(self, max_open: int, max_writers: int | None = None) -> None:
        """New bounds; `max_writers` None keeps one given before, else derives it from the
        soft fd limit as it is now."""
        if max_writers is not None:
            self._writers_given = max_writers
        victims: list[Callable[[], None]] = []
        with self._lock:
            self.max_open = max(1, max_open)
            given = self._writers_given
            self.max_writers = (
                max(1, given) if given is not None else default_max_writers(self.max_open)
            )
            self._evict()
            victims = self._evict_writers()
        for let_go in victims:
            let_go()

    def hold_writer(self, key: object, let_go: Callable[[], None]) -> None:
        """`key` now holds a long-lived pin (an active segment's `.log`). Past `max_writers`
        holders, the one that took its pin longest ago is asked to give it back (`let_go`,
        called outside the pool's lock; it must only drop its own reference, so an append in
        flight, which holds the pin in a local, keeps its fd). Called once per pin taken, not
        per append."""
        with self._lock:
            writers = self._writers
            writers[id(key)] = let_go
            writers.move_to_end(id(key))
            victims = self._evict_writers() if len(writers) > self.max_writers else []
        for fn in victims:
            fn()

    def forget_writer(self, key: object) -> None:
        """`key` gave its long-lived pin back by itself (idle, rolled, closed)."""
        if id(key) not in self._writers:  # most closes (20,000 at a shutdown): no lock
            return
        with self._lock:
            self._writers.pop(id(key), None)

    def _evict_writers(self) -> list[Callable[[], None]]:
        victims = []
        writers = self._writers
        while len(writers) > self.max_writers:
            victims.append(writers.popitem(last=False)[1])
            self.writer_evictions += 1
        return victims

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


# ---------------------------------------------------------------- the fd budget

# fds a node holds besides its partitions, the pool and its connections: listening sockets,
# the metadata log, the data-dir lock, checkpoint files being rewritten, the event loop's own
# (epoll, wake-up pipe), stdio and the log file.
BASE_FDS = 64
# Connections counted when `max.connections` is left at Kafka's default (Integer.MAX_VALUE),
# which is no figure to budget with.
UNBOUNDED_CONNECTION_RESERVE = 256
# Pins of reads in flight: a fetch keeps the pin of each region over 32 KiB until its response
# is sent (smaller reads are copied at once), so this many concurrent large regions fit.
READ_RESERVE = 256
_INT_MAX = 2**31 - 1


def _connections(max_connections: int) -> int:
    return UNBOUNDED_CONNECTION_RESERVE if max_connections >= _INT_MAX else max(0, max_connections)


def default_max_writers(pool_size: int, max_connections: int = _INT_MAX) -> int:
    """Write pins that fit the soft fd limit beside the pool, connections, reads and the
    node's own fds (at least MIN_WRITERS)."""
    spare = soft_fd_limit() - pool_size - _connections(max_connections) - READ_RESERVE - BASE_FDS
    return max(MIN_WRITERS, spare)


def fds_needed(
    partitions: int, pool_size: int, max_connections: int, max_writers: int | None = None
) -> int:
    """The fds a node needs at worst: one per partition being written, but no more than the
    pool's write pins (`max_writers`; default: what the soft limit leaves), the pool's idle
    files, reads in flight, its connections and its fixed ones."""
    writers = default_max_writers(pool_size, max_connections) if max_writers is None else max_writers
    return (min(partitions, writers) + pool_size + _connections(max_connections) + READ_RESERVE
            + BASE_FDS)


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
    it runs out of fds).

    A partition costs one fd while it is written, and the pool bounds those pins (its
    `max_writers`, what the limit leaves after the pool, a connection reserve of
    UNBOUNDED_CONNECTION_RESERVE, reads and the node's own): past that many, partitions
    cost no more fds, they take turns. So with `max.connections` at its default the budget
    always fits; it refuses when `max.connections` is set so high that it eats into the write
    pins the partitions need (fewer than one per partition), before anything is created."""

    def __init__(self, partitions: int, pool_size: int, max_connections: int) -> None:
        self.partitions = partitions
        self.pool_size = pool_size
        self.max_connections = max_connections
        self.limit = soft_fd_limit()
        # the pins the pool really allows (derived the same way when it was not set by hand)
        self.max_writers = max(MIN_WRITERS, DEFAULT_POOL.max_writers)

    def take(self, partitions: int) -> str | None:
        needed = fds_needed(self.partitions + partitions, self.pool_size, self.max_connections,
                            self.max_writers)
        if needed > self.limit:
            return (
                f"Creating {partitions} partition(s) would take this node to {needed} file "
                f"descriptors, over its limit (RLIMIT_NOFILE) of {self.limit}: one per partition "
                f"being written ({self.partitions} now, at most {self.max_writers} at a time), "
                f"log.open.files.max ({self.pool_size}), reads in flight ({READ_RESERVE}), "
                f"connections (max.connections) and its own. Raise the limit, lower "
                f"max.connections or delete topics."
            )
        self.partitions += partitions
        return None


DEFAULT_POOL = FilePool()
