"""The worker: runs each connector the config topic holds as one Spark streaming query, and
keeps connect-status and the offsets in step with the queries.

One thread reconciles what connect-configs asks for (connectors, their target states, restart
requests) with the queries running here, whenever that topic changes and once a second, and
watches the queries: a failed query's tasks go FAILED with the error as their trace; after
each completed micro-batch its end offset is written where Connect keeps offsets (a source's
into connect-offsets, a sink's into the group `connect-<name>`). Each start uses a new Spark
checkpoint and begins from those stored offsets, so Kafka's topics, not a local directory,
say where a connector resumes (and KIP-875's offset edits take effect).
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from odradek.connect import records, sink_offsets
from odradek.connect.cluster import Cluster
from odradek.connect.plugins import ConnectorPlugin, NotReady, Plugins, RunContext
from odradek.connect.store import ConnectStore

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger(__name__)

SessionFactory = Callable[[], "SparkSession"]

# Failures of Spark's machinery, not of the connector: a Python process that did not connect
# back to the JVM in time (Spark waits 10 s; a loaded machine was seen to need more). Like
# Kafka's RetriableException, the worker restarts the query, at most TRANSIENT_RETRIES times
# in a row, before the tasks go FAILED.
TRANSIENT = ("Python worker failed to connect back", "CANNOT_OPEN_SOCKET")
TRANSIENT_RETRIES = 10


@dataclass
class Running:
    plugin: ConnectorPlugin
    config: dict[str, str]
    tasks: int
    checkpoint: str
    query: StreamingQuery | None = None
    last_batch: int = -1
    last_end: Any = None
    failed: bool = False  # the query ended with an error (tasks FAILED)
    connector_failed: bool = False  # the query could not even start
    state: str = "RUNNING"  # RUNNING, PAUSED, STOPPED
    waiting: str = ""  # why the query is not started yet (NotReady); retried every turn
    transient: int = 0  # restarts after Spark's own transient failures, see TRANSIENT
    extra: dict[str, Any] = field(default_factory=dict)
    stopped: threading.Event = field(default_factory=threading.Event)
    reconfigure: str = ""  # why the connector asked for a new start (set from its thread)


class Worker:
    def __init__(self, store: ConnectStore, plugins: Plugins, cluster: Cluster, worker_id: str,
                 session: SessionFactory, state_dir: Path,
                 worker_config: Mapping[str, str]) -> None:
        self.store = store
        self.plugins = plugins
        self.cluster = cluster
        self.worker_id = worker_id
        self.session_factory = session
        self.state_dir = state_dir
        self.worker_config = dict(worker_config)
        self.running: dict[str, Running] = {}
        self.generation = 0
        self._spark: SparkSession | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._restarts_seen = 0
        # In a group: the connectors this worker was assigned (None: not in a group, run
        # all), and the view of connect-configs its last JoinGroup carried.
        self.assigned: set[str] | None = None
        self.member: Any = None
        self._joined_view: dict[str, int] | None = None
        self._revoked = threading.Event()

    # ---- life cycle -------------------------------------------------------------------------
    def start(self) -> None:
        with self.store.lock:
            gens = [int(s.get("generation", 0)) for s in self.store.status.connectors.values()]
            # Restart requests already in the topic were for workers before this one.
            self._restarts_seen = len(self.store.configs.restarts)
        # Until the group says (and without one): a new generation per worker start orders
        # our statuses after any an earlier worker wrote.
        self.generation = max(gens, default=0) + 1
        self._thread = threading.Thread(target=self._loop, name="connect-worker", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    # ---- the group's callbacks (on the group thread) ----------------------------------------
    def config_view(self) -> tuple[int, dict[str, int]]:
        """(config topic position, {connector: task count}): what a JoinGroup carries and
        what the leader assigns from."""
        with self.store.lock:
            offset = self.store.positions.get((self.store.topics.config, 0), 0)
            view = {n: len(self.store.configs.task_configs.get(n, []))
                    for n in self.store.configs.connectors}
        self._joined_view = view
        return offset, view

    def owners(self) -> dict[str, str]:
        """connector -> URL of the worker connect-status says runs it (for a sticky plan)."""
        with self.store.lock:
            return {n: f"http://{s['worker_id']}" for n, s in self.store.status.connectors.items()
                    if s.get("worker_id")}

    def assign(self, assignment: Any) -> None:
        self.generation = int(self.member.generation) if self.member is not None else 0
        self.assigned = set(assignment.connectors)
        self.wake()

    def revoke(self) -> None:
        """Stop everything before joining again (returns when stopped): the membership was
        lost, so these connectors may run elsewhere already."""
        self._revoked.clear()
        self.assigned = set()
        self.wake()
        if not self._revoked.wait(120):
            log.warning("connectors still running after 120 s of revocation")

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=120)
        for name in list(self.running):
            self._halt(name)
        if self._spark is not None:
            self._spark.stop()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(1.0)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                self.reconcile()
                self.watch()
            except Exception:  # one bad turn must not end the worker
                log.exception("worker turn failed")

    # ---- what should run --------------------------------------------------------------------
    def reconcile(self) -> None:
        with self.store.lock:
            configs = {n: dict(c) for n, c in self.store.configs.connectors.items()}
            targets = {n: self.store.configs.target_state(n) for n in configs}
            tasks = {n: len(self.store.configs.task_configs.get(n, [])) for n in configs}
            restarts = self.store.configs.restarts[self._restarts_seen:]
            self._restarts_seen = len(self.store.configs.restarts)
            view = {n: len(self.store.configs.task_configs.get(n, [])) for n in configs}
        if (self.member is not None and self._joined_view is not None
                and view != self._joined_view):
            # Connectors or their tasks changed since the group last assigned: rebalance.
            self._joined_view = view
            self.member.request_rejoin()
        for name in [n for n in self.running if n not in configs]:
            self._halt(name)
            self._forget_status(name)
            del self.running[name]
        if self.assigned is not None:
            for name in [n for n in self.running if n not in self.assigned]:
                self._halt(name)  # another worker owns it now; its status is theirs to write
                del self.running[name]
            configs = {n: c for n, c in configs.items() if n in self.assigned}
            if not self.assigned and not self.running:
                self._revoked.set()
        for name, config in configs.items():
            run = self.running.get(name)
            target = targets[name]
            if target == "STARTED":
                if run is None or run.config != config or run.state != "RUNNING":
                    self._restart(name, config, tasks[name])
            elif run is None or run.state != _held(target):
                self._hold(name, config, target, tasks[name])
        for name, include_tasks, only_failed in restarts:
            run = self.running.get(name)
            if name not in configs or targets[name] != "STARTED":
                continue
            failed = run is not None and (run.connector_failed or (include_tasks and run.failed))
            if only_failed and not failed:
                continue
            self._restart(name, configs[name], tasks[name])

    def _restart(self, name: str, config: dict[str, str], tasks: int,
                 waiting: str = "") -> None:
        old = self.running.get(name)
        if old is not None:
            self._halt(name)
        plugin = self.plugins.find(config.get("connector.class", ""))
        checkpoint = str(self.state_dir / "checkpoints" / f"{name}-{uuid.uuid4().hex}")
        run = Running(plugin=plugin or ConnectorPlugin(), config=config, tasks=tasks,
                      checkpoint=checkpoint, waiting=waiting)
        self.running[name] = run
        if plugin is None:
            run.connector_failed = True
            self._status(name, run, "FAILED",
                         f"no connector class {config.get('connector.class')!r} on this worker")
            return
        try:
            if self._spark is None:
                self._spark = self.session_factory()
            offsets: Any
            if plugin.type == "source":
                offsets = self.store.snapshot_offsets(name)
            else:
                offsets = sink_offsets.read(self.cluster, name)
            ctx = RunContext(spark=self._spark, name=name, cluster=self.cluster,
                             config=config, worker_config=self.worker_config,
                             checkpoint=checkpoint, offsets=offsets,
                             tasks=int(config.get("tasks.max", "1")), stopped=run.stopped,
                             reconfigure=lambda reason: self._reconfigure(run, reason))
            run.query = plugin.start(ctx)
            _settle(run.query)
        except NotReady as exc:
            if not run.waiting:
                log.info("connector %s waits: %s", name, exc)
                self._status(name, run, "RUNNING")
            run.waiting = str(exc)
            return
        except Exception as exc:
            log.warning("connector %s failed to start: %s", name, exc)
            run.connector_failed = True
            self._status(name, run, "FAILED", _trace(exc))
            return
        log.info("connector %s started (%s)", name, plugin.class_name)
        self._status(name, run, "RUNNING")

    def _reconfigure(self, run: Running, reason: str) -> None:
        run.reconfigure = reason
        self.wake()

    def _retry(self, name: str, run: Running) -> None:
        """Start a waiting connector's query again (its RUNNING status already stands)."""
        self._restart(name, run.config, run.tasks, run.waiting)

    def _hold(self, name: str, config: dict[str, str], target: str, tasks: int) -> None:
        """PAUSED or STOPPED: no query runs; the offsets stay where the last batch left them."""
        if name in self.running:
            self._halt(name)
        plugin = self.plugins.find(config.get("connector.class", "")) or ConnectorPlugin()
        run = Running(plugin=plugin, config=config, tasks=tasks, checkpoint="",
                      state=_held(target))
        self.running[name] = run
        self._status(name, run, run.state)

    def _halt(self, name: str) -> None:
        run = self.running.get(name)
        if run is None:
            return
        run.stopped.set()
        if run.query is None:
            return
        try:
            if run.query.isActive:
                run.query.stop()
            self._sync_offsets(name, run)
        except Exception:
            log.exception("stopping connector %s", name)
        run.query = None
        if run.checkpoint:
            shutil.rmtree(run.checkpoint, ignore_errors=True)

    # ---- watching ---------------------------------------------------------------------------
    def watch(self) -> None:
        for name, run in list(self.running.items()):
            if run.waiting and run.query is None and run.state == "RUNNING":
                self._retry(name, run)
            query = run.query
            if query is None or run.failed:
                continue
            if run.reconfigure and self.running.get(name) is run:
                log.info("connector %s restarts: %s", name, run.reconfigure)
                self._restart(name, run.config, run.tasks)
                continue
            self._sync_offsets(name, run)
            if not query.isActive:
                error = query.exception()
                if (error is not None and run.transient < TRANSIENT_RETRIES
                        and any(mark in str(error) for mark in TRANSIENT)):
                    log.warning("connector %s: Spark failed transiently, restarting the query: "
                                "%s", name, str(error).splitlines()[0])
                    retries = run.transient + 1
                    self._restart(name, run.config, run.tasks)
                    self.running[name].transient = retries
                    continue
                run.failed = True
                trace = _trace(error) if error is not None else "the query stopped"
                log.warning("connector %s failed: %s", name, trace.splitlines()[0])
                self._status(name, run, "RUNNING", task_state="FAILED", trace=trace)

    def _sync_offsets(self, name: str, run: Running) -> None:
        """Write the end offset of the newest finished micro-batch, if it moved."""
        assert run.query is not None
        newest = None
        for progress in run.query.recentProgress:
            data = _as_dict(progress)
            if int(data.get("batchId", -1)) > run.last_batch and data.get("sources"):
                newest = data
        if newest is None:
            return
        run.last_batch = int(newest["batchId"])
        run.transient = 0  # it made progress: the next transient failure counts from zero
        end = newest["sources"][0].get("endOffset")
        if isinstance(end, str):
            end = json.loads(end)
        if end is None or end == run.last_end:
            return
        if run.plugin.type == "source":
            self.store.write_offsets(name, run.plugin.source_offset(run.config, end))
        else:
            committed = {t: {int(p): int(o) for p, o in parts.items()}
                         for t, parts in end.items()}
            sink_offsets.write(self.cluster, name, committed)
        run.last_end = end

    # ---- connect-status ---------------------------------------------------------------------
    def _status(self, name: str, run: Running, state: str, trace: str | None = None,
                task_state: str | None = None) -> None:
        connector_trace = trace if task_state is None else None
        self.store.write_status(records.status_connector_key(name),
                                records.status_value(state, self.worker_id, self.generation,
                                                     connector_trace))
        for task in range(run.tasks):
            self.store.write_status(
                records.status_task_key(name, task),
                records.status_value(task_state or state, self.worker_id, self.generation,
                                     trace))

    def _forget_status(self, name: str) -> None:
        # Kafka writes a DESTROYED status as a tombstone.
        with self.store.lock:
            tasks = list(self.store.status.tasks.get(name, {}))
        self.store.write_status(records.status_connector_key(name), None)
        for task in tasks:
            self.store.write_status(records.status_task_key(name, task), None)


def _settle(query: StreamingQuery, limit: float = 120.0) -> None:
    """Wait until a new query has started its source before anything else starts.

    A Python data source's planning process must connect back to the JVM within Spark's
    socket timeout; several starting at once on a busy machine were seen to miss it (the
    query then fails with "Python worker failed to connect back")."""
    deadline = time.monotonic() + limit
    while query.isActive and time.monotonic() < deadline:
        if not str(query.status.get("message", "")).startswith("Initializing"):
            return
        time.sleep(0.2)


def _held(target: str) -> str:
    return "PAUSED" if target == "PAUSED" else "STOPPED"


def _trace(exc: BaseException) -> str:
    text = "".join(traceback.format_exception(exc)).strip()
    desc = getattr(exc, "desc", None) or str(exc)
    return text if desc in text else f"{desc}\n{text}"


def _as_dict(progress: Any) -> dict[str, Any]:
    if isinstance(progress, dict):
        return progress
    raw = getattr(progress, "json", None)
    if isinstance(raw, str):
        return dict(json.loads(raw))
    return dict(json.loads(str(progress)))
