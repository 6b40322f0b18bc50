"""All the partition logs of one data directory, and its checkpoint files.

Blocking by design (recovery, fsync, rmtree): the broker calls it from a thread.
`__cluster_metadata-0` lives in the same directory but belongs to the metadata
quorum, so it is not loaded here (as in Kafka).

Partition data goes only by a deletion. At start, once the metadata is known, `reconcile`
sorts the logs on disk: a log of a topic the metadata removed (a DeleteTopics cut short by
a crash) is deleted now; a log the metadata does not know at all is a stray: it is renamed
`<topic>-<partition>.<uuid>-stray` (Kafka 3.7's name), closed, reported and kept, so a new
topic of the same name starts in a fresh directory. Nothing removes a `-stray` directory
but an operator.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from odradek.storage.checkpoints import (
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    CheckpointError,
    fsync_dir,
    fsync_file,
    read_offsets,
    write_offsets,
)
from odradek.storage.cleaner.log_cleaner import CHECKPOINT_FILE as CLEANER_CHECKPOINT
from odradek.storage.cleaner.log_cleaner import CleanerConfig, LogCleaner
from odradek.storage.config import LogConfig
from odradek.storage.log import Log
from odradek.storage.log_dir import (
    PARTITION_METADATA,
    log_dir_name,
    parse_log_dir_name,
    read_partition_metadata,
    write_partition_metadata,
)

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return int(time.time() * 1000)


METADATA_LOG_DIR = "__cluster_metadata-0"
# fsyncs of new log directories run this many at a time: concurrent fsyncs share the
# filesystem's journal commits, so the batch costs a few commits instead of one each
SYNC_THREADS = 8
DELETE_SUFFIX = "-delete"
STRAY_SUFFIX = "-stray"
# what starting without each checkpoint means, for the line that says it was reset
_WITHOUT = {
    RECOVERY_POINT_CHECKPOINT: "every log is recovered from offset 0",
    LOG_START_OFFSET_CHECKPOINT: "each log starts at its first segment's base offset",
    CLEANER_CHECKPOINT: "every log is taken as never cleaned",
}


def _in_threads(fn: Callable[[Log], object], logs: list[Log]) -> None:
    """`fn` over `logs`, SYNC_THREADS at a time: their fsyncs overlap (shutdown of 20,000
    logs was 20,000 x 2 fsyncs in a row, issue 22). The first exception is raised once all
    are done."""
    if len(logs) < 2:
        for lg in logs:
            fn(lg)
        return
    with ThreadPoolExecutor(min(SYNC_THREADS, len(logs))) as pool:
        list(pool.map(fn, logs))


def stray_dir_name(dir_name: str) -> str:
    """`<topic>-<partition>.<uuid hex>-stray`, as Kafka 3.7+ names a stray log."""
    return f"{dir_name}.{uuid.uuid4().hex}{STRAY_SUFFIX}"


class LogManager:
    def __init__(
        self,
        log_dir: Path,
        default_config: LogConfig,
        skip_dirs: frozenset[str] = frozenset({METADATA_LOG_DIR}),
    ) -> None:
        self.log_dir = Path(log_dir)
        self.default_config = default_config
        self._skip = skip_dirs
        self._logs: dict[tuple[str, int], Log] = {}
        # Deleted logs whose fds stay open for `file.delete.delay.ms` (FileRegions in flight).
        self._doomed: list[tuple[int, Log]] = []
        # Creation/deletion/checkpoint may come from different worker threads.
        self._lock = threading.RLock()
        # Logs created since the last checkpoint, their directories not yet fsynced (`create`).
        self._unsynced: list[Log] = []
        self.cleaner: LogCleaner | None = None
        # retention activity (metrics): cleanup passes and the segments they deleted
        self.retention_runs = 0
        self.retention_deleted_segments = 0

    def start_cleaner(
        self,
        config: CleanerConfig | None = None,
        upper_bound: Callable[[Log], int | None] | None = None,
    ) -> LogCleaner:
        """Start the log cleaner thread over this manager's logs (Kafka's LogManager does the
        same at startup when `log.cleaner.enable`). `upper_bound` gives a log's last stable
        offset: nothing at or beyond it is cleaned."""
        if self.cleaner is None:
            self.cleaner = LogCleaner(
                self.log_dir, lambda: list(self._logs.values()), config, upper_bound=upper_bound
            )
            self.cleaner.start()
        return self.cleaner

    @property
    def logs(self) -> dict[tuple[str, int], Log]:
        return dict(self._logs)

    def _read_checkpoint(self, name: str) -> dict[tuple[str, int], int]:
        path = self.log_dir / name
        try:
            return read_offsets(path)
        except (CheckpointError, OSError) as exc:
            # Safe fallback: recovering from 0 rescans everything; a lost log start offset
            # only means old records stay readable until retention removes them.
            log.warning("%s is unreadable (%s); ignored: %s; it is rewritten at the next "
                        "checkpoint", path, exc, _WITHOUT.get(name, "its entries are lost"))
            return {}

    def load(
        self, config_for: Callable[[str], LogConfig] | None = None
    ) -> dict[tuple[str, int], Log]:
        """Open (recovering as needed) every `<topic>-<partition>` directory; remove `-delete` ones."""
        with self._lock:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            recovery_points = self._read_checkpoint(RECOVERY_POINT_CHECKPOINT)
            start_offsets = self._read_checkpoint(LOG_START_OFFSET_CHECKPOINT)
            # logs the cleaner has rewritten: their offsets may have gaps whatever the policy
            cleaned = self._read_checkpoint(CLEANER_CHECKPOINT)
            for path in sorted(self.log_dir.iterdir()):
                if not path.is_dir() or path.name in self._skip:
                    continue
                if path.name.endswith(DELETE_SUFFIX):
                    log.info("%s: left by a deletion cut short; removing it", path)
                    shutil.rmtree(path, ignore_errors=True)
                    continue
                if path.name.endswith(STRAY_SUFFIX):
                    log.warning("%s: stray log kept (not in the metadata); remove it by hand "
                                "once its data is not needed", path)
                    continue
                parsed = parse_log_dir_name(path.name)
                if parsed is None:
                    continue
                if parsed in self._logs:
                    continue
                config = config_for(parsed[0]) if config_for is not None else self.default_config
                began = time.monotonic()
                self._logs[parsed] = Log.open(
                    path,
                    config,
                    recovery_point=recovery_points.get(parsed, 0),
                    log_start_offset=start_offsets.get(parsed, 0),
                    allow_gaps=parsed in cleaned,
                )
                elapsed = time.monotonic() - began
                if elapsed > 1.0:
                    log.info("loaded %s in %.1f s", path.name, elapsed)
            return dict(self._logs)

    def reconcile(
        self, known: Mapping[tuple[str, int], uuid.UUID], removed_topic_ids: Collection[uuid.UUID]
    ) -> tuple[list[tuple[str, int]], list[Path]]:
        """Sort the loaded logs against the metadata (`known`: the partitions this node hosts
        and their topic ids). Logs of removed topics are deleted; logs the metadata does not
        know are renamed `-stray` and dropped from this manager. Returns (deleted, strays)."""
        deleted: list[tuple[str, int]] = []
        strays: list[Path] = []
        with self._lock:
            for key, lg in sorted(self._logs.items()):
                topic_id = lg.topic_id
                want = known.get(key)
                if want is not None and topic_id in (None, want):
                    continue
                if topic_id is not None and topic_id in removed_topic_ids:
                    log.info("%s: its topic (id %s) was deleted before a crash; finishing the "
                             "deletion", lg.dir, topic_id)
                    self.delete(*key)
                    deleted.append(key)
                    continue
                self._logs.pop(key)
                lg.close()
                target = lg.dir.with_name(stray_dir_name(lg.dir.name))
                lg.dir.rename(target)
                fsync_dir(self.log_dir)
                why = ("another topic of that name" if want is not None
                       else "no topic-partition of that name")
                log.warning("%s: not in the metadata (topic id %s; the metadata has %s); "
                            "renamed to %s, kept and not served", lg.dir, topic_id, why,
                            target.name)
                strays.append(target)
        return deleted, strays

    def get(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def create(
        self,
        topic: str,
        partition: int,
        topic_id: uuid.UUID | None = None,
        config: LogConfig | None = None,
    ) -> Log:
        """The log of (topic, partition), created when absent (Kafka's getOrCreateLog)."""
        with self._lock:
            existing = self._logs.get((topic, partition))
            if existing is not None:
                if config is not None:
                    existing.update_config(config)
                if topic_id is not None:
                    existing.assign_topic_id(topic_id)
                return existing
            path = self.log_dir / log_dir_name(topic, partition)
            # Issue 22: three fsyncs a partition (partition.metadata, its directory, the data
            # directory) made creating 20,000 partitions take minutes. As Kafka does since
            # 3.0.1 (partition.metadata written at creation, made durable by the next flush),
            # they are deferred to the next `checkpoint` (every 5 s), which makes them durable
            # in one batch before it writes a recovery point that names the log. A crash
            # before then loses at most the new directory or its partition.metadata: the
            # metadata recreates the one and the next open rewrites the other.
            if topic_id is not None:
                path.mkdir(parents=True, exist_ok=True)
                if read_partition_metadata(path) is None:
                    write_partition_metadata(path, topic_id, sync=False)
            new = Log.open(path, config or self.default_config, topic_id=topic_id)
            # the leader epoch the replica manager assigns next is deferred with the rest
            # (Kafka 3.7 writes leader-epoch-checkpoint without an fsync too, KAFKA-15046)
            new.epochs.sync = False
            self._unsynced.append(new)
            self._logs[(topic, partition)] = new
            return new

    def sync_new_logs(self) -> int:
        """Make the log directories created since the last call durable: their
        partition.metadata, the directories, and the data directory once. Outside the
        manager's lock (creation goes on meanwhile); returns how many were synced."""
        with self._lock:
            logs, self._unsynced = self._unsynced, []
        if not logs:
            return 0

        def sync(lg: Log) -> None:
            # from now on epoch changes are fsynced as they are written; one written before
            # this line is fsynced just below
            lg.epochs.sync = True
            try:
                fsync_file(lg.dir / PARTITION_METADATA)
                fsync_file(lg.dir / LEADER_EPOCH_CHECKPOINT)
                fsync_dir(lg.dir)
            except FileNotFoundError:  # deleted meanwhile
                pass

        if len(logs) == 1:
            sync(logs[0])
        else:
            with ThreadPoolExecutor(min(SYNC_THREADS, len(logs))) as pool:
                list(pool.map(sync, logs))
        fsync_dir(self.log_dir)
        return len(logs)

    def delete(self, topic: str, partition: int) -> None:
        """Close the log, rename its directory to `<dir>.<uuid>-delete`, then remove it. A crash
        between the two leaves a `-delete` directory that the next load removes."""
        with self._lock:
            existing = self._logs.pop((topic, partition), None)
            path = self.log_dir / log_dir_name(topic, partition)
            if existing is not None:
                if self.cleaner is not None:
                    self.cleaner.abort(existing)
                existing.abandon()
                self._doomed.append((_now_ms(), existing))
            self._close_doomed(_now_ms())
            if not path.exists():
                return
            doomed = path.with_name(f"{path.name}.{uuid.uuid4().hex}{DELETE_SUFFIX}")
            path.rename(doomed)
            fsync_dir(self.log_dir)
            shutil.rmtree(doomed, ignore_errors=True)

    def _close_doomed(self, now: int, force: bool = False) -> None:
        keep = []
        for when, lg in self._doomed:
            if force or now - when >= lg.config.file_delete_delay_ms:
                lg.close()
            else:
                keep.append((when, lg))
        self._doomed = keep

    def flush_dirty_logs(self, now_ms: int | None = None) -> None:
        """Kafka's flush scheduler: fsync logs whose `flush.ms` has passed since their last flush."""
        now = _now_ms() if now_ms is None else now_ms
        for lg in list(self._logs.values()):
            flush_ms = lg.config.flush_ms
            if flush_ms is not None and now - lg.last_flush_ms >= flush_ms:
                lg.flush()

    def release_idle_fds(self) -> int:
        """Active segments with no append since the last call give their fd back to the file
        pool (issue 22: an idle partition costs no fd). On the event loop, which appends.
        Returns how many were released."""
        released = 0
        for lg in list(self._logs.values()):
            if lg.is_closed:
                continue
            released += lg.active_segment.release_if_idle()
        return released

    def cleanup(self, now_ms: int | None = None) -> int:
        """Retention (delete policy) over every log; returns segments deleted."""
        now = _now_ms() if now_ms is None else now_ms
        total = 0
        for lg in list(self._logs.values()):
            total += lg.delete_retention_breached(now)
            lg.close_retired(now)
        with self._lock:
            self._close_doomed(now)
        self.retention_runs += 1
        self.retention_deleted_segments += total
        return total

    def checkpoint(self, flush: bool = True) -> None:
        """Write the recovery-point and log-start-offset checkpoints (flushing logs first, so the
        recovery points written are the log end offsets). New log directories are made
        durable first: a recovery point must not name a log whose directory could vanish."""
        self.sync_new_logs()
        with self._lock:
            logs = dict(self._logs)
            if flush:
                behind = [lg for lg in logs.values() if lg.recovery_point < lg.log_end_offset]
                _in_threads(Log.flush, behind)  # the fsyncs
                for lg in logs.values():
                    lg.flush()  # the rest: at most a directory fsync each
            write_offsets(
                self.log_dir / RECOVERY_POINT_CHECKPOINT,
                {k: v.recovery_point for k, v in logs.items()},
            )
            write_offsets(
                self.log_dir / LOG_START_OFFSET_CHECKPOINT,
                {k: v.log_start_offset for k, v in logs.items()},
            )

    def close(self) -> None:
        """Flush, checkpoint and close every log (a clean shutdown: the next load scans nothing)."""
        if self.cleaner is not None:
            self.cleaner.stop()
        with self._lock:
            self.checkpoint(flush=True)
            _in_threads(Log.close, list(self._logs.values()))
            self._logs.clear()
            self._close_doomed(0, force=True)
