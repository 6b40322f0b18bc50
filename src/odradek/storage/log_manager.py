"""All the partition logs of a node's log directories (`log.dirs`, JBOD), and their
checkpoint files (one set per directory, as Kafka).

A new log goes to the online directory with the fewest logs (log_placement). Each
directory fails alone (its LogDirFailureChannel): a checkpoint or log that cannot be
written takes only that directory offline, and its logs answer KAFKA_STORAGE_ERROR while
the others go on. A partition found in two directories at start is refused, as Kafka
refuses it. Replicas moving between directories (AlterReplicaLogDirs) have a `-future`
log beside the current one until they are swapped (log_move).

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
import os
import shutil
import stat
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from odradek.protocol.errors import ErrorCode, KafkaError
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
    future_dir_name,
    log_dir_name,
    parse_future_dir_name,
    parse_log_dir_name,
    read_partition_metadata,
    write_partition_metadata,
)
from odradek.storage.log_dir_failure import channel_for
from odradek.storage.log_placement import NoOnlineLogDir, choose_log_dir

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


class DuplicateLogDirs(Exception):
    """A partition's log is in two log directories: the node refuses to start (Kafka)."""


def _flush_quietly(lg: Log) -> None:
    """Flush one log; a failed fsync has already taken its directory offline (and said
    so), which must not stop the other directories' checkpoints."""
    try:
        lg.flush()
    except KafkaError:
        pass


def stray_dir_name(dir_name: str) -> str:
    """`<topic>-<partition>.<uuid hex>-stray`, as Kafka 3.7+ names a stray log."""
    return f"{dir_name}.{uuid.uuid4().hex}{STRAY_SUFFIX}"


class LogManager:
    def __init__(
        self,
        log_dir: Path,
        default_config: LogConfig,
        skip_dirs: frozenset[str] = frozenset({METADATA_LOG_DIR}),
        log_dirs: Sequence[Path] = (),
    ) -> None:
        # the first directory (the data dir: the metadata log), then
        # the other `log.dirs`, each once
        self.log_dir = Path(log_dir)
        self.log_dirs: list[Path] = [self.log_dir]
        seen = {os.path.realpath(self.log_dir)}
        for d in log_dirs:
            if os.path.realpath(d) not in seen:
                seen.add(os.path.realpath(d))
                self.log_dirs.append(Path(d))
        self.default_config = default_config
        self._skip = skip_dirs
        self._logs: dict[tuple[str, int], Log] = {}
        # `-future` logs of replicas moving to another directory (AlterReplicaLogDirs)
        self._futures: dict[tuple[str, int], Log] = {}
        # logs (current and future) per log directory, kept on every add, remove and move:
        # placement reads it instead of walking every log per new one (quadratic at scale)
        self._counts: dict[Path, int] = {}
        # where a partition not hosted yet goes when it comes (AlterReplicaLogDirs first)
        self._preferred: dict[tuple[str, int], Path] = {}
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
            # each directory's cleaner-offset-checkpoint names its own logs (as Kafka)
            self.cleaner = LogCleaner(
                self.log_dirs, lambda: list(self._logs.values()), config, upper_bound=upper_bound
            )
            self.cleaner.start()
        return self.cleaner

    @property
    def logs(self) -> dict[tuple[str, int], Log]:
        return dict(self._logs)

    @property
    def futures(self) -> dict[tuple[str, int], Log]:
        return dict(self._futures)

    def is_online(self, directory: Path) -> bool:
        return not channel_for(directory).offline

    def offline_dirs(self) -> set[Path]:
        return {d for d in self.log_dirs if channel_for(d).offline}

    def dir_of(self, lg: Log) -> Path:
        """The log directory (one of `log_dirs`) holding `lg`."""
        return lg.dir.parent

    def find_dir(self, path: str | Path) -> Path | None:
        """The log directory `path` names (as given or resolved), None if it is not one."""
        want = os.path.realpath(path)
        for d in self.log_dirs:
            if os.path.realpath(d) == want:
                return d
        return None

    # list(...) copies in one step: worker threads add and remove logs meanwhile
    def logs_in(self, directory: Path) -> dict[tuple[str, int], Log]:
        return {k: lg for k, lg in list(self._logs.items()) if lg.dir.parent == directory}

    def futures_in(self, directory: Path) -> dict[tuple[str, int], Log]:
        return {k: lg for k, lg in list(self._futures.items()) if lg.dir.parent == directory}

    def set_preferred_dir(self, topic: str, partition: int, directory: Path) -> None:
        """Place (topic, partition) in `directory` when it is created here (Kafka's
        maybeUpdatePreferredLogDir)."""
        with self._lock:
            self._preferred[(topic, partition)] = directory

    def _count(self, directory: Path, delta: int) -> None:
        self._counts[directory] = self._counts.get(directory, 0) + delta

    def log_counts(self) -> dict[Path, int]:
        """Logs (current and future) per log directory."""
        return {d: n for d, n in self._counts.items() if n}

    def _next_dir(self, key: tuple[str, int], is_new: bool = True) -> Path:
        counts = self._counts
        offline = self.offline_dirs()
        if offline and not is_new:
            # Kafka refuses too: the partition's log may be in the offline directory, and a
            # fresh one here would become a second copy once it is back
            raise KafkaError(ErrorCode.kafka_storage_error,
                             f"cannot create a log for {key[0]}-{key[1]}: log director"
                             f"{'y' if len(offline) == 1 else 'ies'} "
                             f"{', '.join(map(str, sorted(offline)))} offline")
        try:
            return choose_log_dir(self.log_dirs, counts, offline,
                                  self._preferred.pop(key, None))
        except NoOnlineLogDir as exc:
            raise KafkaError(ErrorCode.kafka_storage_error, str(exc)) from None

    def dir_failed(self, directory: Path, what: str, exc: BaseException) -> None:
        """An I/O error on `directory` outside a log's own writes (a checkpoint, a listing):
        it goes offline, as Kafka's LogDirFailureChannel takes it."""
        channel_for(directory).mark_offline(f"{what} failed: {exc}")

    def _read_checkpoint(self, name: str, directory: Path | None = None) -> dict[tuple[str, int], int]:
        path = (self.log_dir if directory is None else directory) / name
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
        """Open (recovering as needed) every `<topic>-<partition>` directory of every online
        log directory; remove `-delete` ones. A directory that cannot be read goes offline
        (its logs are not served); a partition found in two raises DuplicateLogDirs."""
        with self._lock:
            # each directory's cleaner checkpoint names its own logs (before JBOD placement
            # the first directory's named all: read it too)
            cleaned: dict[tuple[str, int], int] = {}
            for directory in self.log_dirs:
                if self.is_online(directory):
                    cleaned.update(self._read_checkpoint(CLEANER_CHECKPOINT, directory))
            for directory in self.log_dirs:
                if not self.is_online(directory):
                    log.warning("%s is offline: its logs are not loaded", directory)
                    continue
                try:
                    self._load_dir(directory, config_for, cleaned)
                except OSError as exc:
                    log.error("%s: cannot load its logs: %s", directory, exc)
                    self.dir_failed(directory, "loading its logs", exc)
            return dict(self._logs)

    def _load_dir(self, directory: Path, config_for: Callable[[str], LogConfig] | None,
                  cleaned: Mapping[tuple[str, int], int]) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        recovery_points = self._read_checkpoint(RECOVERY_POINT_CHECKPOINT, directory)
        start_offsets = self._read_checkpoint(LOG_START_OFFSET_CHECKPOINT, directory)
        for path in sorted(directory.iterdir()):
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
            future = parse_future_dir_name(path.name)
            parsed = future or parse_log_dir_name(path.name)
            if parsed is None:
                continue
            table = self._futures if future else self._logs
            previous = table.get(parsed)
            if previous is not None:
                if previous.dir == path:
                    continue
                # Kafka's words: a failure while a move swapped the two copies
                raise DuplicateLogDirs(
                    f"Duplicate log directories for {parsed[0]}-{parsed[1]} are found in "
                    f"both {path} and {previous.dir}. It is likely because log directory "
                    "failure happened while broker was replacing current replica with "
                    "future replica. Recover broker from this failure by manually deleting "
                    "one of the two directories for this partition. It is recommended to "
                    "delete the partition in the log directory that is known to have "
                    "failed recently.")
            config = config_for(parsed[0]) if config_for is not None else self.default_config
            began = time.monotonic()
            table[parsed] = Log.open(
                path,
                config,
                recovery_point=recovery_points.get(parsed, 0),
                log_start_offset=start_offsets.get(parsed, 0),
                allow_gaps=parsed in cleaned,
            )
            self._count(directory, 1)
            elapsed = time.monotonic() - began
            if elapsed > 1.0:
                log.info("loaded %s in %.1f s", path.name, elapsed)
            if future:
                log.info("%s: a move to %s was under way; it resumes", path.name, directory)

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
                self._count(lg.dir.parent, -1)
                lg.close()
                target = lg.dir.with_name(stray_dir_name(lg.dir.name))
                lg.dir.rename(target)
                fsync_dir(lg.dir.parent)
                why = ("another topic of that name" if want is not None
                       else "no topic-partition of that name")
                log.warning("%s: not in the metadata (topic id %s; the metadata has %s); "
                            "renamed to %s, kept and not served", lg.dir, topic_id, why,
                            target.name)
                strays.append(target)
            for key in [k for k in self._futures if k not in self._logs]:
                # a copy of a log that is gone: nothing to move any more
                log.info("%s: its partition is not hosted here; removing the copy",
                         self._futures[key].dir)
                self.abort_future(*key)
        return deleted, strays

    def get(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def create(
        self,
        topic: str,
        partition: int,
        topic_id: uuid.UUID | None = None,
        config: LogConfig | None = None,
        is_new: bool = True,
    ) -> Log:
        """The log of (topic, partition), created when absent (Kafka's getOrCreateLog).
        `is_new`: the partition was just created, so no offline directory can hold its log;
        otherwise no log is created while a directory is offline (KAFKA_STORAGE_ERROR)."""
        with self._lock:
            existing = self._logs.get((topic, partition))
            if existing is not None:
                if config is not None:
                    existing.update_config(config)
                if topic_id is not None:
                    existing.assign_topic_id(topic_id)
                return existing
            path = self._next_dir((topic, partition), is_new) / log_dir_name(topic, partition)
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
            self._count(path.parent, 1)
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
        for directory in {lg.dir.parent for lg in logs}:
            fsync_dir(directory)
        return len(logs)

    def delete(self, topic: str, partition: int) -> None:
        """Close the log, rename its directory to `<dir>.<uuid>-delete`, then remove it. A crash
        between the two leaves a `-delete` directory that the next load removes."""
        with self._lock:
            self.abort_future(topic, partition)
            existing = self._logs.pop((topic, partition), None)
            if existing is not None:
                self._count(existing.dir.parent, -1)
            path = (existing.dir if existing is not None
                    else self._find_on_disk(log_dir_name(topic, partition)))
            if existing is not None:
                if self.cleaner is not None:
                    self.cleaner.abort(existing)
                existing.abandon()
                self._doomed.append((_now_ms(), existing))
            self._close_doomed(_now_ms())
            if path is None or not path.exists() or not self.is_online(path.parent):
                return  # an offline directory's copy goes when the disk is back
            doomed = path.with_name(f"{path.name}.{uuid.uuid4().hex}{DELETE_SUFFIX}")
            path.rename(doomed)
            fsync_dir(path.parent)
            shutil.rmtree(doomed, ignore_errors=True)

    def _find_on_disk(self, name: str) -> Path | None:
        for directory in self.log_dirs:
            if (directory / name).exists():
                return directory / name
        return None

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
            if lg.dir_state.offline:
                continue
            total += lg.delete_retention_breached(now)
            lg.close_retired(now)
        with self._lock:
            self._close_doomed(now)
        self.retention_runs += 1
        self.retention_deleted_segments += total
        return total

    def checkpoint(self, flush: bool = True) -> None:
        """Write each online directory's recovery-point and log-start-offset checkpoints
        (flushing logs first, so the recovery points written are the log end offsets). New
        log directories are made durable first: a recovery point must not name a log whose
        directory could vanish. A directory whose checkpoint cannot be written goes offline;
        the others are written all the same."""
        self.sync_new_logs()
        with self._lock:
            by_dir: dict[Path, dict[tuple[str, int], Log]] = {d: {} for d in self.log_dirs}
            for k, lg in (*self._logs.items(), *self._futures.items()):
                by_dir.setdefault(lg.dir.parent, {})[k] = lg
            if flush:
                every = [lg for logs in by_dir.values() for lg in logs.values()]
                behind = [lg for lg in every if lg.recovery_point < lg.log_end_offset]
                _in_threads(_flush_quietly, behind)  # the fsyncs
                for lg in every:
                    _flush_quietly(lg)  # the rest: at most a directory fsync each
            for directory, logs in by_dir.items():
                if not self.is_online(directory):
                    continue
                written = write_offsets(directory / RECOVERY_POINT_CHECKPOINT,
                                        {k: v.recovery_point for k, v in logs.items()})
                written &= write_offsets(directory / LOG_START_OFFSET_CHECKPOINT,
                                         {k: v.log_start_offset for k, v in logs.items()})
                if not written:
                    self._check_dir(directory)

    def _check_dir(self, directory: Path) -> None:
        """A checkpoint write failed (and was logged). A full disk keeps the directory
        online (produces are refused until space is back, log_dir_failure); a directory
        that is gone, unreadable or no longer a directory goes offline, as Kafka takes a
        directory whose checkpoint raised an IOException."""
        try:
            st = os.stat(directory)
            os.listdir(directory)
        except OSError as exc:
            self.dir_failed(directory, "writing its checkpoints", exc)
            return
        if not stat.S_ISDIR(st.st_mode):
            self.dir_failed(directory, "writing its checkpoints",
                            NotADirectoryError(f"{directory} is not a directory"))

    def close(self) -> None:
        """Flush, checkpoint and close every log (a clean shutdown: the next load scans nothing)."""
        if self.cleaner is not None:
            self.cleaner.stop()
        with self._lock:
            self.checkpoint(flush=True)
            _in_threads(Log.close, [*self._logs.values(), *self._futures.values()])
            self._logs.clear()
            self._futures.clear()
            self._counts.clear()
            self._close_doomed(0, force=True)

    # ----------------------------------------------------- moves between directories

    def create_future(self, topic: str, partition: int, destination: Path) -> Log:
        """The `-future` log of (topic, partition) in `destination`, created when absent
        (Kafka's getOrCreateLog with isFuture). A future elsewhere is dropped first: the
        last AlterReplicaLogDirs wins."""
        with self._lock:
            current = self._logs.get((topic, partition))
            if current is None:
                raise KafkaError(ErrorCode.replica_not_available,
                                 f"{topic}-{partition} has no log on this node")
            existing = self._futures.get((topic, partition))
            if existing is not None:
                if existing.dir.parent == destination:
                    return existing
                self.abort_future(topic, partition)
            if not self.is_online(destination):
                raise KafkaError(ErrorCode.kafka_storage_error,
                                 f"log directory {destination} is offline")
            path = destination / future_dir_name(topic, partition)
            path.mkdir(parents=True)
            if current.topic_id is not None:
                write_partition_metadata(path, current.topic_id)
            future = Log.open(path, current.config, topic_id=current.topic_id)
            future.truncate_fully_and_start_at(current.log_start_offset)
            fsync_dir(destination)
            self._futures[(topic, partition)] = future
            self._count(destination, 1)
            return future

    def abort_future(self, topic: str, partition: int) -> None:
        """Drop the `-future` log of (topic, partition), if any, and its files."""
        with self._lock:
            future = self._futures.pop((topic, partition), None)
            if future is not None:
                self._count(future.dir.parent, -1)
        if future is None:
            return
        future.close()
        if self.is_online(future.dir.parent):
            shutil.rmtree(future.dir, ignore_errors=True)

    def swap_future(self, topic: str, partition: int, blocking: bool = True) -> Log | None:
        """Replace the current log of (topic, partition) by its future log, which must hold
        every offset the current log holds (the caller checked, where no append can land
        in between). As Kafka: the future is renamed into place first, then the current
        log is renamed `-delete` and removed (its fds stay open for reads in flight). A
        crash between the two renames leaves the partition in two directories, which the
        next start refuses. Returns the new current log; None, having done nothing, when
        not `blocking` and the manager is busy (a checkpoint's fsyncs on another thread: the
        event loop does not wait for them)."""
        key = (topic, partition)
        if not self._lock.acquire(blocking=blocking):
            return None
        try:
            future = self._futures.pop(key)
            current = self._logs[key]
            if self.cleaner is not None:
                self.cleaner.abort(current)
            # the epochs the current log knows but no batch carried yet (a leader's new
            # epoch before its first append)
            for epoch, start in current.epochs.entries:
                if future.epochs.start_offset_of(epoch) is None and start <= future.log_end_offset:
                    future.epochs.assign(epoch, start)
            if current.log_start_offset > future.log_start_offset:
                future.delete_records_before(current.log_start_offset)
            future.flush()
            future.close()
            target = future.dir.parent / log_dir_name(topic, partition)
            future.dir.rename(target)
            fsync_dir(target.parent)
            current.abandon()
            self._doomed.append((_now_ms(), current))
            doomed = current.dir.with_name(
                f"{current.dir.name}.{uuid.uuid4().hex}{DELETE_SUFFIX}")
            current.dir.rename(doomed)
            fsync_dir(doomed.parent)
            # a clean close just above: opening reads no batch beyond the last segment's
            new = Log.open(target, current.config, recovery_point=future.log_end_offset,
                           log_start_offset=future.log_start_offset,
                           topic_id=current.topic_id, allow_gaps=current._allow_gaps)
            self._logs[key] = new
            # the future became the current log in its directory; the old copy's is gone
            self._count(doomed.parent, -1)
        finally:
            self._lock.release()
        # the old copy's files go on another thread: the swap runs on the event loop (a crash
        # meanwhile leaves a `-delete` directory, which the next start removes)
        threading.Thread(target=shutil.rmtree, args=(doomed, True), daemon=True,
                         name=f"delete {doomed.name}").start()
        log.info("%s-%d moved from %s to %s (log end offset %d)", topic, partition,
                 doomed.parent, target.parent, new.log_end_offset)
        return new

    def logs_and_futures(self) -> Iterable[tuple[tuple[str, int], Log, bool]]:
        """(key, log, is_future) of every log, current and future."""
        for k, lg in list(self._logs.items()):
            yield k, lg, False
        for k, lg in list(self._futures.items()):
            yield k, lg, True
