"""A node in a cluster (controller.quorum.voters set): its roles wired as Kafka 4 wires them.

Every node: the KRaft quorum (`KRaftQuorum`, a voter on controllers, an observer on
broker-only nodes) and a `MetadataPublisher` holding the committed image.

Controller role: the controller listener's server (raft APIs, registrations, heartbeats,
AlterPartition, forwarded admin requests), the `Controller` writing only while this node
leads the quorum, its bootstrap records on becoming leader, and its timer (`tick`: fencing
brokers whose heartbeats stopped, electing leaders of offline partitions, preferred
elections).

Broker role, in Kafka's order: register with the active controller (`BrokerLifecycle`), wait
until the image holds that registration (every partition change before it is known), load
the logs against that image (a log it does not know is kept as a stray, never deleted),
follow the image, ask to be unfenced, start the coordinators, then serve the client
listeners. SIGTERM: a controlled shutdown (leadership moves away) before the listeners close.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from pathlib import Path
from typing import Any

from odradek.broker.acceptor import ConnectionLimits
from odradek.broker.apis import CONTROLLER_HANDLERS, HANDLERS, Dispatcher, advertised_apis
from odradek.broker.config import (
    Listener,
    broker_listeners,
    controller_listener_names,
    controller_listeners,
    inter_broker_listener_name,
    inter_node_securities,
    listener_securities,
    listener_security_protocol_id,
    roles_of,
    voters_of,
)
from odradek.broker.context import BrokerContext
from odradek.broker.dir_assignments import DirectoryAssignments
from odradek.broker.forwarding import ControllerLink, RemoteController
from odradek.broker.handlers import admin
from odradek.broker.lifecycle import BrokerLifecycle, LifecycleSettings
from odradek.broker.log_dirs import MOVE_RATE, directory_ids
from odradek.broker.schema_validation import SchemaValidation, registry_urls
from odradek.broker.server import LISTEN_BACKLOG, Server
from odradek.broker.startup import StartRefused
from odradek.coordinator.startup import start_coordinators
from odradek.metadata.config.log_config import log_config
from odradek.metadata.controller import Controller
from odradek.metadata.controller_features import SUPPORTED_FEATURES
from odradek.metadata.publisher import MetadataPublisher
from odradek.metadata.raft.client import RaftConfig
from odradek.metadata.raft.kraft import KRaftQuorum
from odradek.network.channel import Channels
from odradek.replication.config import ReplicationConfig
from odradek.replication.manager import ReplicaManager
from odradek.storage.clean_shutdown import clear_markers, previous_broker_epoch, write_marker
from odradek.storage.log_dir_failure import channel_for
from odradek.storage.log_manager import LogManager

log = logging.getLogger("odradek.node")

TICK_S = 0.25  # the active controller's timer
SHUTDOWN_TIMEOUT_S = 30.0  # longest a controlled shutdown waits for the controller
CLOSE_LOGS_TIMEOUT_S = 60.0  # longest closing the logs (final flushes, checkpoints) may take
INTERNAL_RF_GRACE_S = 15.0  # how long a new cluster waits for brokers before internal topics


def raft_config(config: Any) -> RaftConfig:
    return RaftConfig(
        election_timeout_ms=config.get_int("controller.quorum.election.timeout.ms"),
        fetch_timeout_ms=config.get_int("controller.quorum.fetch.timeout.ms"),
        election_backoff_max_ms=config.get_int("controller.quorum.election.backoff.max.ms"),
        request_timeout_ms=config.get_int("controller.quorum.request.timeout.ms"),
        retry_backoff_ms=config.get_int("controller.quorum.retry.backoff.ms"))


class ClusterNode:
    """The cluster half of `node.Node.run` (the single-node path stays in node.py)."""

    def __init__(self, node: Any, meta: Any) -> None:
        self.node = node
        self.config = node.config
        self.node_id = node.config.node_id
        self.meta = meta
        self.roles = roles_of(self.config)
        self.voters = voters_of(self.config)
        self.servers: list[Server] = []
        self.securities: dict[str, Any] = {}  # listener name -> its ListenerSecurity
        self.tasks: list[asyncio.Future[Any]] = []
        self.controller: Controller | None = None
        self.lifecycle: BrokerLifecycle | None = None
        self.channels: Channels | None = None
        self.marker_channels: Channels | None = None
        self.rm: ReplicaManager | None = None
        self.dir_assignments: DirectoryAssignments | None = None
        self.log_manager: LogManager | None = None
        self.coordinators: Any = None
        self.quorum: KRaftQuorum | None = None
        self.peer_security: Any = None  # config.InterNodeSecurities

    @property
    def stopping(self) -> asyncio.Event:
        return self.node.stopping  # type: ignore[no-any-return]

    async def _until(self, what: Any) -> bool:
        """Wait for an awaitable or the node's stop, whichever first; True when `what` won."""
        stop = asyncio.ensure_future(self.stopping.wait())
        task = asyncio.ensure_future(what)
        done, _ = await asyncio.wait({stop, task}, return_when=asyncio.FIRST_COMPLETED)
        for t in (stop, task):
            if t not in done:
                t.cancel()
        return task in done

    def _server(self, ctx: BrokerContext, handlers: Any, forward: bool) -> Server:
        return Server(self.node.admin.dispatch(Dispatcher(ctx, handlers, forward=forward)),
                      self.config.get_int("socket.request.max.bytes"),
                      limits=ConnectionLimits.from_config(self.config),
                      stats=self.node.admin.stats)

    async def _listen(self, server: Server, lst: Listener) -> None:
        try:
            for sock in self.node.prepared.by_listener.get(lst.name, []):
                await server.start("", 0, sock=sock, listener=self.securities[lst.name])
        except OSError as exc:
            server.stop_accepting()
            raise StartRefused(f"cannot listen on {lst.name}: {exc.strerror or exc}") from None
        self.servers.append(server)
        self.node.admin.serving_with(server, lst.name)

    # ---------------------------------------------------------------- the whole life

    async def run(self) -> int:
        config, node_id = self.config, self.node_id
        loop = asyncio.get_running_loop()
        addresses = {v.node_id: (v.host, v.port) for v in self.voters.values()}
        self.quorum = quorum = await asyncio.to_thread(
            KRaftQuorum.open, self.node.data_dir, node_id, addresses,
            cluster_id=self.meta.cluster_id, config=raft_config(config),
            snapshot_bytes=config.get_int("metadata.log.max.record.bytes.between.snapshots"),
            snapshot_interval_ms=config.get_int("metadata.log.max.snapshot.interval.ms"))
        # the node's own connections to its peers, as their listeners are secured
        self.peer_security = inter_node_securities(config)
        quorum.channel_security = self.peer_security.controller
        publisher = MetadataPublisher(self.meta.cluster_id)
        publisher.attach(quorum)
        self.securities = listener_securities(config, lambda: publisher.image)
        self.node.admin.view.quorum = quorum
        advertised = self.node.advertised_broker_listeners()
        base = BrokerContext(static_config=config, node_id=node_id,
                             cluster_id=self.meta.cluster_id, log_dir=self.node.data_dir,
                             advertised=advertised, controller=None, replica_manager=None,
                             quorum=quorum, publisher=publisher,
                             schema_validation=SchemaValidation(registry_urls(config)))
        if "controller" in self.roles:
            await self._start_controller(base, quorum, publisher)
        await quorum.start()
        log.info("node %d (%s) in a quorum of voters %s", node_id, ",".join(sorted(self.roles)),
                 ",".join(str(v) for v in sorted(addresses)))
        try:
            if "broker" in self.roles:
                await self._start_broker(base, quorum, publisher, addresses, loop)
            if not self.stopping.is_set():
                self.node.mark_started()
                await self.stopping.wait()
        finally:
            await self._shutdown()
        state = channel_for(self.node.data_dir)
        return 1 if state.offline else 0

    # ---------------------------------------------------------------- controller

    async def _start_controller(self, base: BrokerContext, quorum: KRaftQuorum,
                                publisher: MetadataPublisher) -> None:
        self.controller = controller = Controller(quorum, publisher, self.config)
        self.node.admin.view.controller = controller
        # its own admin lock: a broker on this node waits, holding its lock, for the answer
        # of the controller it may be (a shared lock would deadlock)
        ctx = dataclasses.replace(base, controller=controller, admin_lock=asyncio.Lock(),
                                  advertised_apis=advertised_apis(CONTROLLER_HANDLERS),
                                  listener_name=controller_listener_names(self.config)[0])
        server = self._server(ctx, CONTROLLER_HANDLERS, forward=False)
        for lst in controller_listeners(self.config):
            await self._listen(server, lst)

        def on_leadership(is_leader: bool, epoch: int) -> None:
            if is_leader:
                log.info("active controller (quorum leader of epoch %d)", epoch)
                self._spawn(self._bootstrap_metadata())

        quorum.add_leadership_listener(on_leadership)
        self.tasks.append(asyncio.ensure_future(self._tick()))

    async def _bootstrap_metadata(self) -> None:
        assert self.controller is not None
        try:
            from odradek.metadata.bootstrap import read_bootstrap_checkpoint

            formatted = await asyncio.to_thread(read_bootstrap_checkpoint, self.node.data_dir)
            await asyncio.to_thread(self.controller.bootstrap, formatted or [])
        except Exception as exc:  # lost leadership meanwhile: the next leader writes them
            log.info("bootstrap records not written: %s", exc)

    async def _tick(self) -> None:
        assert self.controller is not None
        controller = self.controller
        while True:
            await asyncio.sleep(TICK_S)
            if not controller.is_active:
                continue
            try:
                await asyncio.to_thread(controller.tick)
            except Exception as exc:
                log.debug("controller tick: %s", exc)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self.node._tasks.add(task)
        task.add_done_callback(self.node._tasks.discard)

    # ---------------------------------------------------------------- broker

    async def _start_broker(self, base: BrokerContext, quorum: KRaftQuorum,
                            publisher: MetadataPublisher, addresses: dict[int, tuple[str, int]],
                            loop: asyncio.AbstractEventLoop) -> None:
        config, node_id = self.config, self.node_id
        peers = self.peer_security
        self.channels = channels = Channels(f"broker-{node_id}", addresses.get,
                                            security=peers.controller)
        link = ControllerLink(channels, lambda: quorum.leader_id, list(addresses), node_id)
        link.bind(loop)
        # read before anything is written, and removed: a crash of this run is unclean
        previous_epoch = previous_broker_epoch(self.node.log_dirs)
        clear_markers(self.node.log_dirs)
        if previous_epoch < 0:
            log.info("no clean shutdown marker in every log directory (a first start, or a "
                     "crash): the controller takes this broker out of every ISR until caught up")
        settings = LifecycleSettings(
            node_id=node_id, cluster_id=self.meta.cluster_id,
            listeners=[(a.name, a.host, a.port, listener_security_protocol_id(config, a.name))
                       for a in base.advertised],
            features=[(n, lo, hi) for n, (lo, hi) in SUPPORTED_FEATURES.items()],
            rack=config.get_str("broker.rack"),
            heartbeat_interval_ms=config.get_int("broker.heartbeat.interval.ms"),
            log_dirs=directory_ids(self.node.log_dir_ids),
            offline_log_dirs=lambda: directory_ids(
                {d: i for d, i in self.node.log_dir_ids.items() if channel_for(d).offline}),
            previous_broker_epoch=previous_epoch)
        self.lifecycle = lifecycle = BrokerLifecycle(
            settings, channels, lambda: quorum.leader_id, list(addresses),
            lambda: publisher.offset)
        link.broker_epoch = lambda: lifecycle.broker_epoch
        # Once unfenced, Metadata names this broker while it still starts its coordinators:
        # as Kafka's bound server socket, the kernel queues early clients in the backlog
        # (served when the listeners start) instead of refusing them at connect.
        for lst in broker_listeners(config):
            for sock in self.node.prepared.by_listener.get(lst.name, []):
                sock.listen(LISTEN_BACKLOG)
        lifecycle.start()
        self.node.admin.view.lifecycle = lifecycle
        if not await self._until(lifecycle.registered.wait()):
            return
        # the image must hold our registration before the logs are judged against it
        while publisher.offset < lifecycle.broker_epoch:
            if not await self._until(asyncio.sleep(0.05)):
                return
        remote = RemoteController(link, publisher, quorum, config, node_id)
        inter = inter_broker_listener_name(config)

        def endpoint(broker_id: int) -> tuple[str, int] | None:
            reg = publisher.image.brokers.get(broker_id)
            if reg is None:
                return None
            ep = next((e for e in reg.endpoints if e.name.upper() == inter), None)
            return None if ep is None else (ep.host, ep.port)

        # WriteTxnMarkers to the leaders on other brokers, over the inter-broker listener
        # (Kafka's TransactionMarkerChannelManager has its own network client too)
        self.marker_channels = Channels(f"txn-markers-{node_id}", endpoint,
                                        security=peers.inter_broker)
        self.log_manager = log_manager = LogManager(self.node.data_dir, log_config({}, config),
                                                    log_dirs=self.node.log_dirs[1:])
        topic_configs = self.node.topic_configs_for(remote)
        self.rm = rm = ReplicaManager(
            log_manager, node_id, self.node.data_dir, topic_configs,
            alter_partition=link.alter_partition, broker_endpoint=endpoint,
            config=ReplicationConfig.from_config(config),
            broker_epoch=lambda: lifecycle.broker_epoch, channel_security=peers.inter_broker)
        rm.alter_log_dirs.rate = lambda: topic_configs.broker_setting(MOVE_RATE)
        rm.image_of = lambda: publisher.image
        began = time.monotonic()
        image = publisher.image

        def load() -> None:
            # rm.load starts follower fetchers (asyncio.ensure_future) for the partitions this
            # node follows; from this worker thread their tasks go to the node's loop, which
            # runs them once the load returns. TODO(replication): start them from sync.
            asyncio.set_event_loop(loop)
            try:
                rm.load(image)
            finally:
                asyncio.set_event_loop(None)

        await asyncio.to_thread(load)
        assignments = self._directory_assignments(link, lifecycle, rm, publisher, loop)
        rm.alter_log_dirs.resume()
        log.info("logs loaded in %.2f s (metadata at offset %d)", time.monotonic() - began,
                 publisher.offset)
        self.node.start_cleaner(rm, log_manager)
        self.node.follow_broker_configs(rm, publisher.image)  # those stored by an earlier run
        self.node.admin.view.log_manager = log_manager
        ctx = dataclasses.replace(base, controller=remote, replica_manager=rm,
                                  advertised_apis=advertised_apis(HANDLERS), lifecycle=lifecycle,
                                  link=link)

        def on_change(delta: Any, image: Any) -> None:
            loop.call_soon_threadsafe(self.node.schedule_sync, rm, lambda: publisher.image,
                                      self._coordinator_runtime,
                                      lambda: assignments.reconcile(publisher.image, rm))

        publisher.add_listener(on_change)
        await rm.sync(publisher.image)
        assignments.reconcile(publisher.image, rm)
        lifecycle.set_ready()
        if not await self._until(lifecycle.unfenced.wait()):
            return
        link.prefetch_producer_ids()
        live = await self._brokers_for_internal_topics(publisher)
        self.coordinators = coordinators = await start_coordinators(
            config, remote, rm, node_id,
            lambda specs: admin.run(ctx, remote.create_topics, specs, False), live,
            self.marker_channels)
        ctx.group_coordinator = coordinators.group
        ctx.share_coordinator = coordinators.share
        ctx.transaction_coordinator = coordinators.transaction
        self.node.admin.view.ctx = ctx
        await coordinators.runtime.follow_leadership()
        self.tasks.append(asyncio.ensure_future(self.node.periodic(rm, log_manager)))
        for lst in broker_listeners(config):
            view = dataclasses.replace(ctx, listener_name=lst.name)
            await self._listen(self._server(view, HANDLERS, forward=True), lst)

    def _directory_assignments(self, link: ControllerLink, lifecycle: BrokerLifecycle,
                               rm: ReplicaManager, publisher: MetadataPublisher,
                               loop: asyncio.AbstractEventLoop) -> DirectoryAssignments:
        """KIP-858 on this broker: the controller hears where each replica's log is (after
        a metadata change, after a move between directories), and of a directory that
        fails at once (a heartbeat now), while its partitions stop fetching here."""
        assignments = DirectoryAssignments(self.node_id, self.node.log_dir_ids, link,
                                           lambda: lifecycle.broker_epoch)
        self.dir_assignments = assignments
        rm.alter_log_dirs.on_moved = lambda topic, index: assignments.reconcile(
            publisher.image, rm)

        def failed(directory: Path, why: str) -> None:  # on the failing thread
            def on_loop() -> None:
                rm.take_dir_offline(directory)
                lifecycle.heartbeat_now()
            loop.call_soon_threadsafe(on_loop)

        for directory in self.node.log_dirs[1:]:  # the first's failure stops the node
            channel_for(directory).add_offline_listener(failed)
        return assignments

    def _mark_clean_shutdown(self) -> None:
        """Every log flushed and checkpointed: say so in each online log directory, with our
        broker epoch, for the next start's registration (KIP-966)."""
        epoch = -1 if self.lifecycle is None else self.lifecycle.broker_epoch
        if epoch < 0:
            return  # never registered: the next start registers as unclean
        for directory in self.node.log_dirs:
            if not channel_for(directory).offline:
                write_marker(directory, epoch)

    def _coordinator_runtime(self) -> Any:
        return None if self.coordinators is None else self.coordinators.runtime

    async def _brokers_for_internal_topics(self, publisher: MetadataPublisher) -> int:
        """The replication factor cap of the internal topics a new cluster creates: Kafka
        refuses them with fewer live brokers than their factor (default 3); the brokers of a
        cluster start together, so wait a little for them before capping."""
        image = publisher.image
        if all(t in image.topics_by_name for t in ("__consumer_offsets", "__transaction_state")):
            return max(1, len(image.active_brokers()))
        wanted = max(self.config.get_int("offsets.topic.replication.factor"),
                     self.config.get_int("transaction.state.log.replication.factor"))
        deadline = time.monotonic() + INTERNAL_RF_GRACE_S
        while True:
            live = len(publisher.image.active_brokers())
            if live >= wanted or time.monotonic() >= deadline or self.stopping.is_set():
                return max(1, live)
            await asyncio.sleep(0.1)

    # ---------------------------------------------------------------- shutdown

    async def _step(self, what: str, coro: Any, timeout_s: float = 10.0) -> bool:
        """One shutdown step, bounded: with the quorum going down around us a step waiting
        on the controller (a held fetch, a heartbeat) must not hold the exit. True when the
        step finished."""
        try:
            await asyncio.wait_for(coro, timeout_s)
        except TimeoutError:
            log.warning("shutdown: %s did not finish within %.0f s; going on", what, timeout_s)
        except Exception:
            log.exception("shutdown: %s failed", what)
        else:
            return True
        return False

    async def _shutdown(self) -> None:
        log.info("shutting down")
        self.node.admin.view.stopping = True
        await self.node.stop_services()
        if self.lifecycle is not None and self.lifecycle.unfenced.is_set():
            # Kafka's controlled shutdown: leadership moves while we still serve
            began = time.monotonic()
            done = await self.lifecycle.controlled_shutdown(SHUTDOWN_TIMEOUT_S)
            log.info("controlled shutdown %s in %.2f s",
                     "confirmed" if done else "not confirmed", time.monotonic() - began)
        if self.lifecycle is not None:
            await self._step("the broker lifecycle", self.lifecycle.stop())
        if self.dir_assignments is not None:
            await self._step("directory assignments", self.dir_assignments.stop())
        for server in self.servers:
            server.stop_accepting()
        if self.coordinators is not None:
            await self._step("the group coordinator", self.coordinators.group.stop())
        rm = self.rm
        for server in self.servers:
            await self._step("draining requests", server.drain(
                timeout=5.0,
                complete_delayed=rm.complete_delayed_operations if rm is not None else None))
        if self.coordinators is not None:
            await self._step("the coordinators", self.coordinators.stop())
        for task in self.tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(task, 5.0)
        if rm is not None:
            await self._step("replication", rm.stop())
        # metadata syncs in flight end (they start nothing now) before the logs close
        await self.node.finish_tasks()
        if self.quorum is not None:
            await self._step("the quorum", self.quorum.stop())
        if self.channels is not None:
            await self._step("controller channels", self.channels.close())
        if self.marker_channels is not None:
            await self._step("marker channels", self.marker_channels.close())
        # Finding 11: these ran unbounded, and a node whose log directory went offline
        # (fsyncs failing with EIO) never exited. A thread left behind by a timed-out step
        # is waited for no longer than process_exit allows; no clean-shutdown marker then.
        if rm is not None and self.log_manager is not None and await self._step(
                "closing the logs", self.node.close_logs(rm, self.log_manager),
                CLOSE_LOGS_TIMEOUT_S):
            self._mark_clean_shutdown()
        if self.quorum is not None:
            await self._step("closing the metadata log", asyncio.to_thread(self.quorum.close),
                             CLOSE_LOGS_TIMEOUT_S)
        log.info("node %d stopped", self.node_id)
