"""One node: metadata quorum + controller, logs, partitions and the Kafka listener.

`run_node` is what `odradek serve` calls. Start-up order: config (every key,
listeners included, checked before anything else), the data directory (type,
permissions, its `.lock`), the listening sockets (bound, not yet served), then
identity (meta.properties), metadata (replay, register this broker), logs
(recovery), partitions, coordinators, and serving. A refusal before the first
write is one line and exit code 2, and leaves the data directory as it was.
SIGTERM/SIGINT stop it cleanly: stop accepting, let in-flight requests finish,
checkpoint and close the logs, exit 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import logging
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from odradek.broker.acceptor import ConnectionLimits
from odradek.broker.admin_config import admin_listeners_of, check_admin_config
from odradek.broker.apis import Dispatcher, advertised_apis
from odradek.broker.config import (
    ConfigError,
    Listener,
    advertised_of,
    check_config,
    controller_listener_names,
    event_loop_of,
    has_quorum,
    listener_securities,
    listeners_of,
    roles_of,
)
from odradek.broker.context import BrokerContext
from odradek.broker.handlers import admin
from odradek.broker.log_dirs import (
    MOVE_RATE,
    directory_ids,
    log_dirs_of,
    prepare_log_dirs,
    stop_watching,
    watch_log_dirs,
)
from odradek.broker.logging_setup import log_levels, logs_to_stderr, setup_logging
from odradek.broker.node_admin import NodeAdmin
from odradek.broker.process_exit import BoundedExecutor, exit_unless_held, halt_unless_stopped
from odradek.broker.schema_validation import SchemaValidation, registry_urls
from odradek.broker.server import Server
from odradek.broker.server_properties import load_config
from odradek.broker.startup import Prepared, StartRefused, prepare
from odradek.coordinator.startup import start_coordinators
from odradek.metadata.bootstrap import (
    BOOTSTRAP_CHECKPOINT,
    bootstrap_records,
    read_bootstrap_checkpoint,
    write_bootstrap_checkpoint,
)
from odradek.metadata.config.broker_configs import BrokerConfig
from odradek.metadata.config.log_config import log_config
from odradek.metadata.controller import Controller, load_image
from odradek.metadata.meta_properties import (
    MetaProperties,
    MetaPropertiesError,
    ensure_meta_properties,
    read_meta_properties,
)
from odradek.metadata.quorum import MetadataLogDamaged
from odradek.metadata.raft.kraft import KRaftQuorum
from odradek.replication.manager import ReplicaManager
from odradek.storage.cleaner.log_cleaner import CleanerConfig
from odradek.storage.file_pool import DEFAULT_POOL, fds_needed, raise_fd_limit
from odradek.storage.log_dir_failure import channel_for
from odradek.storage.log_manager import DuplicateLogDirs, LogManager

log = logging.getLogger("odradek.node")

CHECKPOINT_INTERVAL_S = 5.0
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")
# longest a node that must stop after a log directory failure tries to stop gracefully before
# it halts (Kafka halts at once; the graceful stop hands leadership over first)
DIR_FAILURE_STOP_S = 60.0


def advertised_listeners(config: BrokerConfig) -> list[Listener]:
    """advertised.listeners (default: listeners) without the controller's (clients never get
    those); an empty or wildcard host becomes our name."""
    out = []
    controllers = set(controller_listener_names(config)) if has_quorum(config) else set()
    for lst in advertised_of(config):
        if lst.name in controllers:
            continue
        host = lst.host
        if host in ("", "0.0.0.0", "::"):
            host = socket.getfqdn()
        out.append(Listener(lst.name, host, lst.port))
    return out


def identity_of(data_dir: Path, config: BrokerConfig) -> MetaProperties:
    """meta.properties of the data directory. A node in a quorum starts only from a directory
    `odradek storage format` prepared (as Kafka); a single node formats itself at first start."""
    node_id = config.node_id
    try:
        if has_quorum(config):
            meta = read_meta_properties(data_dir)
            if meta is None:
                raise StartRefused(
                    f"data directory {data_dir} is not formatted (no meta.properties); a node "
                    "with controller.quorum.voters starts only from a formatted directory: run "
                    f"`odradek storage format --cluster-id ID --data-dir {data_dir}` with the "
                    "same config first")
            if meta.node_id != node_id:
                raise MetaPropertiesError(
                    f"Stored node id {meta.node_id} doesn't match configured node id {node_id} "
                    f"in {data_dir / 'meta.properties'}")
            return meta
        fresh = read_meta_properties(data_dir) is None
        meta = ensure_meta_properties(data_dir, node_id)
        if fresh and not (data_dir / BOOTSTRAP_CHECKPOINT).exists():
            write_bootstrap_checkpoint(data_dir, bootstrap_records())
        return meta
    except MetaPropertiesError as exc:
        raise StartRefused(f"data directory {data_dir}: {exc}") from None


class _TopicConfigs:
    """LogConfig of a topic from the current image, cached per image."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller
        self._image: Any = None
        self._broker: Any = None
        self._by_topic: dict[str, Any] = {}

    def _follow(self) -> None:
        image = self.controller.image
        if image is not self._image:
            self._image, self._broker = image, self.controller.broker_config
            self._by_topic = {}

    def broker_setting(self, name: str) -> int:
        """An int broker config with the dynamic ones on top, as of the current image."""
        self._follow()
        return int(self._broker.get_int(name))

    def __call__(self, topic: str) -> Any:
        self._follow()
        # per topic too: every metadata change re-applies the config of every hosted
        # partition (20,000 log_config() calls on the loop per CreateTopics, issue 22)
        config = self._by_topic.get(topic)
        if config is None:
            config = self._by_topic[topic] = log_config(self._image.topic_configs(topic),
                                                        self._broker)
        return config


def cleaner_config(config: BrokerConfig) -> CleanerConfig:
    """The log cleaner's settings from Kafka's `log.cleaner.*` broker configs."""
    return CleanerConfig(
        enabled=config.get_bool("log.cleaner.enable"),
        threads=max(1, config.get_int("log.cleaner.threads")),
        dedupe_buffer_size=config.get_int("log.cleaner.dedupe.buffer.size"),
        io_buffer_load_factor=config.get_float("log.cleaner.io.buffer.load.factor"),
        backoff_ms=config.get_int("log.cleaner.backoff.ms"),
    )


class Node:
    def __init__(self, data_dir: Path, config: BrokerConfig,
                 prepared: Prepared | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.config = config
        # the data dir's lock and the bound listening sockets (startup.prepare); taken here
        # when the caller did not (a node started from Python)
        self.prepared = prepared
        self.started = False
        # gc.freeze() once serving: set by `odradek serve` (run_node), whose process is the
        # node's alone; a node started inside another program leaves that program's heap be
        self.freeze_heap = False
        # an `odradek serve` process: a node that must stop after a log directory failure
        # ends the process if its graceful stop hangs (process_exit.halt_unless_stopped)
        self.owns_process = False
        self._halt: threading.Timer | None = None
        # the log directories (broker.log_dirs): the data dir first, then `log.dirs`
        self.log_dirs: list[Path] = [self.data_dir]
        self.log_dir_channels: list[Any] = []
        self.log_dir_ids: dict[Path, str] = {}
        # services beside the node (the Schema Registry of `odradek serve`): started once it
        # serves clients, stopped when it ends
        self.services: list[NodeService] = []
        self.stopping = asyncio.Event()
        self._sync_pending = False
        # the dynamic broker configs (this node's, the cluster default) last applied
        self._broker_dynamic: tuple[Any, Any] = ({}, {})
        self._tasks: set[asyncio.Future[None]] = set()
        roles = (tuple(sorted(roles_of(config))) if has_quorum(config)
                 else ("broker", "controller"))
        self.admin = NodeAdmin(config, roles)  # admin HTTP and metrics (issue 18)

    async def run(self) -> int:
        try:
            return await self._run()
        finally:
            await self.admin.stop()

    async def _run(self) -> int:
        config = self.config
        node_id = config.node_id
        loop = asyncio.get_running_loop()
        # installed first so that a SIGTERM during recovery still ends in a clean stop
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_signal, sig)
        if self.prepared is None:
            self.prepared = prepare(self.data_dir, listeners_of(config))
        # serving from the start: /health/live answers while the logs recover
        await self.admin.start(self.prepared.admin_sockets)
        view = self.admin.view
        meta = identity_of(self.data_dir, config)
        view.cluster_id = meta.cluster_id
        self.log_dirs = log_dirs_of(self.data_dir, config)
        # held here: a failed directory's channel must outlive its logs (channel_for is weak)
        self.log_dir_channels = [channel_for(d) for d in self.log_dirs]
        self.log_dir_ids = prepare_log_dirs(self.log_dirs, meta)
        if len(self.log_dirs) > 1:
            log.info("log directories: %s", ", ".join(map(str, self.log_dirs)))
        log.info("node %d of cluster %s, data in %s", node_id, meta.cluster_id, self.data_dir)
        # issue 22: fds are a budget; the soft limit goes up to the hard one before any is used
        was, soft, hard = raise_fd_limit()
        log.info("file descriptors: soft limit %d (was %d), hard limit %d", soft, was, hard)
        DEFAULT_POOL.resize(config.get_int("log.open.files.max"))
        if has_quorum(config):
            from odradek.broker.cluster_node import ClusterNode

            self._watch_data_dir(loop)
            return await ClusterNode(self, meta).run()

        quorum = await asyncio.to_thread(KRaftQuorum.open, self.data_dir, node_id, None,
                                         cluster_id=meta.cluster_id)
        await quorum.start()
        image = await asyncio.to_thread(load_image, quorum, meta.cluster_id)
        controller = Controller(quorum, image, config)
        view.quorum, view.controller = quorum, controller
        # the one voter elects itself at once; it leads once its epoch's first record is
        # committed and every commit listener (the publisher just attached) heard the log:
        # a few loop turns later
        deadline = time.monotonic() + 30
        while not quorum.is_leader and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        advertised = advertised_listeners(config)
        await asyncio.to_thread(controller.bootstrap,
                                read_bootstrap_checkpoint(self.data_dir) or [])
        await asyncio.to_thread(
            controller.register_broker,
            [(a.name, a.host, a.port, 0) for a in advertised], config.get_str("broker.rack"),
            log_dirs=directory_ids(self.log_dir_ids))
        log.info("metadata replayed: %d topics; registered with %s",
                 len(controller.image.topics_by_name),
                 ", ".join(f"{a.name}://{a.host}:{a.port}" for a in advertised))

        partitions = sum(len(t.partitions) for t in controller.image.topics_by_name.values())
        needed = fds_needed(partitions, DEFAULT_POOL.max_open, config.get_int("max.connections"))
        if needed > soft:
            log.warning("file descriptors: %d partitions, log.open.files.max and max.connections "
                        "need up to %d, over the limit of %d", partitions, needed, soft)
        topic_configs = _TopicConfigs(controller)
        # the data dir's failure (or the last log dir's) stops the node (a restart recovers
        # from disk); another log dir's takes only its partitions offline (issue 20, JBOD)
        dir_state = channel_for(self.data_dir)
        self._watch_data_dir(loop)
        log_manager = LogManager(self.data_dir, log_config({}, config),
                                 log_dirs=self.log_dirs[1:])
        rm = ReplicaManager(log_manager, node_id, self.data_dir, topic_configs)
        rm.alter_log_dirs.rate = lambda: topic_configs.broker_setting(MOVE_RATE)
        rm.image_of = lambda: controller.image
        view.log_manager = log_manager
        began = time.monotonic()
        try:
            await asyncio.to_thread(rm.load, controller.image)
        except DuplicateLogDirs as exc:
            await quorum.stop()
            await asyncio.to_thread(quorum.close)
            raise StartRefused(str(exc)) from None
        rm.alter_log_dirs.resume()
        log.info("logs loaded in %.2f s", time.monotonic() - began)
        if config.get_bool("log.cleaner.enable"):
            def last_stable_offset(the_log: Any) -> int | None:
                # the cleaner never goes past what consumers may read as stable
                part = rm.partitions.get((the_log.topic, the_log.partition))
                return None if part is None else part.last_stable_offset

            log_manager.start_cleaner(cleaner_config(config), upper_bound=last_stable_offset)
        self.follow_broker_configs(rm, controller.image)  # those stored by an earlier run
        if self.stopping.is_set():
            await self._close(rm, log_manager, quorum)
            log.info("node %d stopped before serving", node_id)
            return 0

        ctx = BrokerContext(static_config=config, node_id=node_id, cluster_id=meta.cluster_id,
                            log_dir=self.data_dir, advertised=advertised, controller=controller,
                            replica_manager=rm, advertised_apis=advertised_apis(),
                            quorum=quorum, publisher=controller.publisher,
                            schema_validation=SchemaValidation(registry_urls(config)))

        def on_metadata_change(delta: Any) -> None:
            # called on the controller's thread: hop to the loop, coalescing bursts
            loop.call_soon_threadsafe(self.schedule_sync, rm, lambda: controller.image)

        controller.add_listener(on_metadata_change)
        had_internal = {t for t in INTERNAL_TOPICS if t in controller.image.topics_by_name}
        # __consumer_offsets is created and replayed before the first client connects
        coordinators = await start_coordinators(
            config, controller, rm, node_id,
            lambda specs: admin.run(ctx, controller.create_topics, specs, False),
            len(admin.live_brokers(ctx)))
        ctx.group_coordinator = coordinators.group
        ctx.share_coordinator = coordinators.share
        ctx.transaction_coordinator = coordinators.transaction

        _log_internal_topics(controller.image, had_internal)

        server = Server(self.admin.dispatch(Dispatcher(ctx)),
                        config.get_int("socket.request.max.bytes"),
                        limits=ConnectionLimits.from_config(config), stats=self.admin.stats)
        view.ctx = ctx
        self.admin.serving_with(server, listeners_of(config)[0].name)
        # the sockets were bound before anything was opened; listening can still fail when
        # another node bound the same port at the same moment (startup.bind_listener)
        securities = listener_securities(config, lambda: controller.image)
        try:
            for name, socks in self.prepared.by_listener.items():
                for sock in socks:
                    # each listener's requests see its name (Metadata answers its endpoints)
                    own = Dispatcher(dataclasses.replace(ctx, listener_name=name))
                    await server.start("", 0, sock=sock, listener=securities[name],
                                       dispatch=self.admin.dispatch(own))
        except OSError as exc:
            server.stop_accepting()
            await coordinators.stop()
            await self._close(rm, log_manager, quorum)
            raise StartRefused(f"cannot listen: {exc.strerror or exc}") from None

        self.mark_started()

        periodic = asyncio.ensure_future(self.periodic(rm, log_manager))
        await self.stopping.wait()

        log.info("shutting down")
        view.stopping = True
        await self.stop_services()
        server.stop_accepting()
        # answers JoinGroup/SyncGroup still waiting (NOT_COORDINATOR) so the drain ends
        await coordinators.group.stop()
        await server.drain(complete_delayed=rm.complete_delayed_operations)
        await coordinators.stop()
        periodic.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await periodic
        await rm.stop()  # nothing appends once the logs close
        await self.finish_tasks()
        await self._close(rm, log_manager, quorum)
        stop_watching(self.log_dirs)
        log.info("node %d stopped", node_id)
        return 1 if dir_state.offline else 0

    # -- shared with the cluster path (cluster_node.ClusterNode)

    def mark_started(self) -> None:
        self.started = self.admin.view.started = True
        if self.freeze_heap:
            # what the start made (modules, classes, the config, the request stats' counter
            # lists) lives as long as the node: out of the collector's generations, the full
            # collections that requests' allocations trigger walk only what came after
            # (issue 18, bench/RESULTS.md, "Issue 18: the metrics' cost, session 12"). A cycle
            # made before this that dies later is never collected: the start's garbage is
            # collected first.
            gc.collect()
            gc.freeze()
        log.info("node %d started", self.config.node_id)
        for service in self.services:
            service.start(self)

    async def stop_services(self) -> None:
        # first, while the node still serves: the registry leaves its group cleanly
        for service in self.services:
            await asyncio.to_thread(service.stop)

    def advertised_broker_listeners(self) -> list[Listener]:
        return advertised_listeners(self.config)

    def topic_configs_for(self, controller: Any) -> Any:
        return _TopicConfigs(controller)

    def start_cleaner(self, rm: ReplicaManager, log_manager: LogManager) -> None:
        if not self.config.get_bool("log.cleaner.enable"):
            return

        def last_stable_offset(the_log: Any) -> int | None:
            # the cleaner never goes past what consumers may read as stable
            part = rm.partitions.get((the_log.topic, the_log.partition))
            return None if part is None else part.last_stable_offset

        log_manager.start_cleaner(cleaner_config(self.config), upper_bound=last_stable_offset)

    def _watch_data_dir(self, loop: asyncio.AbstractEventLoop) -> None:
        watch_log_dirs(self.log_dirs, self.config,
                       lambda why: loop.call_soon_threadsafe(self._dir_failed, why))

    async def finish_tasks(self, timeout_s: float = 5.0) -> None:
        """At shutdown, once the replica manager stopped: the node's own tasks (metadata
        syncs, which may be waiting on a thread) end before the logs close; what is still
        running after `timeout_s` is cancelled."""
        tasks = [t for t in self._tasks if not t.done()]
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=timeout_s)
        for task in pending:
            task.cancel()
        if pending:
            log.warning("shutdown: %d node tasks still running after %.0f s; cancelled",
                        len(pending), timeout_s)
            await asyncio.wait(pending, timeout=timeout_s)

    async def close_logs(self, rm: ReplicaManager, log_manager: LogManager) -> None:
        await rm.alter_log_dirs.stop()  # moves resume at the next start
        try:
            await asyncio.to_thread(rm.checkpoint)
        except Exception:
            log.exception("final checkpoint failed")
        await asyncio.to_thread(log_manager.close)
        stop_watching(self.log_dirs)

    def _dir_failed(self, why: str = "no log directory is online") -> None:
        log.error("%s: stopping (exit 1); restart to recover from disk", why)
        if self.owns_process and self._halt is None:
            self._halt = halt_unless_stopped(1, DIR_FAILURE_STOP_S, why,
                                             asyncio.get_running_loop())
        self.stopping.set()

    def _on_signal(self, sig: signal.Signals) -> None:
        log.info("received %s", sig.name)
        self.stopping.set()

    def schedule_sync(self, rm: ReplicaManager, image: Any, runtime: Any = None,
                      after: Callable[[], None] | None = None) -> None:
        """Let the partitions (and the coordinators, `runtime()`) follow `image()`, coalescing
        bursts of metadata changes into one sync; then `after()` (JBOD directory
        assignments)."""
        if self._sync_pending or rm.stopped:
            return
        self._sync_pending = True

        async def sync() -> None:
            self._sync_pending = False
            try:
                self.follow_broker_configs(rm, image())
                await rm.sync(image())
                if rm.stopped:
                    return  # shutting down: the coordinators and the logs are closing
                if after is not None:
                    after()
                coordinators = runtime() if runtime is not None else None
                if coordinators is not None:
                    await coordinators.follow_leadership()
            except Exception:
                log.exception("following a metadata change failed")

        task = asyncio.ensure_future(sync())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def follow_broker_configs(self, rm: ReplicaManager, image: Any) -> None:
        """Apply the dynamic broker configs the node reads outside a request: the log
        cleaner's `log.cleaner.*` (Kafka's LogCleaner is reconfigurable too). Topic-level
        defaults (`log.retention.*`, ...) follow the image through the partitions' log
        configs, quotas through the image's client quotas."""
        node_id = self.config.node_id
        dynamic = (image.broker_configs(node_id), image.broker_configs(""))
        if dynamic == self._broker_dynamic:
            return
        self._broker_dynamic = dynamic
        cleaner = getattr(rm.log_manager, "cleaner", None)
        if cleaner is not None:
            cleaner.reconfigure(cleaner_config(self.config.with_dynamic(*dynamic)))

    async def periodic(self, rm: ReplicaManager, log_manager: LogManager) -> None:
        retention_every = max(0.01, self.config.get_int("log.retention.check.interval.ms") / 1000)
        next_retention = time.monotonic() + retention_every
        next_checkpoint = time.monotonic() + CHECKPOINT_INTERVAL_S
        while True:
            # retention runs every log.retention.check.interval.ms, checkpoints every 5 s
            await asyncio.sleep(max(0.0, min(next_retention, next_checkpoint) - time.monotonic()))
            if time.monotonic() >= next_checkpoint:
                next_checkpoint = time.monotonic() + CHECKPOINT_INTERVAL_S
                try:
                    await asyncio.to_thread(rm.checkpoint)
                    await asyncio.to_thread(log_manager.flush_dirty_logs)
                    log_manager.release_idle_fds()  # on the loop, which appends
                except Exception:
                    log.exception("checkpoint failed")
            if time.monotonic() >= next_retention:
                next_retention = time.monotonic() + retention_every
                try:
                    # on the loop: segment lists change under the readers otherwise
                    deleted = log_manager.cleanup()
                    if deleted:
                        log.info("retention deleted %d segments", deleted)
                    for part in list(rm.partitions.values()):
                        part.refresh_high_watermark()
                except Exception:
                    log.exception("retention failed")

    async def _close(self, rm: ReplicaManager, log_manager: LogManager, quorum: Any) -> None:
        await rm.alter_log_dirs.stop()  # moves resume at the next start
        try:
            await asyncio.to_thread(rm.checkpoint)
        except Exception:
            log.exception("final checkpoint failed")
        await asyncio.to_thread(log_manager.close)
        await quorum.stop()
        await asyncio.to_thread(quorum.close)


def _log_internal_topics(image: Any, had: set[str]) -> None:
    """One line for the internal topics this start created (not one per partition)."""
    made = [(t, len(image.topics_by_name[t].partitions)) for t in INTERNAL_TOPICS
            if t not in had and t in image.topics_by_name]
    if made:
        log.info("created internal topics: %s",
                 ", ".join(f"{name} ({count} partitions)" for name, count in made))


def _runner(config: BrokerConfig) -> Any:
    if event_loop_of(config) == "uvloop":
        import uvloop

        return asyncio.Runner(loop_factory=uvloop.new_event_loop)
    return asyncio.Runner()


def _refuse(message: str) -> int:
    """A refused start: one line on stderr (and in the log file, if there is one), exit 2."""
    if logging.getLogger().handlers and not logs_to_stderr():
        log.error("cannot start: %s", message)
    print(f"Error: {message}", file=sys.stderr, flush=True)
    return 2


class NodeService(Protocol):
    """A service `odradek serve` runs beside its node. Made (and its ports bound) before the
    node starts, so a port in use refuses the start; started once the node serves."""

    def start(self, node: Node) -> None: ...

    def stop(self) -> None: ...


# config -> the services to run (raises StartRefused when one cannot be served)
ServiceFactory = Callable[[BrokerConfig, "Path | None"], list[NodeService]]


def run_node(data_dir: Path, config_file: Path | None, overrides: list[str],
             log_file: Path | None = None, services: ServiceFactory | None = None) -> int:
    # once the node stopped, a thread still running must not hold the process
    return exit_unless_held(_run_node(data_dir, config_file, overrides, log_file, services))


def _run_node(data_dir: Path, config_file: Path | None, overrides: list[str],
              log_file: Path | None, services: ServiceFactory | None) -> int:
    try:
        config = load_config(config_file, overrides)
        check_config(config)
        levels = log_levels(config)
        runner = _runner(config)
        admin_listeners = admin_listeners_of(config)
        check_admin_config(config, {lst.port for lst in listeners_of(config)})
    except ConfigError as exc:
        return _refuse(f"invalid configuration: {exc}")
    try:
        setup_logging(levels, log_file, config.get_str("log.format") or "text")
    except OSError as exc:
        return _refuse(f"cannot open log file {log_file}: {exc.strerror or exc}")
    data_dir = Path(data_dir)
    try:
        prepared = prepare(data_dir, listeners_of(config), admin_listeners)
    except StartRefused as exc:
        return _refuse(str(exc))
    node = Node(data_dir, config, prepared)
    node.freeze_heap = True
    node.owns_process = True
    try:
        node.services = services(config, log_file) if services is not None else []
    except StartRefused as exc:
        prepared.undo()
        return _refuse(str(exc))
    try:
        with runner:
            # its close waits a few seconds for worker threads, not for ever
            runner.get_loop().set_default_executor(BoundedExecutor())
            return runner.run(node.run())
    except KeyboardInterrupt:
        return 0
    except StartRefused as exc:
        prepared.undo()
        return _refuse(str(exc))
    except MetadataLogDamaged as exc:  # one line: file, offset, what to do
        log.error("cannot start: %s", exc)
        return 1
    except Exception as exc:
        if node.started:
            log.exception("node failed")
            return 1
        # a failure while starting is one line; the traceback is for log.level=DEBUG
        log.debug("start failed", exc_info=True)
        log.error("cannot start: %s: %s (the traceback is logged at log.level=DEBUG)",
                  type(exc).__name__, exc)
        return 1
    finally:
        for service in node.services:
            service.stop()
        prepared.release()
