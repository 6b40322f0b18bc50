"""The health of one log directory: Kafka's LogDirFailureChannel, plus a free-space floor.

Two states refuse writes to the logs of a directory:

- offline (Kafka's failed log directory): an fsync failed, so the page cache can no longer
  be trusted, or a torn write could not be cut back. It never comes back online while the
  process lives; listeners (the node) hear of it once and decide what to do (with no
  directory left online, stop: a restart recovers from what is on disk).
- low on space: the free space went below `log.dir.free.space.min.bytes` (odradek's key;
  Redpanda has the same floor), or a write failed with ENOSPC. Produces are refused with
  KAFKA_STORAGE_ERROR, which clients retry; reads, deletes, retention and compaction go on
  so space can be freed, and produces resume once a periodic statvfs sees the space back
  (after an ENOSPC, at least `RESUME_AFTER_ENOSPC_BYTES` of it).

The append path reads one attribute (`refusing`); statvfs runs on a monitor thread every
`check_interval_s`, never per request. One channel per directory, shared by its logs
(`channel_for`).
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path

from odradek.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

# The auto floor (log.dir.free.space.min.bytes = -1): the smaller of these.
AUTO_FLOOR_BYTES = 256 * 1024 * 1024
AUTO_FLOOR_FRACTION = 0.05
CHECK_INTERVAL_S = 0.25
# After a write failed for space, produces resume only once this much is free (or the floor,
# if more): a disk left a few KiB after the failed write is cut back would otherwise let one
# batch through per check and fail it again.
RESUME_AFTER_ENOSPC_BYTES = 1024 * 1024
# Repeated failures of one kind are logged once per this many seconds.
LOG_INTERVAL_S = 10.0

_SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


def _mib(n: int) -> str:
    return f"{n / 1048576:.1f} MiB"


class RateLimitedLog:
    """One log line per failure kind per interval, with the count of those left out: a disk
    that keeps failing must not become a traceback storm."""

    def __init__(self, logger: logging.Logger, interval_s: float = LOG_INTERVAL_S) -> None:
        self._log = logger
        self._interval = interval_s
        self._last: dict[str, tuple[float, int]] = {}
        self._lock = threading.Lock()

    def warning(self, kind: str, msg: str, *args: object) -> None:
        now = time.monotonic()
        with self._lock:
            last, dropped = self._last.get(kind, (-1e18, 0))
            if now - last < self._interval:
                self._last[kind] = (last, dropped + 1)
                return
            self._last[kind] = (now, 0)
        if dropped:
            msg += " (%d more like it since the last line)"
            args = (*args, dropped)
        self._log.warning(msg, *args)


class LogDirFailureChannel:
    def __init__(self, directory: Path, min_free_bytes: int = -1) -> None:
        self.directory = Path(directory)
        self.min_free_bytes = min_free_bytes
        # What the append path reads: offline or low on space.
        self.refusing = False
        self.offline = False
        self.offline_reason = ""
        self.low_space = False
        # low on space because a write failed with ENOSPC (not because of the floor)
        self.space_failed = False
        self._listeners: list[Callable[[Path, str], None]] = []
        self._lock = threading.Lock()
        self._monitor: threading.Thread | None = None
        self._stop = threading.Event()
        self.check_interval_s = CHECK_INTERVAL_S
        self.rate_limited = RateLimitedLog(log)

    # ----------------------------------------------------------------- space

    def free_bytes(self) -> tuple[int, int]:
        """(free bytes for unprivileged writers, total bytes) of the directory's filesystem."""
        st = os.statvfs(self.directory)
        return st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize

    def floor_bytes(self, total: int) -> int:
        if self.min_free_bytes >= 0:
            return self.min_free_bytes
        return min(AUTO_FLOOR_BYTES, int(total * AUTO_FLOOR_FRACTION))

    def check_space(self) -> bool:
        """statvfs once: refuse or resume produces. Returns whether space is low."""
        try:
            free, total = self.free_bytes()
        except OSError as exc:
            self.rate_limited.warning("statvfs", "%s: statvfs failed: %s", self.directory, exc)
            return self.low_space
        floor = self.floor_bytes(total)
        if self.space_failed:
            floor = max(floor, RESUME_AFTER_ENOSPC_BYTES)
        low = free < floor if floor > 0 else free == 0
        if not low:
            self.space_failed = False
        if low != self.low_space:
            if low:
                log.warning(
                    "%s: %s free, below log.dir.free.space.min.bytes (%s): refusing produces "
                    "with KAFKA_STORAGE_ERROR until space is freed",
                    self.directory, _mib(free), _mib(floor),
                )
            else:
                log.info(
                    "%s: %s free again (floor %s): accepting produces",
                    self.directory, _mib(free), _mib(floor),
                )
            self.low_space = low
            self._update()
        return low

    def start_monitor(self) -> None:
        """Check the free space every `check_interval_s` on a daemon thread."""
        if self._monitor is not None:
            return
        self.check_space()
        self._monitor = threading.Thread(
            target=self._run_monitor, name=f"free-space {self.directory.name}", daemon=True
        )
        self._monitor.start()

    def stop_monitor(self) -> None:
        self._stop.set()
        if self._monitor is not None:
            self._monitor.join(timeout=5)
            self._monitor = None
        self._stop = threading.Event()

    def _run_monitor(self) -> None:
        stop = self._stop
        while not stop.wait(self.check_interval_s):
            if self.offline:
                return
            self.check_space()

    # ---------------------------------------------------------------- failures

    def add_offline_listener(self, listener: Callable[[Path, str], None]) -> None:
        """`listener(directory, reason)` runs once, on the failing thread, when the directory
        goes offline."""
        self._listeners.append(listener)

    def _update(self) -> None:
        self.refusing = self.offline or self.low_space

    def mark_offline(self, reason: str) -> None:
        with self._lock:
            if self.offline:
                return
            self.offline = True
            self.offline_reason = reason
            self._update()
        log.error(
            "log directory %s is offline: %s. Its partitions answer KAFKA_STORAGE_ERROR; "
            "restart the node once the disk is healthy (recovery reads what is on disk)",
            self.directory, reason,
        )
        for listener in list(self._listeners):
            try:
                listener(self.directory, reason)
            except Exception:
                log.exception("log directory failure listener failed")

    def refused(self, what: str) -> KafkaError:
        """The error for a write refused because of this directory's state."""
        if self.offline:
            return KafkaError(
                ErrorCode.kafka_storage_error,
                f"log directory {self.directory} is offline ({self.offline_reason})",
            )
        return KafkaError(
            ErrorCode.kafka_storage_error,
            f"{what}: log directory {self.directory} is below its free space floor",
        )

    def write_failed(self, what: str, exc: OSError, torn: bool) -> KafkaError:
        """A write to `what` failed with `exc`; `torn`: its partial bytes could not be cut
        back (the directory goes offline). Returns the error for the request."""
        if torn:
            self.mark_offline(f"cutting back a failed write to {what} failed: {exc}")
            return self.refused(what)
        try:
            free = _mib(self.free_bytes()[0])
        except OSError:
            free = "unknown"
        self.rate_limited.warning(
            f"write:{exc.errno}",
            "%s: write to %s failed (%s), cut back to the last whole batch; %s free",
            self.directory, what, exc, free,
        )
        if exc.errno in _SPACE_ERRNOS and self._monitor is not None:
            # refuse at once; the monitor lets produces through again once space is back
            self.space_failed = True
            self.low_space = True
            self._update()
        return KafkaError(ErrorCode.kafka_storage_error, f"write to {what} failed: {exc}")

    def fsync_failed(self, what: str, exc: OSError) -> KafkaError:
        self.mark_offline(f"fsync of {what} failed: {exc}")
        return self.refused(what)


_channels: weakref.WeakValueDictionary[str, LogDirFailureChannel] = (
    weakref.WeakValueDictionary()
)
_channels_lock = threading.Lock()


def channel_for(directory: Path) -> LogDirFailureChannel:
    """The channel of a log directory (its logs and the node share it)."""
    key = os.path.realpath(directory)
    with _channels_lock:
        channel = _channels.get(key)
        if channel is None:
            channel = LogDirFailureChannel(Path(directory))
            _channels[key] = channel
        return channel
